// The center's memory against the number of workers: one center process (the
// embedding API's CenterService, as `tether server` and rank 0 under a launcher run it) for a
// vector of --elements float32, and N synthetic workers in this process that speak the wire
// protocol over tcp://127.0.0.1 and send their exchanges, all at once, from one shared buffer
// (zero-copy: this process stays small whatever N, so 64 workers of a 100M vector fit). Each
// worker joins, takes its welcome, and makes --exchanges exchanges of the whole vector; then
// says bye. The center runs in a child process (this program re-run with --serve), which
// reports its peak resident memory (VmHWM) and what it held before x~ existed:
//   copies = (peak - before) / (elements * 4)
// the number of vectors' worth the center held at its worst moment: once every worker had its
// last reply (exchanging), and at the end (with the embedding API's final snapshot of x~ and
// the copy of it that wait() returns).
//   tether-bench-memory [--elements 100000000] [--clients 2,4,8,16,32,64] [--strategies adag,diloco]
//                       [--exchanges 2] [--limit-gb 16] [--json]
// A cell whose center passes --limit-gb is stopped and printed as "over" (it would take the
// machine down with it). --worker measures a worker instead: one WorkerClient of a center in a
// child process, its peak beyond its own parameters (one strategy per run).
#include <tether/tether.hpp>
#include "bench_args.hpp"
#include "protocol/header.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using tether::Header;
using tether::MessageType;

std::size_t status_bytes(const std::string& file, const char* key) {
    std::ifstream in(file);
    const std::size_t length = std::strlen(key);
    for (std::string line; std::getline(in, line);)
        if (line.compare(0, length, key) == 0) return std::size_t(std::stoull(line.substr(length))) * 1024;
    return 0;
}

// --serve: the center. Prints its address, then, when its workers are done, its peak and
// what it held before x~ existed (bytes).
int serve(std::size_t elements, int workers, const std::string& strategy) {
    const std::size_t before = status_bytes("/proc/self/status", "VmRSS:");
    tether::ServiceOptions options;
    options.strategy = R"({"name": ")" + strategy + R"(", "communication_window": 1})";
    options.workers = workers;
    options.address = "tcp://127.0.0.1:*";
    options.join_timeout_ms = 600000;
    options.worker_timeout_ms = 600000;
    options.reply_timeout_ms = 600000;
    options.round_timeout_ms = 600000;
    auto service = tether::CenterService::start(std::vector<float>(elements, 0.f), options);
    std::printf("address %s\n", service->address().c_str());
    std::fflush(stdout);
    service->wait();
    std::printf("peak %zu before %zu\n", status_bytes("/proc/self/status", "VmHWM:"), before);
    std::fflush(stdout);
    return 0;
}

// One synthetic worker: a DEALER that says what tether's worker says, from a shared buffer.
class Client {
public:
    Client(zmq::context_t& context, const std::string& address, int index) : socket_(context, zmq::socket_type::dealer) {
        socket_.set(zmq::sockopt::linger, 0);
        socket_.set(zmq::sockopt::routing_id, "bench-" + std::to_string(index));
        socket_.set(zmq::sockopt::rcvtimeo, 600000);
        socket_.connect(address);
    }
    void send(Header h, const float* data = nullptr, std::size_t count = 0) {
        h.fingerprint = fingerprint_;
        h.worker_id = id_;
        const auto encoded = tether::encode(h);
        socket_.send(zmq::buffer(encoded), zmq::send_flags::sndmore);
        zmq::message_t body(const_cast<float*>(data), count * sizeof(float), nullptr, nullptr);  // never copied
        socket_.send(body, zmq::send_flags::none);
    }
    // The next message's header; its payload is read and dropped.
    Header receive() {
        zmq::message_t header;
        if (!socket_.recv(header)) throw std::runtime_error("no answer from the center within 600 s");
        for (bool more = header.more(); more;) {
            zmq::message_t part;
            (void)socket_.recv(part);
            more = part.more();
        }
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = tether::decode(header.data<std::uint8_t>(), header.size(), reason);
        if (!h) throw std::runtime_error(std::string("bad header from the center: ") + tether::to_string(reason));
        return *h;
    }
    // A vector's chunks, to the last; returns the last chunk's header.
    Header receive_vector(MessageType type) {
        for (;;) {
            const Header h = receive();
            if (h.type == MessageType::error) throw std::runtime_error("the center refused this worker");
            if (h.type == type && (h.flags & tether::kFlagLastChunk)) return h;
        }
    }
    void join(std::size_t elements) {
        Header hello;
        hello.type = MessageType::hello;
        hello.element_count = elements;
        send(hello);  // a wrong fingerprint: the center's error names the right one
        fingerprint_ = receive().fingerprint;
        send(hello);
        const Header welcome = receive_vector(MessageType::welcome);
        id_ = welcome.worker_id;
        version_ = welcome.center_version;
    }
    void exchange(const std::vector<float>& x, std::uint64_t sequence) {
        const std::size_t n = x.size(), chunk = std::size_t(tether::ClusterOptions{}.chunk_elements);
        const std::uint32_t chunks = std::uint32_t((n + chunk - 1) / chunk);
        for (std::uint32_t k = 0; k < chunks; ++k) {
            Header h;
            h.type = MessageType::exchange;
            h.dtype = tether::Dtype::float32;
            h.sequence = sequence;
            h.center_version = version_;
            h.local_step = sequence;
            h.chunk_index = k;
            h.chunk_count = chunks;
            h.element_count = std::min(chunk, n - k * chunk);
            h.flags = k + 1 == chunks ? tether::kFlagLastChunk : 0;
            send(h, x.data() + k * chunk, h.element_count);
        }
        version_ = receive_vector(MessageType::reply).center_version;
    }
    void bye(std::uint64_t sequence) {
        Header h;
        h.type = MessageType::bye;
        h.sequence = sequence;
        send(h);
    }

private:
    zmq::socket_t socket_;
    std::uint64_t fingerprint_ = 0, version_ = 0;
    std::uint32_t id_ = 0;
};

struct Cell {
    std::string strategy;
    int clients = 0;
    double seconds = 0, peak_gb = 0, before_gb = 0, copies = 0;
    double exchange_peak_gb = 0, exchange_copies = 0;  // the peak once every worker had its last reply
    bool over = false;
    std::string error;
};

// This program again with --serve, in a child process: its pid, its stdout, and the address it
// printed ("" when it printed none).
struct Served {
    pid_t pid = 0;
    FILE* output = nullptr;
    std::string address;
};

Served serve_in_child(const std::string& self, std::size_t elements, int workers, const std::string& strategy) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    // Its warnings (no CURVE on loopback) and the refusal of each worker's first hello (which
    // asks for the fingerprint) would bury the table.
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    const std::string e = std::to_string(elements), n = std::to_string(workers);
    std::vector<const char*> argv{self.c_str(), "--serve", "--elements", e.c_str(), "--clients", n.c_str(),
                                  "--strategies", strategy.c_str(), nullptr};
    Served served;
    if (posix_spawn(&served.pid, self.c_str(), &actions, nullptr, const_cast<char**>(argv.data()), environ) != 0)
        throw std::runtime_error("could not start " + self);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    served.output = ::fdopen(out[0], "r");
    char line[512];
    if (std::fgets(line, sizeof line, served.output) && std::strncmp(line, "address ", 8) == 0) {
        served.address = line + 8;
        served.address.pop_back();
    }
    return served;
}

Cell run_cell(const std::string& self, std::size_t elements, int clients, const std::string& strategy, int exchanges,
              double limit_gb) {
    Cell cell;
    cell.strategy = strategy;
    cell.clients = clients;
    const Served served = serve_in_child(self, elements, clients, strategy);
    const pid_t pid = served.pid;
    FILE* child = served.output;
    const std::string address = served.address;
    char line[512];
    if (address.empty()) {
        cell.error = "the center did not start";
        ::kill(pid, SIGKILL);
    }
    // Watch the center: past the limit it is stopped, and the workers with it.
    std::atomic<bool> done{false};
    std::thread watch([&] {
        const std::string status = "/proc/" + std::to_string(pid) + "/status";
        while (!done) {
            if (double(status_bytes(status, "VmRSS:")) > limit_gb * 1e9) {
                cell.over = true;
                ::kill(pid, SIGKILL);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    const auto start = Clock::now();
    if (!address.empty()) {
        const std::vector<float> x(elements, 0.001f);
        zmq::context_t context(2);
        std::vector<std::thread> workers;
        std::atomic<int> failed{0};
        // Once every worker has had its last reply, the center's peak so far is its peak while
        // exchanging; then the workers say bye, and the center ends (the embedding API's final
        // snapshot of x~ and the copy wait() returns come after).
        std::mutex mutex;
        std::condition_variable changed;
        int exchanged = 0;
        bool leave = false;
        for (int i = 0; i < clients; ++i)
            workers.emplace_back([&, i] {
                bool counted = false;
                try {
                    Client client(context, address, i);
                    client.join(elements);
                    for (int k = 1; k <= exchanges; ++k) client.exchange(x, std::uint64_t(k));
                    std::unique_lock<std::mutex> lock(mutex);
                    ++exchanged;
                    counted = true;
                    changed.notify_all();
                    changed.wait(lock, [&] { return leave; });
                    lock.unlock();
                    client.bye(std::uint64_t(exchanges + 1));
                } catch (const std::exception& error) {
                    if (failed++ == 0 && !cell.over) std::fprintf(stderr, "worker %d: %s\n", i, error.what());
                    std::lock_guard<std::mutex> lock(mutex);
                    if (!counted) ++exchanged;
                    changed.notify_all();
                }
            });
        {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [&] { return exchanged == clients; });
            cell.exchange_peak_gb = double(status_bytes("/proc/" + std::to_string(pid) + "/status", "VmHWM:")) / 1e9;
            leave = true;
            changed.notify_all();
        }
        for (std::thread& t : workers) t.join();
        if (failed && !cell.over) cell.error = std::to_string(failed.load()) + " workers failed";
    }
    std::size_t peak = 0, before = 0;
    if (!cell.over && std::fgets(line, sizeof line, child)) std::sscanf(line, "peak %zu before %zu", &peak, &before);
    done = true;
    watch.join();
    ::fclose(child);
    int status = 0;
    ::waitpid(pid, &status, 0);
    cell.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    cell.peak_gb = double(peak) / 1e9;
    cell.before_gb = double(before) / 1e9;
    const double vector_bytes = double(elements) * sizeof(float);
    cell.copies = double(peak - std::min(peak, before)) / vector_bytes;
    cell.exchange_copies = std::max(0.0, cell.exchange_peak_gb * 1e9 - double(before)) / vector_bytes;
    if (!cell.over && cell.error.empty() && peak == 0) cell.error = "the center ended without a figure";
    return cell;
}

// --worker: one real worker (the embedding API's WorkerClient, as tether.torch uses it) of a
// center in a child process, exchanging --exchanges times with window 1: its process's peak
// beyond its own parameters (the user's model), in copies of the vector.
int measure_worker(const std::string& self, std::size_t elements, const std::string& strategy, int exchanges) {
    const Served served = serve_in_child(self, elements, 1, strategy);
    const pid_t pid = served.pid;
    FILE* child = served.output;
    const std::string address = served.address;
    char line[512];
    if (address.empty()) throw std::runtime_error("the center did not start");
    std::vector<float> x(elements, 0.001f);  // the user's parameters, touched
    const std::size_t with_model = status_bytes("/proc/self/status", "VmRSS:");
    {
        tether::ServiceOptions options;
        options.strategy = "";  // the center's
        options.workers = 0;
        auto worker = tether::WorkerClient::connect(address, options, x.data(), x.size());
        for (int k = 0; k < exchanges; ++k) {
            for (std::size_t i = 0; i < x.size(); i += 1024) x[i] += 1e-4f;  // a "step"
            worker->step(64);
        }
        worker->finish();
    }
    const std::size_t peak = status_bytes("/proc/self/status", "VmHWM:");
    while (std::fgets(line, sizeof line, child)) {}
    ::fclose(child);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const double bytes = double(elements) * sizeof(float);
    std::printf("worker (%s, window 1, %d exchanges): peak %.2f GB; %.2f copies beyond its own parameters\n",
                strategy.c_str(), exchanges, double(peak) / 1e9, (double(peak) - double(with_model)) / bytes);
    return status == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t elements = 100'000'000;
    std::vector<int> clients{2, 4, 8, 16, 32, 64};
    std::vector<std::string> strategies{"adag", "diloco"};
    int exchanges = 2;
    double limit_gb = 16;
    bool json = false, serving = false, worker = false;
    BenchArgs args(argc, argv, "tether-bench-memory",
                   "[--elements 100000000] [--clients 2,4,8,16,32,64] [--strategies adag,diloco] [--exchanges 2] "
                   "[--limit-gb 16] [--json] [--worker]");
    const std::vector<std::string> known{"adag", "downpour", "aeasgd", "dynsgd", "async-diloco", "averaging", "easgd", "diloco"};
    while (args.next()) {
        if (args.is("--elements")) elements = std::size_t(args.integer(1, 1ll << 32));
        else if (args.is("--clients")) {
            clients.clear();
            for (long long c : args.integers(1, 1024)) clients.push_back(int(c));
        } else if (args.is("--strategies")) strategies = args.words(known);
        else if (args.is("--exchanges")) exchanges = int(args.integer(1, 1000));
        else if (args.is("--limit-gb")) limit_gb = args.number(0.1, 1e6);
        else if (args.is("--json")) json = true;
        else if (args.is("--serve")) serving = true;
        else if (args.is("--worker")) worker = true;
        else args.unknown();
    }
    tether::keep_freed_memory_mapped();  // as the tether command does
    if (serving) return serve(elements, clients.front(), strategies.front());
    const std::string self = "/proc/self/exe";
    char path[4096];
    const ssize_t length = ::readlink(self.c_str(), path, sizeof path - 1);
    if (length <= 0) throw std::runtime_error("cannot find this program's path");
    path[length] = '\0';
    if (worker) {
        if (strategies.size() != 1) {
            std::fprintf(stderr, "tether-bench-memory: --worker measures one strategy per run (a process's peak stays)\n");
            return 2;
        }
        return measure_worker(path, elements, strategies.front(), exchanges);
    }
    const double vector_gb = double(elements) * sizeof(float) / 1e9;
    if (!json)
        std::printf("vector: %zu float32 (%.2f GB); %d exchanges per worker, all workers at once, tcp://127.0.0.1\n"
                    "copies = (peak RSS - RSS before x~ existed) / vector; 'exchanging': once every worker had its last\n"
                    "reply; 'at the end': after the final snapshot and the copy of x~ that wait() returns\n"
                    "%-12s %7s %12s %12s %12s %12s %8s\n",
                    elements, vector_gb, exchanges, "strategy", "workers", "exch. GB", "exch. copies", "end GB", "end copies",
                    "seconds");
    nlohmann::json cells = nlohmann::json::array();
    for (const std::string& strategy : strategies)
        for (int n : clients) {
            const Cell c = run_cell(path, elements, n, strategy, exchanges, limit_gb);
            const std::string note = c.over ? "over " + std::to_string(limit_gb) + " GB: stopped" : c.error;
            if (!json) {
                std::printf("%-12s %7d %12.2f %12.2f %12.2f %12.2f %8.1f  %s\n", strategy.c_str(), n, c.exchange_peak_gb,
                            c.exchange_copies, c.peak_gb, c.copies, c.seconds, note.c_str());
                std::fflush(stdout);
            }
            cells.push_back({{"strategy", strategy}, {"workers", n}, {"peak_gb", c.over ? nlohmann::json() : nlohmann::json(c.peak_gb)},
                             {"before_gb", c.before_gb}, {"exchange_peak_gb", c.exchange_peak_gb},
                             {"exchange_copies", c.exchange_copies}, {"copies", c.over ? nlohmann::json() : nlohmann::json(c.copies)},
                             {"seconds", c.seconds}, {"over_limit", c.over}, {"error", c.error}});
        }
    if (json)
        std::printf("%s\n", nlohmann::json{{"elements", elements}, {"vector_gb", vector_gb}, {"exchanges", exchanges}, {"cells", cells}}
                                .dump()
                                .c_str());
    return 0;
}
