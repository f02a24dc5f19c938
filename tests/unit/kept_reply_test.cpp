// A worker rule may keep the center's reply as its own state (WorkerRule::apply_shared) instead
// of copying it, as the built-in downpour, adag and dynsgd do in host memory. That is only right
// if nothing writes to the reply's bytes while the rule holds them: not the worker's next
// message (over inproc:// the reply arrives in the very buffer the worker sent), not the next
// reply assembled from several servers, not the next decoded one. A rule written against the
// public header checks that at every exchange, over each of those paths.
#include <doctest/doctest.h>

#include <tether/strategy.hpp>
#include <tether/tether.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<int> replies_kept{0};

// DOWNPOUR whose x_pull is the kept reply. The payload is made as copy-then-subtract, the order
// that reads a wrong x_pull if tether handed out the kept bytes as the next message.
class KeepingWorker final : public tether::WorkerRule {
public:
    explicit KeepingWorker(std::size_t size) : size_(size) {}

    void on_join(tether::VectorOps&, float* x, const float*) override {
        kept_.reset();
        joined_.assign(x, x + size_);  // the test runs on the CPU: x is host memory
    }
    void make_payload(tether::VectorOps& ops, const float* x, float* payload_host) override {
        if (kept_ && !std::equal(seen_.begin(), seen_.end(), kept_.get()))
            throw std::runtime_error("the reply this rule keeps was written to while it held it");
        const float* pulled = kept_ ? kept_.get() : joined_.data();
        ops.copy(payload_host, x, size_ * sizeof(float));
        ops.axpy(payload_host, pulled, size_, -1.f);
    }
    void apply_reply(tether::VectorOps&, float*, const float*) override {
        throw std::logic_error("tether gave the reply as a plain pointer, which a rule cannot keep");
    }
    void apply_shared(tether::VectorOps& ops, float* x, std::shared_ptr<const float> reply) override {
        ops.copy_from_host(x, reply.get(), size_ * sizeof(float));
        seen_.assign(reply.get(), reply.get() + size_);
        kept_ = std::move(reply);
        ++replies_kept;
    }

private:
    std::size_t size_;
    std::vector<float> joined_, seen_;
    std::shared_ptr<const float> kept_;
};

class SummingCenter final : public tether::AsynchronousCenterRule {
public:
    double apply(tether::CenterState& center, const tether::Exchange& e, float* reply) override {
        for (std::size_t i = 0; i < e.size; ++i) {
            center.x[i] += e.payload[i];
            reply[i] = center.x[i];
        }
        return tether::host::norm(center.x.data(), e.size);
    }
};

// The same sum in rounds: one reply, from one buffer, for every contributor.
class SummingRounds final : public tether::SynchronousCenterRule {
public:
    void contribute(tether::CenterState&, const tether::Exchange& e) override {
        sum_.resize(e.size, 0.f);
        for (std::size_t i = 0; i < e.size; ++i) sum_[i] += e.payload[i];
    }
    double close_round(tether::CenterState& center, float* reply) override {
        for (std::size_t i = 0; i < sum_.size(); ++i) {
            center.x[i] += sum_[i];
            reply[i] = center.x[i];
        }
        sum_.assign(sum_.size(), 0.f);
        return tether::host::norm(center.x.data(), center.x.size());
    }

private:
    std::vector<float> sum_;
};

template <typename CenterRule>
class KeepingStrategy final : public tether::WindowedStrategy {
public:
    // Wire kinds, so that a lossy codec (decoded replies) is allowed too.
    KeepingStrategy(int window, tether::Landing landing)
        : WindowedStrategy(window, {tether::WireVector::update, tether::WireVector::state}, landing) {}
    std::unique_ptr<tether::WorkerRule> make_worker_rule(const tether::StrategyContext& c) const override {
        return std::make_unique<KeepingWorker>(c.num_parameters);
    }
    std::unique_ptr<tether::CenterRule> make_center_rule(const tether::StrategyContext&) const override {
        return tether::center_rule<CenterRule>();
    }
};

void register_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        tether::register_strategy("keeps-reply", "DOWNPOUR that keeps the reply as x_pull", [](tether::StrategyOptions& o, const tether::StrategyContext&) {
            const int window = o.communication_window(1);
            return std::make_shared<KeepingStrategy<SummingCenter>>(window, o.landing(window));
        });
        tether::register_strategy("keeps-reply-rounds", "the same in synchronous rounds", [](tether::StrategyOptions& o, const tether::StrategyContext&) {
            const int window = o.communication_window(1);
            return std::make_shared<KeepingStrategy<SummingRounds>>(window, o.landing(window));
        });
    });
}

// Worker w adds w + 1 to every element before each of its 6 steps: x~ ends at 1 + 6 + 12.
std::vector<float> train_two_workers(tether::ServiceOptions options) {
    options.workers = 2;
    auto center = tether::CenterService::start(std::vector<float>(5, 1.f), options);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(2);
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            try {
                std::vector<float> x(5);
                auto worker = center->connect_worker(x.data(), x.size());
                for (int s = 0; s < 6; ++s) {
                    for (float& v : x) v += float(w + 1);
                    worker->step(1);
                }
                worker->finish();
            } catch (const std::exception& e) {
                errors[std::size_t(w)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
    return center->wait();
}

}  // namespace

// Codecs: float32 both ways; fp16 both ways (replies decoded on the worker); fp16 payloads
// with float32 replies (the center decodes each exchange into a buffer it answers from).
TEST_CASE("a rule that keeps the reply never sees it change: inproc and tcp, 1 and 2 servers, rounds, overlap, codecs") {
    register_once();
    const std::vector<std::pair<const char*, const char*>> codecs = {{"float32", "same"}, {"fp16", "same"}, {"fp16", "float32"}};
    for (const char* strategy : {"keeps-reply", "keeps-reply-rounds"})
        for (const char* transport : {"inproc", "tcp"})
            for (int servers : {1, 2})
                for (bool overlap : {false, true})
                    for (const auto& [codec, reply_codec] : codecs) {
                        CAPTURE(strategy);
                        CAPTURE(transport);
                        CAPTURE(servers);
                        CAPTURE(overlap);
                        CAPTURE(codec);
                        CAPTURE(reply_codec);
                        tether::ServiceOptions o;
                        o.strategy = std::string(R"({"name": ")") + strategy + R"(", "communication_window": 2, "overlap_steps": )" +
                                     (overlap ? "2}" : "0}");
                        if (std::string(transport) == "tcp")
                            o.address = servers == 1 ? "tcp://127.0.0.1:*" : "tcp://127.0.0.1:*,tcp://127.0.0.1:*";
                        o.servers = servers;
                        o.codec = codec;
                        o.reply_codec = reply_codec;
                        const int kept_before = replies_kept;
                        CHECK(train_two_workers(o) == std::vector<float>(5, 19.f));
                        CHECK(replies_kept - kept_before >= 2 * 2);  // 3 exchanges a worker, the last after finish
                    }
}
