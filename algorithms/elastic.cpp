#include "algorithms/elastic.hpp"

namespace tether {

void SendParametersWorker::join(VectorOps& ops, float*, const float*) { scratch_ = DeviceBuffer<float>(ops, size_); }

void SendParametersWorker::write_payload(VectorOps& ops, const float* x, float* payload_host) {
    ops.copy_to_host(payload_host, x, size_ * sizeof(float));
}

void SendParametersWorker::apply(VectorOps& ops, float* x, const float* reply_host) {
    if (reply_ == Reply::replace) {
        ops.copy_from_host(x, reply_host, size_ * sizeof(float));
        return;
    }
    // Host memory reads the reply where it arrived; a GPU needs it uploaded first.
    const float* reply = reply_host;
    if (!ops.host_addressable()) {
        scratch_.upload(reply_host, size_);
        reply = scratch_.data();
    }
    if (reply_ == Reply::subtract) {
        ops.axpy(x, reply, size_, -1.f);
    } else {
        ops.scale(x, size_, 1.f - alpha_);
        ops.axpy(x, reply, size_, alpha_);
    }
}

double ElasticCenter::apply(CenterState& center, const Exchange& e, float* reply) {
    float* x = center.x.data();
    const float* payload = e.payload;
    // A local copy: the loop's stores could alias alpha_ as far as the compiler knows, and it
    // reloaded it for every vector.
    const float alpha = alpha_;
    return host::for_each_norm(e.size, [&](std::size_t i) {
        const float elastic = alpha * (payload[i] - x[i]);
        x[i] += elastic;
        reply[i] = elastic;
        return elastic;
    });
}

std::unique_ptr<WorkerRule> AsyncElasticStrategy::make_worker_rule(const StrategyContext& c) const {
    return std::make_unique<SendParametersWorker>(c.num_parameters, SendParametersWorker::Reply::subtract, 0.f);
}

std::unique_ptr<CenterRule> AsyncElasticStrategy::make_center_rule(const StrategyContext&) const {
    return center_rule<ElasticCenter>(float(alpha_));
}

double read_moving_rate(StrategyOptions& options, const StrategyContext& context) {
    const auto given = options.optional_number("moving_rate", std::nullopt, 0.0, 1.0, true, "0.9 / workers");
    if (given) return *given;
    const double alpha = 0.9 / double(context.workers);
    options.resolve("moving_rate", alpha);
    return alpha;
}

}  // namespace tether
