// tether's strategy library: what a strategy of your own implements, and how it is registered
// by name so that ServiceOptions.strategy ({"name": "mine", ...}) and config files
// (`strategy.name`) both accept it. Every built-in strategy (algorithms/) is written against
// this header and nothing else of tether. docs/strategies.md, "Adding a strategy", walks
// through one.
//
// A strategy is a pair of rules, a worker half and a center half (<tether/rules.hpp>), with the
// window between two exchanges, what the vectors on the wire are and how replies land. The worker
// halves that built-ins share are in <tether/worker_rules.hpp>, for a strategy of one's own to
// pair with its own center half (RulePair).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tether/errors.hpp>
#include <tether/exchange_policy.hpp>
#include <tether/rules.hpp>
#include <tether/vector_ops.hpp>
#include <tether/worker_rules.hpp>

namespace tether {

struct StrategyContext {
    int workers = 1;  // N, the workers the center expects
    // The length of x_i and x~. Rules always get it; a factory gets 0 while a config file is
    // checked before its model has met the data (it is known in the embedding API).
    std::size_t num_parameters = 0;
    // The local optimizer the workers run ("sgd", "nesterov", "adam": training.optimizer.name),
    // for a factory that needs one (eamsgd). Empty where tether does not run it: in the
    // embedding API the local optimizer is the user's own.
    std::string local_optimizer = "";
};

// A strategy: immutable, built once from its options; it makes one WorkerRule per worker and
// one CenterRule for the center.
class Strategy {
public:
    virtual ~Strategy() = default;
    // Local steps between two exchanges (tau).
    virtual int communication_window() const = 0;
    virtual std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const = 0;
    virtual std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const = 0;
    // What the payload and the reply are (WireKinds, <tether/rules.hpp>). Declare it to allow
    // compressed exchanges.
    virtual WireKinds wire_kinds() const { return {}; }
    // Made once per worker: when it exchanges which part of x, and how replies land
    // (<tether/exchange_policy.hpp>). By default all of x every communication_window() steps,
    // the worker waiting for the reply.
    virtual std::unique_ptr<ExchangePolicy> make_exchange_policy(const StrategyContext& context) const {
        (void)context;
        return std::make_unique<WindowPolicy>(communication_window());
    }
    // Whether the center sizes each worker's window to its speed (dynamic local updates): it
    // measures a worker's local steps per second between its exchanges and, with each reply,
    // gives it max(1, floor(communication_window() * v_i / v_max)) steps (ExchangePolicy::
    // set_window), v_max the fastest live worker's rate. Asynchronous rules only.
    virtual bool dynamic_windows() const { return false; }
};

// A strategy that holds its window, its wire kinds and how its replies land, so that it only
// makes its rules: what RulePair derives from, and a strategy of your own may too.
class WindowedStrategy : public Strategy {
public:
    explicit WindowedStrategy(int communication_window, WireKinds wire_kinds = {}, Landing landing = {})
        : window_(communication_window), wire_kinds_(wire_kinds), landing_(landing) {}
    int communication_window() const override { return window_; }
    WireKinds wire_kinds() const override { return wire_kinds_; }
    std::unique_ptr<ExchangePolicy> make_exchange_policy(const StrategyContext&) const override {
        return std::make_unique<WindowPolicy>(communication_window(), landing_);
    }

protected:
    Landing landing() const { return landing_; }

private:
    int window_;
    WireKinds wire_kinds_;
    Landing landing_;
};

// A strategy as a pair of rules: its worker rule and its center rule are its type, so that
// strategies that share a half are one composition under other names (as ensmallen's
// `using MomentumSGD = SGD<MomentumUpdate>`):
//   using Downpour = RulePair<PullPushWorker, AccumulatingCenter>;
//   using Dynsgd = RulePair<PullPushWorker, DynsgdCenter>;
// Each worker gets a new Worker(context.num_parameters, worker...), each center (one per
// server) a copy of `center`, which is never run itself. The wire kinds are the worker rule's
// (Worker::wire_kinds: it writes the payload and applies the reply; WireKinds{} for float32
// only). A strategy that changes more (its exchange policy, dynamic_windows) derives from it.
template <typename Worker, typename Center>
class RulePair : public WindowedStrategy {
public:
    template <typename... WorkerArguments>
    explicit RulePair(int communication_window, Landing landing = {}, Center center = Center(),
                      WorkerArguments... worker)
        : WindowedStrategy(communication_window, Worker::wire_kinds, landing), center_(std::move(center)),
          make_worker_([worker...](std::size_t size) { return std::make_unique<Worker>(size, worker...); }) {}
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const override {
        return make_worker_(context.num_parameters);
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext&) const override {
        return center_rule<Center>(center_);
    }

private:
    Center center_;
    std::function<std::unique_ptr<Worker>(std::size_t)> make_worker_;
};

// The strategy's own JSON block, read strictly: each getter names its key, its default and what
// is allowed, and returns the default when the key is absent. After the factory returns, a key
// nobody asked for is an error ("unknown key; did you mean ..."), and so is a value outside the
// allowed range; errors are ConfigErrors naming the key as the user wrote it
// ("strategy.moving_rate" in a config file, "ServiceOptions.strategy.moving_rate" in the API).
// The values read (or defaulted) describe the strategy in summaries and in the fingerprint
// that keeps a center and a worker with different settings apart.
class StrategyOptions {
public:
    virtual ~StrategyOptions() = default;
    virtual std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max) = 0;
    virtual double number(const std::string& key, double fallback, double min, double max, bool min_exclusive = false) = 0;
    // null (or absent with no fallback) gives nullopt; `when_null` says what that means.
    virtual std::optional<double> optional_number(const std::string& key, std::optional<double> fallback, double min,
                                                  double max, bool min_exclusive, const std::string& when_null) = 0;
    virtual bool boolean(const std::string& key, bool fallback) = 0;
    virtual std::string string(const std::string& key, const std::string& fallback) = 0;
    virtual std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed) = 0;
    // The key as the user wrote it, for the factory's own errors.
    virtual std::string path_of(const std::string& key) const = 0;
    // The value a key resolved to when its default depends on the context (alpha = 0.9 / N):
    // recorded in the strategy's description instead of null.
    virtual void resolve(const std::string& key, double value) = 0;

    // The key every strategy shares: tau, from 1 to 1,000,000.
    int communication_window(int fallback) { return int(integer("communication_window", fallback, 1, 1'000'000)); }
    // The key every built-in shares: overlap_steps d, from 0 to `most` (the fewest steps between
    // two exchanges): each reply lands d local steps after its exchange went out, the exchange
    // running on tether's thread meanwhile, and the d steps are kept.
    Landing landing(int most) {
        const int d = int(integer("overlap_steps", 0, 0, 1'000'000));
        if (d > most)
            throw ConfigError(path_of("overlap_steps") + ": " + std::to_string(d) + "; a reply must land before the next " +
                              "exchange goes out, " + std::to_string(most) + " steps later: at most " + std::to_string(most));
        return {d, std::nullopt};
    }
};

// Builds a strategy from its options. Throws ConfigError for a combination that cannot work.
using StrategyFactory =
    std::function<std::shared_ptr<const Strategy>(StrategyOptions& options, const StrategyContext& context)>;

// Makes `name` a valid strategy name for ServiceOptions.strategy and for config files, in this
// process, from now on. `summary` is one line for listings. Throws std::invalid_argument for
// an empty factory, a name already taken (the built-ins' too) or one that is not lower-case
// letters, digits, '-' and '_'. Safe from any thread.
void register_strategy(const std::string& name, const std::string& summary, StrategyFactory factory);
// Every strategy name: "sequential" (no center), the built-ins, then those registered.
std::vector<std::string> strategy_names();
// Loads the shared library at `path`, a plugin: built against this header alone, linking
// nothing of tether, it defines extern "C" void tether_register_strategies(), which calls
// register_strategy for each of its strategies (tests/packaging/damped_sum_plugin.cpp; the
// `tether` command's --plugin, Python's tether.load_plugin). Never unloaded. Throws ConfigError
// starting with `path` when it cannot be loaded or registers nothing it could.
void load_plugin(const std::string& path);

}  // namespace tether
