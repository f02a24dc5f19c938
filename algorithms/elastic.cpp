#include "algorithms/elastic.hpp"

#include "algorithms/vector_math.hpp"

namespace tether {

void SendParametersWorker::on_join(Backend& backend, float* x, const float* center_host, std::uint64_t version) {
    WorkerRule::on_join(backend, x, center_host, version);
    scratch_ = DeviceBuffer<float>(backend, size_);
}

void SendParametersWorker::make_payload(Backend& backend, const float* x, float* payload_host) {
    backend.copy_to_host(payload_host, x, size_ * sizeof(float));
}

void SendParametersWorker::apply_reply(Backend& backend, float* x, const float* reply_host, std::uint64_t version) {
    pull_version_ = version;
    if (reply_ == Reply::replace) {
        backend.copy_from_host(x, reply_host, size_ * sizeof(float));
        return;
    }
    // Host memory reads the reply where it arrived; a GPU needs it uploaded first.
    const float* reply = reply_host;
    if (!backend.host_addressable()) {
        scratch_.upload(reply_host, size_);
        reply = scratch_.data();
    }
    if (reply_ == Reply::subtract) {
        backend.axpy(x, reply, size_, -1.f);
    } else {
        backend.scale(x, size_, 1.f - alpha_);
        backend.axpy(x, reply, size_, alpha_);
    }
}

double ElasticCenter::apply(CenterState& center, const Exchange& e, float* reply) {
    float* x = center.x.data();
    for (std::size_t i = 0; i < e.size; ++i) {
        const float elastic = alpha_ * (e.payload[i] - x[i]);
        x[i] += elastic;
        reply[i] = elastic;
    }
    return host::norm(reply, e.size);
}

}  // namespace tether
