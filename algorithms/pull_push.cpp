#include "algorithms/pull_push.hpp"

#include "algorithms/vector_math.hpp"

namespace tether {

void PullPushWorker::on_join(Backend& backend, float* x, const float* center_host, std::uint64_t version) {
    WorkerRule::on_join(backend, x, center_host, version);
    pulled_ = DeviceBuffer<float>(backend, size_);
    scratch_ = DeviceBuffer<float>(backend, size_);
    backend.copy(pulled_.data(), x, size_ * sizeof(float));
}

void PullPushWorker::make_payload(Backend& backend, const float* x, float* payload_host) {
    // In host memory the update is computed straight into the message; a GPU computes it in
    // its own memory and downloads it once.
    float* update = backend.host_addressable() ? payload_host : scratch_.data();
    backend.difference(update, x, pulled_.data(), size_);
    if (normalize_window_ > 0) backend.scale(update, size_, 1.f / float(normalize_window_));
    if (update != payload_host) scratch_.download(payload_host, size_);
}

void PullPushWorker::apply_reply(Backend& backend, float* x, const float* reply_host, std::uint64_t version) {
    backend.copy_from_host(x, reply_host, size_ * sizeof(float));
    backend.copy(pulled_.data(), x, size_ * sizeof(float));
    pull_version_ = version;
}

double AccumulatingCenter::apply(CenterState& center, const Exchange& e, float* reply) {
    const std::uint64_t staleness = center.version - std::min(center.version, e.pull_version);
    const float d = damping(staleness);
    const double moved = d * host::norm(e.payload, e.size);  // before the reply overwrites the payload
    float* x = center.x.data();
    for (std::size_t i = 0; i < e.size; ++i) {
        const float updated = x[i] + d * e.payload[i];
        x[i] = updated;
        reply[i] = updated;
    }
    return moved;
}

}  // namespace tether
