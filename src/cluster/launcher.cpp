#include "cluster/launcher.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "cluster/cluster_settings.hpp"
#include "transport/tcp_probe.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

// The variables that make a process a launcher's rank, in the order they win.
constexpr const char* kRankVariables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};

class Reader {
public:
    explicit Reader(const Environment& environment) : environment_(environment) {}

    const char* get(const char* name) const {
        const char* value = environment_(name);
        return value && *value ? value : nullptr;
    }
    bool has(const char* name) const { return get(name) != nullptr; }
    // An integer from `min`, or ConfigError naming the variable.
    int integer(const char* name, int min) const {
        const char* value = get(name);
        char* end = nullptr;
        errno = 0;
        const long n = value ? std::strtol(value, &end, 10) : 0;
        if (!value || *end != '\0' || errno != 0 || n < min || n > 1'000'000)
            throw ConfigError(std::string(name) + "=\"" + (value ? value : "") + "\": expected an integer from " +
                              std::to_string(min) + " (the launcher's environment)");
        return int(n);
    }
    // The first of `names` that is set, as an integer; `fallback` when none is.
    int first(std::initializer_list<const char*> names, int min, int fallback) const {
        for (const char* name : names)
            if (has(name)) return integer(name, min);
        return fallback;
    }

private:
    const Environment& environment_;
};

// Rank, world size and place on the host, as the winning launcher gives them.
bool read_ranks(const Reader& env, Launcher& l) {
    if (env.has("RANK") && env.has("WORLD_SIZE")) {
        l.name = "torchrun";
        l.variables = "RANK, WORLD_SIZE";
        l.rank = env.integer("RANK", 0);
        l.world_size = env.integer("WORLD_SIZE", 1);
        l.local_rank = env.first({"LOCAL_RANK"}, 0, -1);
        l.local_world_size = env.first({"LOCAL_WORLD_SIZE"}, 1, 0);
        l.job_id = env.has("TORCHELASTIC_RUN_ID") ? env.get("TORCHELASTIC_RUN_ID") : "";
    } else if (env.has("OMPI_COMM_WORLD_RANK")) {
        l.name = "openmpi";
        l.variables = "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE";
        l.rank = env.integer("OMPI_COMM_WORLD_RANK", 0);
        l.world_size = env.integer("OMPI_COMM_WORLD_SIZE", 1);
        l.local_rank = env.first({"OMPI_COMM_WORLD_LOCAL_RANK"}, 0, -1);
        l.local_world_size = env.first({"OMPI_COMM_WORLD_LOCAL_SIZE"}, 1, 0);
        l.job_id = env.has("OMPI_MCA_ess_base_jobid") ? env.get("OMPI_MCA_ess_base_jobid") : "";
    } else if (env.has("PMIX_RANK") || env.has("PMI_RANK")) {
        const char* rank = env.has("PMIX_RANK") ? "PMIX_RANK" : "PMI_RANK";
        l.name = "pmi";
        l.variables = std::string(rank) + ", PMI_SIZE";
        l.rank = env.integer(rank, 0);
        if (!env.has("PMI_SIZE"))
            throw ConfigError(std::string(rank) + " is set but PMI_SIZE is not: the world size is unknown; launch with "
                              "mpirun/mpiexec of an MPI that sets it, torchrun or srun");
        l.world_size = env.integer("PMI_SIZE", 1);
        l.local_rank = env.first({"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, 0, -1);
        l.local_world_size = env.first({"MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}, 1, 0);
        l.job_id = env.has("PMIX_NAMESPACE") ? env.get("PMIX_NAMESPACE") : env.has("PMI_JOBID") ? env.get("PMI_JOBID") : "";
    } else if (env.has("SLURM_PROCID")) {
        l.name = "slurm";
        l.variables = "SLURM_PROCID, SLURM_NTASKS";
        l.rank = env.integer("SLURM_PROCID", 0);
        l.world_size = env.integer("SLURM_NTASKS", 1);
        l.local_rank = env.first({"SLURM_LOCALID"}, 0, -1);
        l.local_world_size = env.first({"SLURM_NTASKS_PER_NODE"}, 1, 0);
        if (l.local_world_size == 0 && env.has("SLURM_TASKS_PER_NODE"))
            l.local_world_size = slurm_tasks_on_node(env.get("SLURM_TASKS_PER_NODE"), env.first({"SLURM_NODEID"}, 0, 0));
    } else {
        return false;
    }
    if (l.rank >= l.world_size)
        throw ConfigError(l.variables + ": rank " + std::to_string(l.rank) + " of a world of " + std::to_string(l.world_size) +
                          "; a rank is below the world size");
    // A launcher that does not say (or not all of it): as if every rank shared this host, so
    // that a rank takes too few cores rather than too many.
    if (l.local_rank < 0 || l.local_world_size <= 0) {
        l.local_rank = l.local_rank < 0 ? l.rank : l.local_rank;
        l.local_world_size = l.local_world_size <= 0 ? l.world_size : l.local_world_size;
    }
    if (env.has("SLURM_JOB_ID") && l.job_id.empty()) l.job_id = env.get("SLURM_JOB_ID");
    // A restarted attempt (torchrun --max-restarts, srun --requeue) is a job of its own: its
    // ranks must not read the secret file a killed attempt left before the new rank 0 replaced it.
    for (const char* attempt : {"TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"})
        if (env.has(attempt) && std::string(env.get(attempt)) != "0") {
            const std::string count = env.get(attempt);
            char* end = nullptr;
            const long n = std::strtol(count.c_str(), &end, 10);
            if (count.empty() || *end != '\0' || n < 0 || n > 1'000'000)
                throw ConfigError(std::string(attempt) + "=\"" + count + "\": expected the launcher's restart count, 0 or more");
            l.attempt = int(n);
            if (!l.job_id.empty()) l.job_id += ".attempt-" + count;
            break;
        }
    return true;
}

// "host[:port]" (host may be [IPv6]) of TETHER_CENTER.
void split_center(const std::string& value, std::string& host, int& port) {
    // "[::1]:5555" and "[::1]" bracket an IPv6 address; a bare one ("::1") has no port.
    std::size_t colon = std::string::npos;
    if (value.front() == '[') {
        const auto bracket = value.find(']');
        if (bracket != std::string::npos && bracket + 1 < value.size() && value[bracket + 1] == ':') colon = bracket + 1;
    } else if (value.find(':') == value.rfind(':')) {
        colon = value.find(':');
    }
    host = value.substr(0, colon);
    if (host.empty()) throw ConfigError("TETHER_CENTER=\"" + value + "\": expected HOST or HOST:PORT (rank 0's host)");
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (colon == std::string::npos) return;
    const std::string digits = value.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || p < 1 || p > 65535)
        throw ConfigError("TETHER_CENTER=\"" + value + "\": the port must be from 1 to 65535");
    port = int(p);
}

void read_center(const Reader& env, Launcher& l) {
    std::string host_from, port_from;
    if (env.has("TETHER_CENTER")) {
        split_center(env.get("TETHER_CENTER"), l.center_host, l.port);
        host_from = "TETHER_CENTER";
        if (l.port > 0) port_from = "TETHER_CENTER";
    } else if (env.has("MASTER_ADDR")) {
        l.center_host = env.get("MASTER_ADDR");
        host_from = "MASTER_ADDR";
    } else {
        for (const char* list : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"})
            if (env.has(list)) {
                l.center_host = first_slurm_host(env.get(list), list);
                host_from = std::string("the first host of ") + list;
                break;
            }
    }
    if (l.port == 0) {
        if (env.has("TETHER_PORT")) {
            l.port = env.integer("TETHER_PORT", 1);
            port_from = "TETHER_PORT";
        } else if (env.has("MASTER_PORT")) {
            l.port = env.integer("MASTER_PORT", 1) + 1;
            port_from = "MASTER_PORT + 1";
        } else {
            l.port = kDefaultCenterPort;
            port_from = "the default port " + std::to_string(kDefaultCenterPort);
        }
        if (l.port > 65535) throw ConfigError(port_from + " is " + std::to_string(l.port) + ": beyond 65535");
    }
    l.center_variables = (host_from.empty() ? "no host" : host_from) + ", " + port_from;
}

std::string joined_ports(const Launcher& l, const std::string& host, int servers) {
    std::string out;
    for (int k = 0; k < servers; ++k) out += (k ? ",tcp://" : "tcp://") + host + ":" + std::to_string(l.port + k);
    return out;
}

}  // namespace

std::optional<Launcher> read_launcher(const Environment& environment) {
    const Reader env(environment);
    Launcher l;
    if (!read_ranks(env, l)) return std::nullopt;
    read_center(env, l);
    if (env.has("TETHER_CONNECT_TIMEOUT_MS")) l.connect_timeout_ms = env.integer("TETHER_CONNECT_TIMEOUT_MS", 0);
    if (env.has("TETHER_HOST")) l.host = env.get("TETHER_HOST");
    return l;
}

std::optional<Launcher> read_launcher() {
    return read_launcher([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

int Launcher::workers(bool center_trains) const { return center_trains ? world_size : world_size - 1; }

int Launcher::check_workers(int given, bool center_trains, const std::string& key) const {
    const int expected = workers(center_trains);
    const std::string world = "the world size is " + std::to_string(world_size) + " (" + name + ": " + variables + ")";
    if (expected < 1)
        throw ConfigError(key + ": " + world + " and rank 0 only hosts the center (center_trains false): no rank trains; "
                          "start at least 2 ranks or let rank 0 train");
    if (given > 0 && given != expected)
        throw ConfigError(key + ": " + std::to_string(given) + ", but " + world + (center_trains ? " and rank 0 trains too" :
                          " and rank 0 only hosts the center") + ", so " + std::to_string(expected) +
                          " workers; leave it unset (it follows the world size) or launch " +
                          std::to_string(center_trains ? given : given + 1) + " ranks");
    return expected;
}

std::string Launcher::center_address(int servers) const {
    if (center_host.empty())
        throw ConfigError(name + " names no host for rank 0's center: set TETHER_CENTER=HOST[:PORT] (or MASTER_ADDR) to "
                          "rank 0's host, or give its address (--connect)");
    const bool ipv6 = center_host.find(':') != std::string::npos && center_host.front() != '[';
    return joined_ports(*this, ipv6 ? "[" + center_host + "]" : center_host, servers);
}

std::string Launcher::bind_address(int servers) const { return joined_ports(*this, "*", servers); }

std::string Launcher::rank_server_bind_address() const {
    // A host given as an address (a local run's 127.0.0.1) is bound alone; a name, or none: every
    // interface (ZeroMQ binds interfaces and addresses, not names).
    in6_addr any{};
    const bool address = !host.empty() && (::inet_pton(AF_INET, host.c_str(), &any) == 1 ||
                                           ::inet_pton(AF_INET6, host.c_str(), &any) == 1);
    const bool ipv6 = address && host.find(':') != std::string::npos;
    return "tcp://" + (address ? (ipv6 ? "[" + host + "]" : host) : std::string("*")) + ":" + std::to_string(port + rank);
}

std::string Launcher::rank_server_address() const {
    std::string h = host;
    if (h.empty()) {
        try {
            h = local_address_toward(center_address(1));
        } catch (const std::runtime_error& e) {
            throw ConfigError(std::string(e.what()) + ": this rank cannot tell the others where its server listens; set "
                              "TETHER_HOST to this host's name or address as the other ranks reach it");
        }
        // Rank 0's host named as this one (Debian's /etc/hosts maps a host's own name to
        // 127.0.1.1): the route is the loopback, which ranks on other hosts cannot reach.
        const bool loopback = h.rfind("127.", 0) == 0 || h == "[::1]";
        if (loopback && local_world_size < world_size)
            throw ConfigError("this rank's address toward rank 0's host (" + center_address(1) + ") is " + h +
                              ", the loopback, but " + std::to_string(world_size - local_world_size) +
                              " rank(s) run on other hosts and could not reach its server there; set TETHER_HOST to this "
                              "host's address as the other ranks reach it (or MASTER_ADDR to rank 0's)");
    } else if (h.find(':') != std::string::npos && h.front() != '[') {
        h = "[" + h + "]";
    }
    return "tcp://" + h + ":" + std::to_string(port + rank);
}

void Launcher::wait_for_center(const std::string& address) const {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms);
    for (const std::string& server : split_addresses(address, "the center's address")) {
        if (server.rfind("tcp://", 0) != 0) continue;
        std::string why;
        while (true) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (tcp_listening(server, int(std::max<long long>(1, std::min<long long>(left, 500))), why)) break;
            if (Clock::now() >= deadline)
                throw std::runtime_error("nothing listens at " + server + " after " + std::to_string(connect_timeout_ms) +
                                         " ms (" + why + "): rank 0 should host the center there (" + center_variables +
                                         "); this is rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                                         " (" + name + "). Is rank 0 running tether, and that port open to this host? "
                                         "TETHER_CONNECT_TIMEOUT_MS waits longer for a slow rank 0");
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

std::string first_slurm_host(const std::string& nodelist, const std::string& variable) {
    std::string host;
    std::size_t i = 0;
    const auto malformed = [&](const std::string& why) {
        return ConfigError(variable + "=\"" + nodelist + "\": " + why + " (expected Slurm's form, e.g. node[01-04,07],gpu3)");
    };
    while (i < nodelist.size() && nodelist[i] != ',') {
        if (nodelist[i] == ']') throw malformed("']' without '['");
        if (nodelist[i] != '[') {
            host += nodelist[i++];
            continue;
        }
        const auto close = nodelist.find(']', i);
        if (close == std::string::npos) throw malformed("'[' without ']'");
        // The first entry of the bracket, and of a range its first number, zero padding kept.
        const std::string inside = nodelist.substr(i + 1, close - i - 1);
        const std::string first = inside.substr(0, inside.find_first_of(",-"));
        if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
            throw malformed("\"[" + inside + "]\" does not start with a number");
        host += first;
        i = close + 1;
    }
    if (host.empty()) throw malformed("no host");
    return host;
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node) {
    // "2(x3),1": 2 tasks on each of 3 nodes, then 1.
    std::size_t i = 0;
    int seen = 0;
    while (i < tasks_per_node.size()) {
        char* end = nullptr;
        const long tasks = std::strtol(tasks_per_node.c_str() + i, &end, 10);
        if (end == tasks_per_node.c_str() + i || tasks < 1) return 0;
        i = std::size_t(end - tasks_per_node.c_str());
        long repeat = 1;
        if (tasks_per_node.compare(i, 2, "(x") == 0) {
            repeat = std::strtol(tasks_per_node.c_str() + i + 2, &end, 10);
            if (repeat < 1 || *end != ')') return 0;
            i = std::size_t(end - tasks_per_node.c_str()) + 1;
        }
        if (node < seen + repeat) return int(tasks);
        seen += int(repeat);
        if (i < tasks_per_node.size() && tasks_per_node[i++] != ',') return 0;
    }
    return 0;
}

bool is_launcher_rank_variable(const std::string& entry) {
    for (const char* name : kRankVariables)
        if (entry.rfind(std::string(name) + "=", 0) == 0) return true;
    return false;
}

}  // namespace tether
