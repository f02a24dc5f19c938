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
    // The center plans and bounds sample counts by batch size and epochs, and a worker with
    // another learning rate trains another run: all three are agreed, under their config keys.
    const nlohmann::json training = {{"batch_size", config.training.batch_size},
                                     {"epochs", config.training.epochs},
                                     {"optimizer", {{"learning_rate", config.training.optimizer.learning_rate}}}};
    id.servers = config.cluster.server_identities(id.num_parameters, {{"layer_sizes", model->layer_sizes()}},
                                                  data_identity(config.data, config.training.seed), training);
    id.initial.resize(id.num_parameters);
    model->initialize(id.initial.data(), std::uint64_t(config.training.seed));
    id.description = model->description();
    return id;
}

}  // namespace tether
