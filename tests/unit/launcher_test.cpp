// A launcher's environment read by one function (cluster/launcher.hpp): torchrun's, Slurm's,
// Open MPI's and PMI's variables, which launcher wins when several are set, where rank 0's
// center listens, Slurm's compressed node lists, and a world size that the config contradicts.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "cluster/launcher.hpp"
#include "config/config.hpp"
#include "util/errors.hpp"

using namespace tether;

namespace {

using Variables = std::map<std::string, std::string>;

std::optional<Launcher> read(const Variables& v) {
    return read_launcher([&v](const char* name) -> const char* {
        const auto it = v.find(name);
        return it == v.end() ? nullptr : it->second.c_str();
    });
}

std::string error_of(const Variables& v) {
    try {
        read(v);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("no launcher: nothing set, or only variables that name no rank") {
    CHECK_FALSE(read({}).has_value());
    CHECK_FALSE(read({{"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "7"}}).has_value());
    CHECK_FALSE(read({{"RANK", ""}}).has_value());  // set but empty is unset
}

TEST_CASE("each launcher's variables") {
    struct Row {
        const char* what;
        Variables variables;
        const char* name;
        int rank, world, local_rank, local_world;
        const char* host;
        int port;
        const char* job;
        int attempt = 0;
    };
    const Row rows[] = {
        {"torchrun",
         {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "abc"}},
         "torchrun", 5, 8, 1, 4, "node0", 29501, "abc"},
        {"torchrun's second attempt (--max-restarts): a job id of its own, so no rank reads the last one's secret",
         {{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"TORCHELASTIC_RUN_ID", "abc"}, {"TORCHELASTIC_RESTART_COUNT", "1"}},
         "torchrun", 1, 3, 1, 3, "", 29501, "abc.attempt-1", 1},
        {"torchrun's first attempt says restart 0: the plain job id",
         {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "abc"}, {"TORCHELASTIC_RESTART_COUNT", "0"}},
         "torchrun", 0, 2, 0, 2, "", 29501, "abc"},
        {"srun --requeue's second run", {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "991"},
                                         {"SLURM_RESTART_COUNT", "2"}},
         "slurm", 0, 2, 0, 2, "", 29501, "991.attempt-2", 2},
        {"a restarted attempt without a job id is still counted (it resumes by itself)",
         {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "3"}}, "torchrun", 0, 2, 0, 2, "", 29501, "", 3},
        {"Open MPI (no host: TETHER_CENTER names it)",
         {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "6"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}, {"OMPI_MCA_ess_base_jobid", "123"}},
         "openmpi", 3, 6, 0, 3, "", 29501, "123"},
        {"srun with --ntasks-per-node",
         {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS_PER_NODE", "4"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"SLURM_JOB_ID", "991"}},
         "slurm", 6, 8, 2, 4, "gpu07", 29501, "991"},
        {"srun: tasks per node from SLURM_TASKS_PER_NODE and the node's index; the step's node list first",
         {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "3(x2),1"},
          {"SLURM_NODEID", "2"}, {"SLURM_STEP_NODELIST", "n[3-5]"}, {"SLURM_JOB_NODELIST", "n[1-5]"}},
         "slurm", 6, 7, 0, 1, "n3", 29501, ""},
        {"MPICH's mpiexec (PMI)",
         {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}},
         "pmi", 2, 4, 0, 2, "", 29501, ""},
        {"PMIx with PMI_SIZE; no local variables: as if all on one host",
         {{"PMIX_RANK", "1"}, {"PMI_SIZE", "3"}, {"PMIX_NAMESPACE", "ns1"}},
         "pmi", 1, 3, 1, 3, "", 29501, "ns1"},
    };
    for (const Row& row : rows) {
        CAPTURE(row.what);
        const auto l = read(row.variables);
        REQUIRE(l.has_value());
        CHECK(l->name == row.name);
        CHECK(l->rank == row.rank);
        CHECK(l->world_size == row.world);
        CHECK(l->local_rank == row.local_rank);
        CHECK(l->local_world_size == row.local_world);
        CHECK(l->center_host == row.host);
        CHECK(l->port == row.port);
        CHECK(l->job_id == row.job);
        CHECK(l->attempt == row.attempt);
    }
}

TEST_CASE("which launcher wins when several have set their variables") {
    const Variables slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                             {"SLURM_JOB_NODELIST", "node[01-04,07],gpu3"}, {"SLURM_JOB_ID", "55"}};
    // torchrun under srun: torchrun's ranks; Slurm's first node still names rank 0's host.
    Variables v = slurm;
    v.insert({{"RANK", "3"}, {"WORLD_SIZE", "8"}});
    auto l = read(v);
    CHECK(l->name == "torchrun");
    CHECK(l->rank == 3);
    CHECK(l->center_host == "node01");
    CHECK(l->job_id == "55");  // Slurm's job, as torchrun gives none here
    // mpirun inside an sbatch job (SLURM_PROCID is the batch step's 0): Open MPI's ranks.
    v = slurm;
    v.insert({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"PMIX_RANK", "1"}, {"PMI_SIZE", "9"}});
    l = read(v);
    CHECK(l->name == "openmpi");
    CHECK(l->world_size == 4);
    // MPICH's mpiexec inside Slurm: PMI's ranks.
    v = slurm;
    v.insert({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}});
    CHECK(read(v)->name == "pmi");
    // torchrun beats Open MPI.
    CHECK(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}})->name ==
          "torchrun");
}

TEST_CASE("the center's host and port: TETHER_CENTER, TETHER_PORT, MASTER_PORT + 1, the default") {
    const Variables mpi = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
    Variables v = mpi;
    v["TETHER_CENTER"] = "head:7000";
    v["MASTER_ADDR"] = "ignored";
    v["TETHER_PORT"] = "6000";
    auto l = read(v);
    CHECK(l->center_host == "head");
    CHECK(l->port == 7000);
    CHECK(l->center_address() == "tcp://head:7000");
    CHECK(l->center_address(3) == "tcp://head:7000,tcp://head:7001,tcp://head:7002");
    CHECK(l->bind_address(2) == "tcp://*:7000,tcp://*:7001");
    v["TETHER_CENTER"] = "head";  // no port: TETHER_PORT's
    CHECK(read(v)->port == 6000);
    v["TETHER_CENTER"] = "[fd00::1]:7100";
    l = read(v);
    CHECK(l->center_host == "fd00::1");
    CHECK(l->center_address() == "tcp://[fd00::1]:7100");
    v = mpi;
    v["MASTER_ADDR"] = "m";
    v["MASTER_PORT"] = "1234";
    l = read(v);
    CHECK(l->port == 1235);
    CHECK(l->center_variables == "MASTER_ADDR, MASTER_PORT + 1");
    l = read(mpi);
    CHECK(l->port == kDefaultCenterPort);
    CHECK(l->center_host.empty());
    try {
        l->center_address();
        FAIL("an address without a host");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("TETHER_CENTER") != std::string::npos);
    }
    v = mpi;
    v["TETHER_CONNECT_TIMEOUT_MS"] = "250";
    CHECK(read(v)->connect_timeout_ms == 250);
}

TEST_CASE("unusable values are refused by name") {
    CHECK(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK=\"x\"") != std::string::npos);
    CHECK(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("rank 2 of a world of 2") != std::string::npos);
    CHECK(error_of({{"PMIX_RANK", "0"}}).find("PMI_SIZE is not") != std::string::npos);
    CHECK(error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"TETHER_CENTER", "h:99999"}})
              .find("TETHER_CENTER=\"h:99999\"") != std::string::npos);
    CHECK(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "node[01-04"}})
              .find("SLURM_JOB_NODELIST=\"node[01-04\": '[' without ']'") != std::string::npos);
    CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "two"}})
              .find("TORCHELASTIC_RESTART_COUNT=\"two\": expected the launcher's restart count") != std::string::npos);
}

TEST_CASE("Slurm's compressed node lists and tasks per node") {
    const std::pair<const char*, const char*> lists[] = {
        {"node[01-04,07],gpu3", "node01"}, {"gpu3,node[01-04]", "gpu3"}, {"n7", "n7"},
        {"rack[2-3]-n[8-9]", "rack2-n8"}, {"a[009,010]", "a009"}, {"x[5]", "x5"}};
    for (const auto& [list, first] : lists) {
        CAPTURE(list);
        CHECK(first_slurm_host(list, "SLURM_JOB_NODELIST") == first);
    }
    for (const char* bad : {"", ",n1", "n[a-b]", "n]", "n[]"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(first_slurm_host(bad, "V"), ConfigError);
    }
    CHECK(slurm_tasks_on_node("2(x3),1", 0) == 2);
    CHECK(slurm_tasks_on_node("2(x3),1", 2) == 2);
    CHECK(slurm_tasks_on_node("2(x3),1", 3) == 1);
    CHECK(slurm_tasks_on_node("2(x3),1", 4) == 0);
    CHECK(slurm_tasks_on_node("4", 0) == 4);
    CHECK(slurm_tasks_on_node("2(x", 0) == 0);
}

TEST_CASE("cluster.workers follows the world size; a config that says otherwise is refused at once") {
    const auto l = read({{"RANK", "1"}, {"WORLD_SIZE", "4"}});
    const nlohmann::json base = {{"strategy", {{"name", "adag"}}}};
    RunConfig c = parse_config(base, nullptr, &*l);
    CHECK(c.cluster.workers == 4);
    CHECK(c.resolved["cluster"]["workers"] == 4);  // a resumed run reads it back unchanged
    nlohmann::json no_training = base;
    no_training["cluster"] = {{"center_trains", false}};
    CHECK(parse_config(no_training, nullptr, &*l).cluster.workers == 3);
    // The default moving rate follows the workers: 0.9 / 4.
    nlohmann::json easgd = {{"strategy", {{"name", "aeasgd"}}}};
    CHECK(parse_config(easgd, nullptr, &*l).cluster.strategy->describe()["moving_rate"].get<double>() ==
          doctest::Approx(0.9 / 4));
    nlohmann::json wrong = base;
    wrong["cluster"] = {{"workers", 3}};
    try {
        parse_config(wrong, nullptr, &*l);
        FAIL("cluster.workers 3 accepted in a world of 4");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(what.find("cluster.workers: 3") != std::string::npos);
        CHECK(what.find("world size is 4 (torchrun: RANK, WORLD_SIZE)") != std::string::npos);
    }
    nlohmann::json alone = base;
    alone["cluster"] = {{"center_trains", false}};
    const auto one = read({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    CHECK_THROWS_WITH_AS(parse_config(alone, nullptr, &*one),
                         doctest::Contains("no rank trains"), ConfigError);
    CHECK(parse_config(base).cluster.workers == 1);  // no launcher: the usual default
}

TEST_CASE("a server on every rank: where rank k's server binds and how the others reach it") {
    const Variables one_host = {{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "3"},
                                {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
    const Launcher l = *read(one_host);
    CHECK(l.rank_server_bind_address() == "tcp://*:29503");  // the center's port 29501, + rank 2
    CHECK(l.rank_server_address() == "tcp://127.0.0.1:29503");  // the route to rank 0's host
    // TETHER_HOST names it: an address is bound alone, a name on every interface.
    Variables named = one_host;
    named["TETHER_HOST"] = "127.0.0.1";
    CHECK(read(named)->rank_server_bind_address() == "tcp://127.0.0.1:29503");
    named["TETHER_HOST"] = "node07";
    CHECK(read(named)->rank_server_bind_address() == "tcp://*:29503");
    CHECK(read(named)->rank_server_address() == "tcp://node07:29503");
    // Ranks on other hosts cannot reach a loopback address: refused, saying what to set.
    Variables spread = one_host;
    spread["LOCAL_WORLD_SIZE"] = "1";
    spread["LOCAL_RANK"] = "0";
    std::string error;
    try {
        read(spread)->rank_server_address();
    } catch (const ConfigError& e) {
        error = e.what();
    }
    CHECK(error.find("is 127.0.0.1, the loopback, but 2 rank(s) run on other hosts") != std::string::npos);
    CHECK(error.find("set TETHER_HOST") != std::string::npos);
}
