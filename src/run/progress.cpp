#include "run/progress.hpp"

#include <cstdio>

namespace tether {

void Progress::report(const EvaluationPoint& p, double samples_per_second) {
    const double remaining = p.epoch > 0 ? p.wall_seconds * (total_epochs_ - p.epoch) / p.epoch : 0.0;
    std::printf("[%s] epoch %5.2f/%g  train loss %.4f  test acc %6.2f%%  %8.0f samples/s  elapsed %6.1fs  eta %6.1fs\n",
                label_.c_str(), p.epoch, total_epochs_, p.train_loss, 100.0 * p.test_accuracy, samples_per_second,
                p.wall_seconds, remaining);
    std::fflush(stdout);
}

}  // namespace tether
