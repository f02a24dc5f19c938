#include "algorithms/send_parameters.hpp"

namespace tether {

void SendParametersWorker::on_join(VectorOps& ops, float*, const float*) {
    if (!ops.host_addressable()) scratch_ = DeviceBuffer<float>(ops, size_);
}

void SendParametersWorker::make_payload(VectorOps& ops, const float* x, float* payload_host) {
    ops.copy_to_host(payload_host, x, size_ * sizeof(float));
}

void SendParametersWorker::apply_reply(VectorOps& ops, float* x, const float* reply_host) {
    ops.copy_from_host(x, reply_host, size_ * sizeof(float));
}

const float* SendParametersWorker::on_device(VectorOps& ops, const float* reply_host) {
    if (ops.host_addressable()) return reply_host;
    scratch_.upload(reply_host, size_);
    return scratch_.data();
}

double read_moving_rate(StrategyOptions& options, const StrategyContext& context) {
    const auto given = options.optional_number("moving_rate", std::nullopt, 0.0, 1.0, true, "0.9 / workers");
    if (given) return *given;
    const double alpha = 0.9 / double(context.workers);
    options.resolve("moving_rate", alpha);
    return alpha;
}

}  // namespace tether
