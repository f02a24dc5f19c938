#include "run/model_identity.hpp"

#include "backend/backend.hpp"
#include "run/agreed_settings.hpp"
#include "train/local_trainer.hpp"
#include "util/errors.hpp"

namespace tether {

ModelIdentity model_identity(const RunConfig& config, const Dataset& train) {
    auto backend = make_backend({"cpu", 1, 0});
    auto model = make_model(config, *backend, train);
    ModelIdentity id;
    id.num_parameters = model->num_parameters();
    const std::size_t servers = std::size_t(config.cluster.servers);
    if (servers > id.num_parameters)
        throw ConfigError("cluster.servers: " + std::to_string(servers) + " servers for a model of " +
                          std::to_string(id.num_parameters) + " parameters; each server needs at least one");
    id.agreed = agreed_settings(config, model->layer_sizes(), id.num_parameters);
    for (std::size_t k = 0; k < servers; ++k) {
        ServerIdentity s;
        s.range = server_range(id.num_parameters, servers, k);
        s.agreed = server_settings(id.agreed, k);
        s.fingerprint = settings_fingerprint(s.agreed);
        id.servers.push_back(std::move(s));
    }
    id.initial.resize(id.num_parameters);
    model->initialize(id.initial.data(), std::uint64_t(config.training.seed));
    id.description = model->description();
    return id;
}

}  // namespace tether
