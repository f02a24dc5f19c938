#include "run/model_identity.hpp"

#include "backend/backend.hpp"
#include "data/load.hpp"
#include "train/local_trainer.hpp"

namespace tether {

ModelIdentity model_identity(const RunConfig& config, const Dataset& train) {
    auto backend = make_backend({"cpu", 1, 0});
    auto model = make_model(config, *backend, train);
    ModelIdentity id;
    id.num_parameters = model->num_parameters();
    id.servers = config.cluster.server_identities(id.num_parameters, {{"layer_sizes", model->layer_sizes()}},
                                                  data_identity(config.data, config.training.seed));
    id.initial.resize(id.num_parameters);
    model->initialize(id.initial.data(), std::uint64_t(config.training.seed));
    id.description = model->description();
    return id;
}

}  // namespace tether
