// A strategy's two halves, as <tether/strategy.hpp> pairs them. Every communication_window
// local steps a worker runs its WorkerRule: make_payload writes what it sends, apply_reply
// applies the center's answer to its parameters x_i. The center runs one center rule: an
// asynchronous rule answers each exchange at once, a synchronous rule collects a round and
// answers every contributor when it closes. x_i may live in GPU memory, so a WorkerRule touches
// it only through VectorOps (vector_ops.hpp); x~ (CenterState::x) is host memory, and a center
// rule loops over it.
//
// Threads: tether calls a rule from one thread at a time (a worker's rule from that worker's
// training thread, the center rule from the center's thread); rules need no locks of their own.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include <tether/vector_ops.hpp>

namespace tether {

// What a vector that crosses the wire means to its receiver, which a lossy codec (fp16, bf16,
// int8, int4, topk: cluster.codec) must know to lose nothing over time:
//   state   the receiver takes it as a value (x_i, x~). Both ends keep the last value the
//           receiver reconstructed, and the codec sends the change from it.
//   update  the receiver adds it to something (an accumulated update, an elastic difference).
//           The sender keeps what compression left out and adds it to the next one (error
//           feedback).
// Top-k of a state would zero most of it, and a change sent as if it were a state would be
// added again and again: a strategy that does not say (unknown) runs with float32 only. The
// worker rule knows both, as it writes the one and applies the other: one that RulePair pairs
// says them as `static constexpr WireKinds wire_kinds` (<tether/strategy.hpp>).
enum class WireVector { unknown, state, update };
struct WireKinds {
    WireVector payload = WireVector::unknown;  // worker -> center (make_payload)
    WireVector reply = WireVector::unknown;    // center -> worker (apply_reply)
};

// The worker half. Made once per worker (per-run state such as x_pull lives here). tether calls
// it with x, the worker's parameters (StrategyContext::num_parameters floats, device memory);
// *_host are host buffers of num_parameters floats. The center's version that every exchange
// carries (how the center measures staleness) is tether's business: a rule never sees it.
class WorkerRule {
public:
    virtual ~WorkerRule() = default;
    // On joining, x already equals x~ (the welcome) and center_host is x~ as well: allocate the
    // rule's state (DeviceBuffer) here. Called again when a center that forgot the worker
    // welcomes it anew.
    virtual void on_join(VectorOps& ops, float* x, const float* center_host) { (void)ops, (void)x, (void)center_host; }
    // Writes what the worker sends, from x.
    virtual void make_payload(VectorOps& ops, const float* x, float* payload_host) = 0;
    // Applies the center's answer to x.
    virtual void apply_reply(VectorOps& ops, float* x, const float* reply_host) = 0;
    // What tether itself calls with a reply: the received message as it is, which a rule may
    // hold on to instead of copying it into state of its own (x_pull). Its floats are host
    // memory that nobody writes to again while anybody holds them. Copying ~1 MB per exchange
    // is a pass over memory a worker waits for at every exchange. By default, apply_reply().
    virtual void apply_shared(VectorOps& ops, float* x, std::shared_ptr<const float> reply_host) {
        apply_reply(ops, x, reply_host.get());
    }
};

// The center's state: x~ and its version (the center, not the rule, counts versions).
struct CenterState {
    std::vector<float> x;
    std::uint64_t version = 0;
};

// One worker's exchange, already checked: right size, every element finite. Whole (offset 0,
// size x~'s, last), reassembled from its chunks; or, to a rule that takes_ranges(), one range
// of it at a time as its chunks arrive: payload[0, size) lands on x~[offset, offset + size),
// and `last` marks the exchange's final range.
struct Exchange {
    std::uint32_t worker_id = 0;
    std::uint64_t pull_version = 0;  // the center version at this worker's last pull
    const float* payload = nullptr;
    std::size_t size = 0;
    std::size_t offset = 0;
    bool last = true;
};

// What both kinds of center rule may do when a worker is welcomed (its first pull: x~ as it is
// now) or leaves (finished or lost). A rule with per-worker state must free it on leave.
class CenterRuleBase {
public:
    CenterRuleBase() = default;
    // A rule as made, before it has run, is what RulePair copies for each center it makes.
    CenterRuleBase(const CenterRuleBase&) = default;
    CenterRuleBase& operator=(const CenterRuleBase&) = default;
    virtual ~CenterRuleBase() = default;
    virtual void on_join(const CenterState& center, std::uint32_t worker_id) { (void)center, (void)worker_id; }
    virtual void on_leave(std::uint32_t worker_id) { (void)worker_id; }
    // true: the rule works element by element, so the center may hand it an exchange range by
    // range as the chunks arrive (Exchange::offset, Exchange::last) instead of assembling the
    // whole vector first. A center then keeps no copy of each worker's vector: its memory does
    // not grow with the workers (docs/architecture.md, "Memory"). The ranges of one exchange
    // come in order, each once, but other workers' ranges may come in between, and a worker
    // lost (or refused) half-way leaves the ranges already given applied. An asynchronous
    // rule then writes reply[0, size) for that range; a synchronous one's round may hold some
    // ranges of an exchange and not others.
    virtual bool takes_ranges() const { return false; }
};

// Answers each exchange at once.
class AsynchronousCenterRule : public CenterRuleBase {
public:
    // Updates center.x, writes the reply (exchange.size floats: x~'s size, or the range's to a
    // rule that takes_ranges()) and returns the norm of the update applied to x~. `reply` may be the exchange's own payload (the center answers in
    // the buffer it received, without a copy): read payload[i] before writing reply[i].
    virtual double apply(CenterState& center, const Exchange& exchange, float* reply) = 0;
};

// Collects a round (one exchange per live worker, or a quorum at the deadline) and answers
// every contributor with one reply when it closes.
class SynchronousCenterRule : public CenterRuleBase {
public:
    virtual void contribute(CenterState& center, const Exchange& exchange) = 0;
    // Called with at least one contribution: updates center.x, writes the one reply
    // (center.x.size() floats), returns the norm of the update to x~, and starts a new round.
    virtual double close_round(CenterState& center, float* reply) = 0;
};

// The center rule of a strategy: one of the two kinds, and the center asks which.
class CenterRule final {
public:
    explicit CenterRule(std::unique_ptr<AsynchronousCenterRule> rule) : asynchronous_(std::move(rule)) {}
    explicit CenterRule(std::unique_ptr<SynchronousCenterRule> rule) : synchronous_(std::move(rule)) {}

    bool synchronous() const { return synchronous_ != nullptr; }
    bool takes_ranges() { return base().takes_ranges(); }
    void on_join(const CenterState& center, std::uint32_t worker_id) { base().on_join(center, worker_id); }
    void on_leave(std::uint32_t worker_id) { base().on_leave(worker_id); }
    // The calls of the other kind are a programming error (the center never makes them).
    double apply(CenterState& center, const Exchange& exchange, float* reply) {
        if (!asynchronous_)
            throw std::logic_error("this strategy is synchronous: its center collects rounds, it does not apply exchanges");
        return asynchronous_->apply(center, exchange, reply);
    }
    void contribute(CenterState& center, const Exchange& exchange) {
        if (!synchronous_) throw std::logic_error("this strategy is asynchronous: its center applies each exchange");
        synchronous_->contribute(center, exchange);
    }
    double close_round(CenterState& center, float* reply) {
        if (!synchronous_) throw std::logic_error("this strategy is asynchronous: it has no rounds");
        return synchronous_->close_round(center, reply);
    }

private:
    CenterRuleBase& base() {
        if (asynchronous_) return *asynchronous_;
        return *synchronous_;
    }
    std::unique_ptr<AsynchronousCenterRule> asynchronous_;
    std::unique_ptr<SynchronousCenterRule> synchronous_;
};

// center_rule<MyCenter>(args...): a CenterRule holding a new MyCenter, of the kind MyCenter is.
template <typename Rule, typename... Args>
std::unique_ptr<CenterRule> center_rule(Args&&... args) {
    return std::make_unique<CenterRule>(std::make_unique<Rule>(std::forward<Args>(args)...));
}


// Helpers for center rules, over host memory. Written to vectorize: a float sum per block of
// 4096 elements, the blocks summed in double (one running double sum is a serial chain).
namespace host {
// Runs value = element(i) for every i in [0, n) and returns the norm of the values: a center
// rule's update loop and the norm of its update in one pass over memory, not two.
template <typename Element>
double for_each_norm(std::size_t n, Element element) {
    // Under OpenMP (tether's own build), `omp simd` vectorizes the loop without the runtime
    // alias checks a rule writing its reply over its payload would otherwise need: element(i)
    // only ever touches index i. Without it (a plugin built without -fopenmp) the loop is the
    // same, left to the compiler, and no unknown-pragma warning. Blocks of float partial sums,
    // added up in double, keep the rounding of a long vector small.
    constexpr std::size_t kBlock = 4096;
    double total = 0;
    for (std::size_t start = 0; start < n; start += kBlock) {
        const std::size_t end = start + kBlock < n ? start + kBlock : n;
        float block = 0.f;
#ifdef _OPENMP
#pragma omp simd reduction(+ : block)
#endif
        for (std::size_t i = start; i < end; ++i) {
            const float v = element(i);
            block += v * v;
        }
        total += block;
    }
    return std::sqrt(total);
}
inline double sum_of_squares(const float* x, std::size_t n) {
    const double norm = for_each_norm(n, [x](std::size_t i) { return x[i]; });
    return norm * norm;
}
inline double norm(const float* x, std::size_t n) { return for_each_norm(n, [x](std::size_t i) { return x[i]; }); }
}  // namespace host

}  // namespace tether
