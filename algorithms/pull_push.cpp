#include "algorithms/pull_push.hpp"

#include <algorithm>

namespace tether {

void PullPushWorker::join(VectorOps& ops, float* x, const float*) {
    pulled_ = DeviceBuffer<float>(ops, size_);
    scratch_ = DeviceBuffer<float>(ops, size_);
    ops.copy(pulled_.data(), x, size_ * sizeof(float));
}

void PullPushWorker::write_payload(VectorOps& ops, const float* x, float* payload_host) {
    // In host memory the update is computed straight into the message; a GPU computes it in
    // its own memory and downloads it once.
    float* update = ops.host_addressable() ? payload_host : scratch_.data();
    ops.difference(update, x, pulled_.data(), size_);
    if (normalize_window_ > 0) ops.scale(update, size_, 1.f / float(normalize_window_));
    if (update != payload_host) scratch_.download(payload_host, size_);
}

void PullPushWorker::apply(VectorOps& ops, float* x, const float* reply_host) {
    ops.copy_from_host(x, reply_host, size_ * sizeof(float));
    ops.copy(pulled_.data(), x, size_ * sizeof(float));
}

double AccumulatingCenter::apply(CenterState& center, const Exchange& e, float* reply) {
    const std::uint64_t staleness = center.version - std::min(center.version, e.pull_version);
    const float d = damping(staleness);
    float* x = center.x.data();
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

}  // namespace tether
