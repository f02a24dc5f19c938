// ADAG / AGN, accumulated gradient normalization (Hermans, Spanakis, Moeckel, "Accumulated
// Gradient Normalization", ACML 2017).
//   worker, every tau steps:  send  D / tau  with D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + D / tau;  reply x~
// Dividing by tau makes each commit the *mean* of the tau local updates, so the step on x~ does
// not grow with tau as DOWNPOUR's does. N asynchronous commits stay N separate steps (each over
// tau * B samples), so per sample ADAG moves x~ 1/tau as far as sequential training. The last,
// shorter window of a run is divided by tau as well, so its steps weigh like all others.
// With tau = 1 it equals DOWNPOUR.
// Defaults: communication_window 5.
#include "algorithms/builtin.hpp"
#include "algorithms/pull_push.hpp"

namespace tether {

// DOWNPOUR's rules, the worker's given tau to divide by.
using Adag = RulePair<PullPushWorker, AccumulatingCenter>;

std::shared_ptr<const Strategy> make_adag(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(5);
    return std::make_shared<Adag>(window, options.landing(window), AccumulatingCenter(), /*normalize_window*/ window);
}

}  // namespace tether
