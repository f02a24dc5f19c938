// Overlapped exchanges (the strategy's overlap_steps = its window) against blocking ones, through the
// embedding API. N workers each take S local steps of `--step-ms` and call step(); every
// `--window` steps the strategy exchanges a vector of `--elements` floats with the center.
//   --step-ms    the local step: `sleep` (a GPU step: the CPU waits) or `busy` (a CPU step:
//                a loop over the parameters until that much time has passed)
//   --center-ms  a slow center or link, simulated: the center's rule sleeps this long per
//                exchange before it applies it (strategy "slow-downpour", registered here
//                with the public API around the built-in downpour). 0: the real center.
// For each cell it runs blocking and overlapped in turn, --repeats times, and prints the
// medians: wall time for all workers to finish, and the time step()/finish() waited on the
// center, per worker. --json prints one object per cell.
//   tether-bench-overlap [--workers 1,4] [--center-ms 0,5,20] [--step-ms 2] [--window 5]
//                        [--steps 200] [--elements 235146] [--compute sleep|busy]
//                        [--transport inproc|tcp] [--repeats 3] [--json]
#include <tether/strategy.hpp>
#include <tether/tether.hpp>
#include "bench_args.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/builtin.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
    std::vector<int> workers{1, 4};
    std::vector<double> center_ms{0, 5, 20};
    double step_ms = 2;
    int window = 5;
    int steps = 200;
    std::size_t elements = 235146;
    bool busy = false;
    std::string transport = "inproc";
    int repeats = 3;
    bool json = false;
};

// downpour, with a center that first sleeps `center_ms` per exchange.
class SlowCenter final : public tether::AsynchronousCenterRule {
public:
    SlowCenter(std::unique_ptr<tether::CenterRule> inner, double ms) : inner_(std::move(inner)), ms_(ms) {}
    double apply(tether::CenterState& center, const tether::Exchange& e, float* reply) override {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms_));
        return inner_->apply(center, e, reply);
    }

private:
    std::unique_ptr<tether::CenterRule> inner_;
    double ms_;
};

class SlowStrategy final : public tether::Strategy {
public:
    SlowStrategy(std::shared_ptr<const tether::Strategy> inner, double ms) : inner_(std::move(inner)), ms_(ms) {}
    int communication_window() const override { return inner_->communication_window(); }
    std::unique_ptr<tether::WorkerRule> make_worker_rule(const tether::StrategyContext& c) const override {
        return inner_->make_worker_rule(c);
    }
    std::unique_ptr<tether::CenterRule> make_center_rule(const tether::StrategyContext& c) const override {
        return tether::center_rule<SlowCenter>(inner_->make_center_rule(c), ms_);
    }
    std::unique_ptr<tether::ExchangePolicy> make_exchange_policy(const tether::StrategyContext& c) const override {
        return inner_->make_exchange_policy(c);
    }

private:
    std::shared_ptr<const tether::Strategy> inner_;
    double ms_;
};

void register_slow_downpour() {
    tether::register_strategy("slow-downpour", "downpour whose center sleeps center_ms per exchange (benchmarks)",
                              [](tether::StrategyOptions& options, const tether::StrategyContext& context) {
                                  const double ms = options.number("center_ms", 0.0, 0.0, 60'000.0);
                                  return std::make_shared<SlowStrategy>(tether::make_downpour(options, context), ms);
                              });
}

// One local step of `ms`: the CPU waits (sleep), or works on the parameters (busy).
void local_step(std::vector<float>& x, double ms, bool busy) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
    if (!busy) {
        std::this_thread::sleep_until(until);
    } else {
        while (Clock::now() < until)
            for (std::size_t i = 0; i < x.size(); i += 64) x[i] = x[i] * 0.999999f + 1e-7f;
    }
    x[0] += 1e-3f;  // an update to send
}

struct Measured {
    double wall = 0, waiting = 0;  // seconds; waiting per worker (mean)
};

Measured run_once(const Settings& s, int workers, double center_ms, bool overlap) {
    tether::ServiceOptions o;
    std::ostringstream strategy;
    // Overlapped: each reply lands a window after its exchange went out.
    strategy << R"({"name": "slow-downpour", "communication_window": )" << s.window << R"(, "overlap_steps": )"
             << (overlap ? s.window : 0) << R"(, "center_ms": )" << center_ms << "}";
    o.strategy = strategy.str();
    o.workers = workers;
    if (s.transport == "tcp") o.address = "tcp://127.0.0.1:*";
    auto center = tether::CenterService::start(std::vector<float>(s.elements, 0.f), o);
    const auto n = static_cast<std::size_t>(workers);
    std::vector<Clock::time_point> started(n), ended(n);
    std::vector<double> waiting(n);
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w)
        threads.emplace_back([&, w] {
            std::vector<float> x(s.elements);
            auto worker = s.transport == "tcp" ? tether::WorkerClient::connect(center->address(), o, x.data(), x.size())
                                               : center->connect_worker(x.data(), x.size());
            started[std::size_t(w)] = Clock::now();
            for (int step = 0; step < s.steps; ++step) {
                local_step(x, s.step_ms, s.busy);
                worker->step(1);
            }
            waiting[std::size_t(w)] = worker->finish().seconds_waiting;
            ended[std::size_t(w)] = Clock::now();
        });
    for (auto& t : threads) t.join();
    center->wait();
    Measured m;
    m.wall = std::chrono::duration<double>(*std::max_element(ended.begin(), ended.end()) -
                                           *std::min_element(started.begin(), started.end()))
                 .count();
    for (double w : waiting) m.waiting += w / double(workers);
    return m;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

Settings parse(int argc, char** argv) {
    Settings s;
    BenchArgs args(argc, argv, "tether-bench-overlap",
                   "[--workers 1,4] [--center-ms 0,5,20] [--step-ms 2] [--window 5] [--steps 200] [--elements 235146] "
                   "[--compute sleep|busy] [--transport inproc|tcp] [--repeats 3] [--json]");
    while (args.next()) {
        if (args.is("--workers")) {
            const std::vector<long long> workers = args.integers(1, 256);
            s.workers.assign(workers.begin(), workers.end());
        } else if (args.is("--center-ms")) s.center_ms = args.numbers(0, 60000);
        else if (args.is("--step-ms")) s.step_ms = args.number(0, 60000);
        else if (args.is("--window")) s.window = int(args.integer(1, 1 << 20));
        else if (args.is("--steps")) s.steps = int(args.integer(1, 1 << 30));
        else if (args.is("--elements")) s.elements = std::size_t(args.integer(1, 1ll << 32));
        else if (args.is("--compute")) s.busy = args.word({"sleep", "busy"}) == "busy";
        else if (args.is("--transport")) s.transport = args.word({"inproc", "tcp"});
        else if (args.is("--repeats")) s.repeats = int(args.integer(1, 1000));
        else if (args.is("--json")) s.json = true;
        else args.unknown();
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const Settings s = parse(argc, argv);
    register_slow_downpour();
    if (!s.json)
        std::printf("%d steps of %.1f ms (%s) per worker, window %d, %zu floats, %s, median of %d\n"
                    "workers center_ms  blocking_s overlap_s speedup  waited_blocking_s waited_overlap_s\n",
                    s.steps, s.step_ms, s.busy ? "busy" : "sleep", s.window, s.elements, s.transport.c_str(), s.repeats);
    for (int workers : s.workers)
        for (double center_ms : s.center_ms) {
            std::vector<double> wall[2], waited[2];
            for (int r = 0; r < s.repeats; ++r)
                for (int overlap = 0; overlap < 2; ++overlap) {
                    const Measured m = run_once(s, workers, center_ms, overlap == 1);
                    wall[overlap].push_back(m.wall);
                    waited[overlap].push_back(m.waiting);
                }
            const double b = median(wall[0]), o = median(wall[1]);
            if (s.json)
                std::printf("{\"workers\": %d, \"center_ms\": %g, \"step_ms\": %g, \"compute\": \"%s\", \"window\": %d, "
                            "\"steps\": %d, \"elements\": %zu, \"transport\": \"%s\", \"blocking_s\": %.4f, "
                            "\"overlap_s\": %.4f, \"speedup\": %.3f, \"waited_blocking_s\": %.4f, \"waited_overlap_s\": %.4f}\n",
                            workers, center_ms, s.step_ms, s.busy ? "busy" : "sleep", s.window, s.steps, s.elements,
                            s.transport.c_str(), b, o, b / o, median(waited[0]), median(waited[1]));
            else
                std::printf("%7d %9g  %10.3f %9.3f %7.2fx %18.3f %16.3f\n", workers, center_ms, b, o, b / o,
                            median(waited[0]), median(waited[1]));
            std::fflush(stdout);
        }
    return 0;
}
