// The center half shared by the accumulated-update strategies (downpour, adag, dynsgd), whose
// workers run PullPushWorker (<tether/worker_rules.hpp>): x~ <- x~ + d * payload, reply x~.
#pragma once

#include <tether/strategy.hpp>

namespace tether {

// x~ <- x~ + d * payload; reply x~. Returns the norm of the step on x~.
inline double accumulate(CenterState& center, const Exchange& e, float d, float* reply) {
    float* x = center.x.data() + e.offset;
    const float* payload = e.payload;
    // The norm of what x~ moved, in the same pass; payload[i] is read before reply[i] (possibly
    // the same element) is written.
    return host::for_each_norm(e.size, [&](std::size_t i) {
        const float step = d * payload[i];
        const float updated = x[i] + step;
        x[i] = updated;
        reply[i] = updated;
        return step;
    });
}

// x~ <- x~ + payload; reply x~ (downpour, adag).
class AccumulatingCenter final : public AsynchronousCenterRule {
public:
    bool takes_ranges() const override { return true; }
    double apply(CenterState& center, const Exchange& exchange, float* reply) override {
        return accumulate(center, exchange, 1.f, reply);
    }
};

}  // namespace tether
