// Exchange throughput of tether's center against what ZeroMQ itself allows. K clients each
// exchange a vector of the default MLP's size (235,146 float32) with window 1, as fast as they
// can, over inproc://, ipc:// and tcp://127.0.0.1, the last in plaintext (tcp) and with CURVE
// (curve: ZeroMQ's encryption and authentication, XSalsa20-Poly1305 per message):
//   raw     a plain cppzmq DEALER -> ROUTER echo: the client sends its vector without copying it,
//           the server adds it into a center vector and sends a copy of it back, the client
//           copies the reply into its parameters;
//   tether  the embedding API (CenterService + WorkerClient::step()) with downpour and aeasgd:
//           every validation (header, size, dtype, finiteness) and the strategy's rule included,
//           on S servers (ServiceOptions.servers: x~ split into S server ranges, each server on
//           its own thread and socket, every client exchanging with all of them in parallel).
// Prints GB/s (both directions) and tether / raw for each cell; --json prints one object.
// Both run with freed memory kept mapped, as in the tether command (keep_freed_memory_mapped(),
// tether.hpp); --default-malloc leaves glibc's defaults, under which every ~1 MB message ZeroMQ
// receives is faulted in afresh and 2+ clients measure page faults more than either side.
// Each cell runs raw, downpour and aeasgd in turn (the two rules in alternating order), --repeats
// times, and reports medians: on a shared machine a load that comes and goes then hits all
// three alike. The raw echo has one
// server whatever S: it is the bound of one ZeroMQ server thread.
// CURVE's cost is the curve cells against the tcp ones (raw: ZeroMQ alone; tether: a CenterService
// given fresh keys; tcp sets insecure).
//   tether-bench-center [--clients 1,2,4,8] [--servers 1] [--transports inproc,ipc,tcp,curve]
//                       [--seconds 1] [--repeats 3] [--elements 235146] [--rules downpour,aeasgd]
//                       [--codec float32] [--default-malloc] [--json]
// --rules: the tether strategies to run (window 1), each a column; --codec: their cluster.codec.
#include <tether/tether.hpp>
#include "bench_args.hpp"
#include <unistd.h>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
    std::vector<int> clients{1, 2, 4, 8};
    std::vector<int> servers{1};
    std::vector<std::string> transports{"inproc", "ipc", "tcp"};
    double seconds = 1.0;
    int repeats = 3;
    std::size_t elements = 235146;
    bool json = false;
    bool default_malloc = false;
    std::vector<std::string> rules{"downpour", "aeasgd"};
    std::string codec = "float32";  // cluster.codec of the tether runs (raw sends float32)
};

std::string address_for(const std::string& transport, int run) {
    if (transport == "inproc") return "inproc://bench-center-" + std::to_string(run);
    if (transport == "ipc") return "ipc:///tmp/tether-bench-center-" + std::to_string(::getpid()) + "-" + std::to_string(run);
    return "tcp://127.0.0.1:*";
}

struct CurvePair {
    char public_key[41], secret_key[41];
    CurvePair() {
        if (zmq_curve_keypair(public_key, secret_key) != 0) throw std::runtime_error("zmq_curve_keypair failed");
    }
};

// K client threads that connect, wait for one start signal, and count round trips until one
// deadline; GB/s over both directions.
class Race {
public:
    // `client(race)` runs on each thread: it connects, calls race.wait_for_start(), then
    // exchanges while race.running(), counting each round trip with race.count().
    template <typename Client>
    double run(int clients, double seconds, std::size_t elements, Client client) {
        std::vector<std::thread> pool;
        for (int c = 0; c < clients; ++c) pool.emplace_back([&] { client(*this); });
        while (ready_ < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const auto started = Clock::now();
        deadline_ = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
        go_ = true;
        for (auto& t : pool) t.join();
        const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
        return double(round_trips_.load()) * 2.0 * double(elements) * sizeof(float) / elapsed / 1e9;
    }
    void wait_for_start() {
        ++ready_;
        while (!go_) std::this_thread::yield();
    }
    bool running() const { return Clock::now() < deadline_; }
    void count() { ++round_trips_; }

private:
    std::atomic<int> ready_{0};
    std::atomic<bool> go_{false};
    std::atomic<std::uint64_t> round_trips_{0};
    Clock::time_point deadline_;
};

// A plain cppzmq echo doing the center's add: the fastest a ZeroMQ center could answer.
double run_raw(const std::string& transport, int clients, const Settings& s, int run) {
    zmq::context_t context;
    zmq::socket_t server(context, zmq::socket_type::router);
    const CurvePair server_keys, client_keys;
    const bool curve = transport == "curve";
    if (curve) {
        server.set(zmq::sockopt::curve_server, true);
        server.set(zmq::sockopt::curve_secretkey, std::string(server_keys.secret_key));
    }
    server.bind(address_for(transport, run));
    const std::string address = server.get(zmq::sockopt::last_endpoint);
    std::atomic<bool> stop{false};
    std::thread serving([&] {
        std::vector<float> center(s.elements, 0.f);
        // A blocking receive with a timeout to notice `stop` (not zmq::poll + recv, which now
        // and then sat out its whole timeout with a message waiting: 0.16 GB/s in such runs).
        server.set(zmq::sockopt::rcvtimeo, 20);
        while (!stop) {
            zmq::message_t identity, body;
            if (!server.recv(identity)) continue;
            (void)server.recv(body);
            const float* update = body.data<float>();
            const std::size_t n = body.size() / sizeof(float);
            for (std::size_t i = 0; i < n; ++i) center[i] += update[i];
            // Reply from the server's own memory, as a center does. Sending back the received
            // message itself is a ZeroMQ pathology over tcp: in most runs it stalled each round
            // trip by milliseconds (0.21-0.25 GB/s against 1.3-1.7 with this copy, 1 client).
            zmq::message_t reply(body.data(), body.size());
            server.send(identity, zmq::send_flags::sndmore);
            server.send(reply, zmq::send_flags::none);
        }
    });
    Race race;
    const double rate = race.run(clients, s.seconds, s.elements, [&](Race& r) {
        zmq::socket_t dealer(context, zmq::socket_type::dealer);
        if (curve) {
            dealer.set(zmq::sockopt::curve_serverkey, std::string(server_keys.public_key));
            dealer.set(zmq::sockopt::curve_publickey, std::string(client_keys.public_key));
            dealer.set(zmq::sockopt::curve_secretkey, std::string(client_keys.secret_key));
        }
        dealer.connect(address);
        std::vector<float> x(s.elements, 1e-3f);
        r.wait_for_start();
        while (r.running()) {
            // Zero-copy, as tether's workers send: ZeroMQ reads x in place. The reply cannot
            // arrive before the whole request was written out, so x is free again after it.
            zmq::message_t request(x.data(), x.size() * sizeof(float), [](void*, void*) {}, nullptr);
            dealer.send(request, zmq::send_flags::none);
            zmq::message_t reply;
            (void)dealer.recv(reply);
            std::memcpy(x.data(), reply.data(), reply.size());
            r.count();
        }
    });
    stop = true;
    serving.join();
    return rate;
}

// The same load through tether's embedding API: a CenterService and K WorkerClients.
double run_tether(const std::string& strategy, const std::string& transport, int clients, int servers, const Settings& s,
                  int run) {
    tether::ServiceOptions options;
    options.strategy = R"({"name": ")" + strategy + R"(", "communication_window": 1})";
    options.codec = s.codec;
    options.workers = clients;
    options.servers = servers;
    options.insecure = transport == "tcp";
    if (transport == "curve") {  // one pair for the center, one every client shares
        const CurvePair center, client;
        options.curve_keys() = tether::CurveKeys{center.public_key, center.secret_key, client.public_key, client.secret_key, client.public_key};
    }
    if (transport != "inproc")
        for (int k = 0; k < servers; ++k)
            options.address += (k ? "," : "") + address_for(transport, run * 16 + k);
    auto service = tether::CenterService::start(std::vector<float>(s.elements, 0.f), options);
    Race race;
    const double rate = race.run(clients, s.seconds, s.elements, [&](Race& r) {
        std::vector<float> x(s.elements, 0.f);
        auto worker = service->connect_worker(x.data(), x.size());
        r.wait_for_start();
        while (r.running())
            if (worker->step(64)) r.count();
        worker->finish();
    });
    service->wait();
    // A cell is a result only if every worker stayed: a lost one would measure the others alone.
    const nlohmann::json stats = nlohmann::json::parse(service->stats_json());
    if (stats.value("workers_lost", 0) != 0)
        throw std::runtime_error(strategy + " over " + transport + " with " + std::to_string(clients) + " clients lost " +
                                 std::to_string(stats.value("workers_lost", 0)) + " workers: " + stats.dump());
    return rate;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
    Settings s;
    BenchArgs args(argc, argv, "tether-bench-center",
                   "[--clients 1,2,4,8] [--servers 1,2,4] [--transports inproc,ipc,tcp,curve] [--seconds 1] [--repeats 3] "
                   "[--elements 235146] [--rules downpour,aeasgd] [--codec float32] [--default-malloc] [--json]");
    const auto counts = [](const std::vector<long long>& values) { return std::vector<int>(values.begin(), values.end()); };
    while (args.next()) {
        if (args.is("--json")) s.json = true;
        else if (args.is("--default-malloc")) s.default_malloc = true;
        else if (args.is("--clients")) s.clients = counts(args.integers(1, 1024));
        else if (args.is("--servers")) s.servers = counts(args.integers(1, 64));
        else if (args.is("--transports")) s.transports = args.words({"inproc", "ipc", "tcp", "curve"});
        else if (args.is("--seconds")) s.seconds = args.number(0.01, 3600);
        else if (args.is("--repeats")) s.repeats = int(args.integer(1, 1000));
        else if (args.is("--elements")) s.elements = std::size_t(args.integer(1, 1ll << 32));
        else if (args.is("--rules"))
            s.rules = args.words({"downpour", "aeasgd", "adag", "dynsgd", "async-diloco", "averaging", "easgd", "diloco"});
        else if (args.is("--codec")) s.codec = args.word({"float32", "fp16", "bf16", "int8", "int4"});
        else args.unknown();
    }
    const bool freed_memory_mapped = !s.default_malloc && tether::keep_freed_memory_mapped();
    nlohmann::json cells = nlohmann::json::array();
    if (!s.json) {
        std::printf("malloc: %s\n", freed_memory_mapped ? "freed memory kept mapped (as in the tether command)"
                                                        : "the C library's defaults (--default-malloc)");
        if (s.codec != "float32") std::printf("tether runs with cluster.codec %s (GB/s of float32 vectors)\n", s.codec.c_str());
        std::printf("%-7s %7s %7s %10s", "", "clients", "servers", "raw GB/s");
        for (const std::string& rule : s.rules) std::printf(" %14s %7s", (rule + " GB/s").c_str(), "ratio");
        std::printf("\n");
    }
    int run = 0;
    for (const auto& transport : s.transports)
        for (int clients : s.clients) {
            // The raw bound once per (transport, clients); each S measured beside its own runs of it.
            std::vector<double> raws;
            for (int servers : s.servers) {
                std::vector<std::vector<double>> rates(s.rules.size());
                for (int r = 0; r < s.repeats; ++r) {
                    // Raw first, then the rules in an order that turns with each repeat: the run right
                    // after raw was the slower one now and then, whichever rule it was.
                    raws.push_back(run_raw(transport, clients, s, run++));
                    for (std::size_t k = 0; k < s.rules.size(); ++k) {
                        const std::size_t rule = (k + std::size_t(r)) % s.rules.size();
                        rates[rule].push_back(run_tether(s.rules[rule], transport, clients, servers, s, run++));
                    }
                }
                const double raw = median(raws);
                nlohmann::json cell = {{"transport", transport}, {"clients", clients}, {"servers", servers}, {"raw_gbps", raw}};
                if (!s.json) std::printf("%-7s %7d %7d %10.2f", transport.c_str(), clients, servers, raw);
                for (std::size_t k = 0; k < s.rules.size(); ++k) {
                    const double rate = median(rates[k]);
                    cell[s.rules[k] + "_gbps"] = rate;
                    cell[s.rules[k] + "_ratio"] = rate / raw;
                    if (!s.json) std::printf(" %14.2f %7.2f", rate, rate / raw);
                }
                cells.push_back(cell);
                if (!s.json) std::printf("\n");
                std::fflush(stdout);
            }
        }
    if (s.json)
        std::printf("%s\n", nlohmann::json{{"elements", s.elements}, {"seconds_per_run", s.seconds}, {"repeats", s.repeats},
                                           {"codec", s.codec},
                                           {"freed_memory_mapped", freed_memory_mapped}, {"cells", cells}}
                                .dump(2)
                                .c_str());
    return 0;
}
