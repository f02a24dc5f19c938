#include "algorithms/pull_push.hpp"

namespace tether {

void PullPushWorker::on_join(VectorOps& ops, float* x, const float*) {
    if (!ops.host_addressable()) scratch_ = DeviceBuffer<float>(ops, size_);
    copy_to_pulled(ops, x);  // x = x~ already
}

void PullPushWorker::copy_to_pulled(VectorOps& ops, const float* x) {
    kept_reply_.reset();
    if (pulled_.size() != size_) pulled_ = DeviceBuffer<float>(ops, size_);
    ops.copy(pulled_.data(), x, size_ * sizeof(float));
}

void PullPushWorker::make_payload(VectorOps& ops, const float* x, float* payload_host) {
    // In host memory the update is computed straight into the message; a GPU computes it in
    // its own memory and downloads it once.
    float* update = ops.host_addressable() ? payload_host : scratch_.data();
    ops.difference(update, x, pulled(), size_);
    if (normalize_window_ > 0) ops.scale(update, size_, 1.f / float(normalize_window_));
    if (update != payload_host) scratch_.download(payload_host, size_);
}

void PullPushWorker::apply_reply(VectorOps& ops, float* x, const float* reply_host) {
    ops.copy_from_host(x, reply_host, size_ * sizeof(float));
    copy_to_pulled(ops, x);
}

void PullPushWorker::apply_shared(VectorOps& ops, float* x, std::shared_ptr<const float> reply_host) {
    if (!ops.host_addressable()) return apply_reply(ops, x, reply_host.get());
    ops.copy_from_host(x, reply_host.get(), size_ * sizeof(float));
    kept_reply_ = std::move(reply_host);
    pulled_ = DeviceBuffer<float>();  // a model's worth of memory, unused while a reply is kept
}

double accumulate(CenterState& center, const Exchange& e, float d, float* reply) {
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

}  // namespace tether
