// tether's embedding API: elastic-averaging and accumulated-update strategies for a training
// loop you own. You keep the model, the data and the gradients; tether keeps the exchange with
// the center. A worker hands tether its float32 parameter buffers (one flat buffer, or a list
// of tensors; host or CUDA device memory) and calls step() after each local optimizer step;
// the strategy decides when (every communication_window steps) and what to exchange. See
// docs/embedding.md. Strategies of your own: <tether/strategy.hpp>.
//
//   auto center = tether::CenterService::start(initial, {R"({"name": "aeasgd"})", 3});
//   // on each of 3 threads:
//   auto worker = center->connect_worker({{w1.data(), w1.size()}, {b1.data(), b1.size()}});
//   for (...) { my_sgd_step(); worker->step(batch_size); }
//   worker->finish();
//   // then:
//   std::vector<float> trained = center->wait();
//
// Threads:
// - A WorkerClient belongs to one training loop: call its step() and finish() from one thread
//   at a time (any thread, not concurrently). tether reads and writes your parameter buffers
//   only inside connect, step() and finish(), on the calling thread: never from a thread of its
//   own, also when replies land late (the strategy's overlap_steps: its thread then works on a
//   copy). Between those calls the buffers are yours alone; each worker's buffers are its own (two workers never share one).
// - Each WorkerClient has a thread of tether's that sends heartbeats while your loop is away
//   (validation, checkpoints), so a pause longer than worker_timeout_ms does not lose the worker.
// - CenterService: every member may be called from any thread, concurrently with the center's
//   own thread and with each other (snapshot() and stats_json() while it trains).
//
// Model buffers: state that is averaged, not trained (BatchNorm's running mean and variance)
// goes in a second list of spans, `buffers`, beside the parameters. The strategy never sees
// them: each worker sends its buffers with every exchange, the center keeps b~, their mean
// over the workers (each worker's latest, each worker once), and a joining worker takes b~ as
// it takes x~. docs/embedding.md, "Model buffers", gives the rule and why.
//
// Errors are exceptions derived from std::runtime_error whose message names what is wrong;
// ConfigError (<tether/errors.hpp>) for a bad option or buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tether/cluster_options.hpp>
#include <tether/lease.hpp>
#include <tether/curve_keys.hpp>
#include <tether/errors.hpp>
#include <tether/version.hpp>  // TETHER_VERSION_MAJOR, _MINOR, _PATCH, _STRING

namespace tether {

enum class Memory { host, cuda };

// One parameter tensor: `count` float32 elements at `data`, contiguous.
struct ParameterSpan {
    float* data = nullptr;
    std::size_t count = 0;
};

// A center's and its workers' settings: the cluster's options (<tether/cluster_options.hpp>: a
// field named like a "cluster" key of a config file is that key, with the same default, checks
// and errors, "ServiceOptions.heartbeat_ms: ..."), the CURVE keys (the "security" block of a
// config file, <tether/curve_keys.hpp>; curve_keys() is the set whole) and what only the
// embedding API has, below. A center whose `address` is tcp:// beyond loopback needs keys, or
// `insecure` = true to bind without (docs/embedding.md, "Security"); loopback without keys is
// allowed, with a warning.
//
// Several servers (`servers`, docs/architecture.md, "Several servers"): address() then lists
// them, server 0 first, separated by ',' (as WorkerClient::connect takes them), and `address`
// may give one per server the same way. A server on every rank (`server_placement` "ranks",
// docs/architecture.md, "Servers on the ranks"): this service is then server `rank` of
// `servers` (= the ranks), bound at `address` ("tcp://*:PORT"), and tells server 0 at
// `server0_address` that the other ranks reach it at `rank_address`. Python's
// Worker.from_env(server_placement="ranks") sets all four from the launcher. x~ is rank 0's:
// there snapshot() and wait() gather every range (wait() lets the other servers leave, so call
// it soon after the workers finish: they wait join_timeout_ms); on another rank wait() returns
// an empty vector once its server is done, and snapshot() throws. Rank 0 lost, rank 1 takes its
// range over (docs/python.md, "Servers on the ranks"): then rank 1's is_center() turns true,
// and its wait() and snapshot() are rank 0's.
//
// `rank` is also a worker's: a WorkerClient with rank r > 0 asks for place (worker id) r mod
// workers, as a launched `tether worker` does, so that under a launcher a worker's id is its
// rank among the workers whatever order they join in (the center's messages name it so) and a
// restarted rank takes its own place back. Python's Worker.from_env sets it (the launcher's
// rank, less one where rank 0 hosts the center only; a replica group's index).
struct ServiceOptions : ClusterOptions, CurveKeys {
    CurveKeys& curve_keys() { return *this; }
    const CurveKeys& curve_keys() const { return *this; }

    // The strategy block, exactly as under "strategy" in a config file (docs/config.md), or a
    // strategy registered with tether::register_strategy (<tether/strategy.hpp>). "" in a
    // WorkerClient::connect: the center's (asked of it before joining); a center needs one.
    std::string strategy = R"({"name": "aeasgd"})";
    bool insecure = false;  // bind beyond loopback without keys (above)
    // Flush denormal floats to zero on the center's thread (tether's own). The callers'
    // threads, where step() runs, are never changed; see set_flush_denormals() below.
    bool flush_denormals = true;
    int rank = 0;  // a launcher's rank (above): the server it hosts, the place its worker asks for
    std::string server0_address;
    std::string rank_address;
    // A standby center (class Standby below): a worker whose center is lost (silent for
    // worker_timeout_ms) fails over to the center at standby_address and joins it again; a
    // Standby copies x~ from its center every standby_seconds and, once that center is lost,
    // binds there and goes on from its copy. One server only (servers = 1). "": none.
    std::string standby_address;
    double standby_seconds = 5;
    // The center's run directory, as `tether run` writes one (docs/embedding.md, "Run
    // records"): config.json (these options as resolved and the model's sizes), metrics.jsonl
    // (the center's exchange statistics every metrics_seconds and/or metrics_samples, and the
    // scalars workers log with WorkerClient::log), exchanges.jsonl, checkpoint.bin every
    // checkpoint_seconds and at the end, and summary.json when the run ends (its figures,
    // provenance and verdict). "" = none. The center's alone: a worker ignores these.
    std::string run_dir;
    // Go on from run_dir's checkpoint (x~, b~, the version and counters) instead of `initial`,
    // as `tether server --resume` does; metrics.jsonl and exchanges.jsonl are appended to.
    bool resume = false;
    // A metrics.jsonl row every metrics_seconds (0: not by time) and every metrics_samples
    // samples, all workers together (0: not by samples).
    double metrics_seconds = 10;
    std::int64_t metrics_samples = 0;
};

// visit(name, field, limits) for each option of `options` (a ServiceOptions, const or not)
// but `strategy`: the cluster's, the CURVE keys, then the embedding API's own. Python's keyword
// arguments are these names (OptionName::field_name()).
template <typename Options, typename Visit>
void for_each_service_option(Options& o, Visit&& visit) {
    for_each_cluster_option(o, visit);
    for_each_curve_key(o.curve_keys(), [&](const char* name, auto& key) { visit(OptionName(name), key, any_text()); });
    visit(OptionName("insecure"), o.insecure, true_or_false());
    visit(OptionName("flush_denormals"), o.flush_denormals, true_or_false());
    visit(OptionName("rank"), o.rank, integers(0, 255));
    visit(OptionName("server0_address"), o.server0_address, any_text());
    visit(OptionName("rank_address"), o.rank_address, any_text());
    visit(OptionName("standby_address"), o.standby_address, any_text());
    visit(OptionName("standby_seconds"), o.standby_seconds, numbers(0.1, 86'400.0));
    visit(OptionName("run_dir"), o.run_dir, any_text());
    visit(OptionName("resume"), o.resume, true_or_false());
    visit(OptionName("metrics_seconds"), o.metrics_seconds, numbers(0.0, 86'400.0 * 365));
    visit(OptionName("metrics_samples"), o.metrics_samples, integers(0, std::numeric_limits<std::int64_t>::max()));
}

// `options` with the CURVE keys of a launcher job's rank (torchrun, srun, mpirun; rank 0 hosts
// the center): every rank derives the same keys from the TETHER_SECRET environment variable, or
// else from a secret rank 0 writes to DIRECTORY/run-<job_id>/secret (DIRECTORY "" = ~/.tether,
// user-only; it must be seen by every rank) and the others read within join_timeout_ms. Throws
// ConfigError saying how to set TETHER_SECRET when neither can work. Options that give keys, or
// set insecure, come back as they are. docs/embedding.md, "Security".
ServiceOptions with_launcher_keys(ServiceOptions options, int rank, const std::string& job_id,
                                  const std::string& directory = "");
// Rank 0, once its center is done: removes the secret with_launcher_keys wrote for `job_id`
// (nothing for another rank, or when TETHER_SECRET gave the secret).
void remove_launcher_secret(int rank, const std::string& job_id, const std::string& directory = "");

// Sets (or clears) flush-to-zero and denormals-are-zero on the calling thread: what a user may
// do on their own training threads. Subnormal floats (below 1.2e-38) carry no signal in
// float32 training, and arithmetic on them is ~100x slower on x86 cores; Adam's second moments
// and small gradients drift into that range as training goes on. tether does this on every
// thread it owns and never on yours. (PyTorch: torch.set_flush_denormal(True).)
void set_flush_denormals(bool on = true);

// Keeps memory that the process frees mapped, for the whole process (glibc's mallopt
// M_MMAP_THRESHOLD 32 MiB and M_TRIM_THRESHOLD 256 MiB). ZeroMQ allocates every message it
// receives, and by default glibc hands a freed block of a megabyte back to the kernel and
// faults it in again on the next allocation: a center answering 4 workers over tcp spent its
// time in page faults and moved a fifth of what it moves with this (experiments/README.md).
// The cost is memory: up to 256 MiB freed per malloc arena stays with the process. The tether
// command calls this at start; the embedding API leaves your process's allocator alone unless
// you call it (or set GLIBC_TUNABLES, docs/embedding.md). Returns false, and changes nothing,
// where the C library has no such settings (not 64-bit glibc).
bool keep_freed_memory_mapped();

struct WorkerReport {
    unsigned worker_id = 0;
    std::size_t steps = 0, samples = 0, exchanges = 0;
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    double seconds_waiting = 0;  // step() and finish() blocked on the center
    std::size_t rejoins = 0;     // times the center had forgotten this worker and it joined again
};

class WorkerClient {
public:
    // Joins the center at `address` from any process. Blocks until the center has welcomed it
    // (the center waits for all `options.workers` workers), then sets the buffers to x~. The
    // strategy sees the buffers as one vector, in the order given; their sizes must add up to
    // the center's. They must stay valid, in `memory`, until finish() returns. An empty
    // options.strategy (options.workers 0) takes the center's, asked of it before joining; a
    // given one that differs is refused naming the strategy first ("strategy.name: ...").
    static std::unique_ptr<WorkerClient> connect(const std::string& address, const ServiceOptions& options,
                                                 std::vector<ParameterSpan> parameters, Memory memory = Memory::host);
    // As above, with the model buffers the center averages (in `memory` too, valid as long):
    // set to b~ on joining (and on joining again), read at each exchange; their sizes must add
    // up to the center's (CenterService::start's initial_buffers).
    static std::unique_ptr<WorkerClient> connect(const std::string& address, const ServiceOptions& options,
                                                 std::vector<ParameterSpan> parameters, Memory memory,
                                                 std::vector<ParameterSpan> buffers);
    static std::unique_ptr<WorkerClient> connect(const std::string& address, const ServiceOptions& options,
                                                 float* parameters, std::size_t count, Memory memory = Memory::host) {
        return connect(address, options, std::vector<ParameterSpan>{{parameters, count}}, memory);
    }
    virtual ~WorkerClient() = default;

    // After each local optimizer step; `samples` is that step's minibatch size (for progress
    // and staleness bookkeeping). Returns true when this call exchanged with the center (started
    // one, when replies land late: the strategy's overlap_steps) or applied a reply that landed
    // late: whenever the parameters may have changed. Throws when the center is gone (silent for worker_timeout_ms) and after finish().
    virtual bool step(std::size_t samples = 0) = 0;
    // Final exchange (nothing trained is lost) and goodbye. Call once, at the end (a second
    // call throws).
    virtual WorkerReport finish() = 0;
    // This worker's own scalars, e.g. {{"loss", 0.31}, {"validation_accuracy", 0.87}}, for the
    // center's run directory (ServiceOptions::run_dir): one metrics.jsonl row tagged with this
    // worker's id, the samples it trained and the center's time. Names: 1 to 64 of
    // [A-Za-z0-9_.-/], not wall_seconds, samples, worker or worker_samples; a value that is
    // not finite is written as null. Never waits for the center (sent within heartbeat_ms);
    // a center without a run directory drops them. Throws std::invalid_argument for a bad
    // name, std::logic_error after finish().
    virtual void log(const std::vector<std::pair<std::string, double>>& scalars) = 0;
    virtual unsigned id() const = 0;
    // Whether to go on training: false once a reply said the run's budget is trained
    // (ServiceOptions::budget_samples; a loop `while (client->running()) { train; step(); }`
    // then ends within one window of it, fast workers having taken more of it), and after
    // finish(). Always true before that without a budget.
    virtual bool running() const = 0;
    // Leases (<tether/lease.hpp>): the next block of the data this worker
    // trains, at most `samples` positions of the run's stream, from the center; count 0: no work
    // is left (the budget, or `total` positions, handed out: `total` is the worker's data's
    // positions, e.g. its size times the passes, used when the center has no budget). A fast
    // worker asks more often and so trains more; what a lost worker leased and had not exchanged
    // goes to the next worker that asks. Train a block in order, step() after each minibatch.
    virtual Lease lease(std::uint64_t samples, std::uint64_t total = 0) = 0;
    // Asks for the next block now, without waiting: lease() then takes its answer. Asked at a
    // block's last step, the answer travels during that step.
    virtual void ask_lease(std::uint64_t samples, std::uint64_t total = 0) = 0;
    // The strategy's communication window, in local steps: a lease of that many minibatches
    // is trained between two exchanges.
    virtual int communication_window() const = 0;
    // The samples this worker's place (its worker id) had trained when the center welcomed it:
    // 0 for a new place; more for a process that took its place back (a restarted rank) or a
    // lost worker's place over, which may go on from there instead of from the start.
    virtual std::uint64_t place_samples() const = 0;
};

// x~ and the number of updates applied to it, taken at one instant, and b~ (the averaged model
// buffers; empty without buffers), taken with server 0's range of x~.
struct CenterSnapshot {
    std::vector<float> x;
    std::uint64_t version = 0;
    std::vector<float> buffers;
};

// What CenterService::wait() throws for a run that failed as `tether run` judges one: more than
// max_failed_share of the workers were lost, or no update reached x~. The center's final state
// is still there after it: snapshot() and stats_json().
class RunFailedError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class CenterService {
public:
    // Starts the center on its own thread with x~(0) = initial. Workers must start from the
    // same point (the center sends it to them on join).
    static std::unique_ptr<CenterService> start(std::vector<float> initial, const ServiceOptions& options);
    // As above, with b~(0) = initial_buffers: the model buffers its workers average (their
    // count is an agreed setting: a worker with another count is refused naming both).
    static std::unique_ptr<CenterService> start(std::vector<float> initial, const ServiceOptions& options,
                                                std::vector<float> initial_buffers);
    virtual ~CenterService() = default;

    virtual std::string address() const = 0;
    // A worker in this process (works with the private inproc:// address too); as
    // WorkerClient::connect, with this center's options.
    // `buffers`: its model buffers, as for WorkerClient::connect.
    virtual std::unique_ptr<WorkerClient> connect_worker(std::vector<ParameterSpan> parameters,
                                                         Memory memory = Memory::host,
                                                         std::vector<ParameterSpan> buffers = {}) = 0;
    std::unique_ptr<WorkerClient> connect_worker(float* parameters, std::size_t count, Memory memory = Memory::host) {
        return connect_worker(std::vector<ParameterSpan>{{parameters, count}}, memory);
    }
    // x~ and its version now (while training, e.g. to evaluate or checkpoint it), or at the end.
    virtual CenterSnapshot snapshot() const = 0;
    // Blocks until every worker finished (or was lost); returns the final x~. Throws
    // RunFailedError when the run failed (above); snapshot() still gives the final state.
    virtual std::vector<float> wait() = 0;
    // As wait(); returns the whole final state: x~, its version and b~.
    CenterSnapshot wait_state() {
        wait();
        return snapshot();
    }
    // The center's statistics as JSON (updates, staleness, bytes, rejected messages, losses),
    // as they are now.
    virtual std::string stats_json() const = 0;
    // Whether wait() gives the run's x~ whole and its verdict: a center, rank 0's server, and
    // with servers on the ranks rank 1's once it took a lost rank 0's range over.
    virtual bool is_center() const = 0;
};

// A center in waiting for the center at `center` (one server): it asks that center for x~
// every options.standby_seconds (a snapshot request: a model's bytes on that center's link),
// and when the center has been silent for worker_timeout_ms it takes over: it writes its copy
// as the checkpoint of options.run_dir (unless the checkpoint there is newer), starts a
// CenterService resumed from it, bound at options.address, and the workers that fail over to
// options.standby_address join it again. What x~ gained after the copy is lost (at most
// standby_seconds and the timeout of training). `initial` and `initial_buffers` only give the
// sizes (and so the agreed settings), as for CenterService::start. Needs run_dir.
class Standby {
public:
    static std::unique_ptr<Standby> start(std::vector<float> initial, const ServiceOptions& options, const std::string& center,
                                          std::vector<float> initial_buffers = {});
    virtual ~Standby() = default;
    // Whether it took over; then center() is the center it started (else null).
    virtual bool took_over() const = 0;
    virtual CenterService* center() = 0;
    // The run ends as planned (this process's worker finished): stop copying and never take
    // over. Returns took_over() as it stands (a center already started goes on).
    virtual bool stand_down() = 0;
    // The copies taken so far.
    virtual std::uint64_t copies() const = 0;
};

// The checkpoint of a run directory (ServiceOptions::run_dir, or `tether run`'s): x~, its
// version and b~, from `path`/checkpoint.bin, or assembled from checkpoint-server-K.bin of a
// run of several servers; `path` may also name one checkpoint file. Throws naming the file
// that is missing, truncated or not a checkpoint.
CenterSnapshot load_checkpoint(const std::string& path);
// Whether options.run_dir holds every checkpoint that a CenterService with these options and
// resume = true reads (each of its servers'; with a server on every rank, this rank's server's),
// none older than a summary.json there (a run that ended is not gone on from), as a restarted
// launcher attempt decides whether to resume or start from x~(0).
bool has_checkpoint(const ServiceOptions& options);

// Where this process stands in a launcher's job, read from its environment by read_launcher():
// torchrun, srun (Slurm), mpirun (Open MPI) or an MPI launcher of PMI/PMIx (MPICH, Intel MPI).
// Rank 0 hosts the center at `port` on its host (and trains too, unless told otherwise); every
// other rank connects there. docs/python.md, "Launching", lists the variables read and which
// launcher wins when several are set.
struct Launcher {
    std::string name;           // "torchrun", "openmpi", "pmi" or "slurm"
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;         // among the ranks on this host (its GPU, its share of the cores)
    int local_world_size = 1;   // ranks on this host
    std::string center_host;    // rank 0's host; "" where nothing names it (Open MPI: set TETHER_CENTER)
    int port = 0;               // the center's port (server k of several: port + k)
    std::string job_id;         // the job's id (SLURM_JOB_ID, ...), "" where the launcher gives none
    // The launcher's restart of the job this process belongs to (TORCHELASTIC_RESTART_COUNT,
    // SLURM_RESTART_COUNT): 0 for the first attempt. job_id then ends ".attempt-N".
    int attempt = 0;
    // This rank's host as the others reach it (TETHER_HOST); "": the address this host has
    // toward rank 0's (the route's source address). Used only with a server on every rank.
    std::string host;
    std::string variables;      // the variables rank and world size came from, for messages: "RANK, WORLD_SIZE"
    std::string center_variables;  // where host and port came from: "MASTER_ADDR, MASTER_PORT + 1"
    // How long a rank other than 0 waits for something to listen at the center's address before
    // it fails naming the address (TETHER_CONNECT_TIMEOUT_MS): rank 0 starts at the same time.
    int connect_timeout_ms = 3000;

    // The workers of the run: the world size, less rank 0 when it hosts the center without training.
    int workers(bool center_trains) const;
    // `given` (0: none given) against workers(center_trains): throws ConfigError naming `key`,
    // both values and the variables read when they differ. Returns workers(center_trains).
    int check_workers(int given, bool center_trains, const std::string& key) const;
    // "tcp://HOST:PORT" (with `servers` > 1: one address per server, ports PORT, PORT + 1, ...,
    // separated by ','). Throws ConfigError naming what to set when the host is unknown.
    std::string center_address(int servers = 1) const;
    // What rank 0 binds: "tcp://*:PORT", one per server as above.
    std::string bind_address(int servers = 1) const;
    // With a server on every rank (cluster.server_placement "ranks"): rank k's server listens at
    // port + k on its own host. What it binds ("tcp://*:PORT+k", or `host`'s address alone when
    // `host` is an address), and where the others reach it
    // ("tcp://HOST:PORT+k", HOST as `host` above; throws ConfigError when no route to rank 0's
    // host is found, naming TETHER_HOST).
    std::string rank_server_bind_address() const;
    std::string rank_server_address() const;
    // Returns once something listens at every tcp:// address of `address` (ranks start at
    // once: rank 0 may be a moment late); throws std::runtime_error naming the address and who
    // should be there after connect_timeout_ms.
    void wait_for_center(const std::string& address) const;
};

// This process's launcher, or nullopt when no launcher's rank variable is set. Throws
// ConfigError for a variable that is set but unusable (not a number, a rank beyond the world).
std::optional<Launcher> read_launcher();

}  // namespace tether
