#include "run/worker_run.hpp"

#include <cstdlib>

#include "backend/backend.hpp"
#include "backend/device_choice.hpp"
#include "run/model_identity.hpp"
#include "train/local_trainer.hpp"
#include "worker/server_sessions.hpp"

namespace tether {

WorkerResult run_worker(const RunConfig& config, const TrainTestSplit& data, Transport& transport,
                        const std::string& address, const std::string& identity, int threads) {
    const ClusterSettings& k = config.cluster;
    // Declared first, destroyed last: the trainer and the rule hold buffers in its memory.
    std::unique_ptr<Backend> backend;
    const ModelIdentity model = model_identity(config, *data.train);
    WorkerOptions options = k.worker_options();
    options.epochs = std::size_t(config.training.epochs);
    WorkerNode node(k.connect(transport, address, "--connect", identity, model.servers), options, model.num_parameters);
    const Welcome welcome = node.join();
    // One GPU per worker: under a launcher the ranks of a host share its GPUs by local rank;
    // otherwise (local and embedded runs) by worker index.
    const int slot = launcher_local_rank().value_or(int(welcome.worker_id));
    BackendOptions device = choose_backend(config.training.device, threads, slot);
    device.flush_denormals = config.training.flush_denormals;
    device.tf32 = config.training.tf32;
    backend = make_backend(device);

    const std::size_t workers = std::size_t(k.workers);
    DatasetView shard = DatasetView::whole(data.train).shard(welcome.worker_id % workers, workers);
    LocalTrainer trainer(config, *backend, std::move(shard),
                         std::uint64_t(config.training.seed) * 1000003u + welcome.worker_id);
    const StrategyContext context{int(k.workers), model.num_parameters};
    return node.train(trainer, k.strategy->make_worker_rule(context), welcome);
}

namespace {
constexpr const char* kRankVariables[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
}

std::optional<int> launcher_rank() {
    for (const char* name : kRankVariables)
        if (const char* value = std::getenv(name)) return std::atoi(value);
    return std::nullopt;
}

bool is_launcher_rank_variable(const std::string& entry) {
    for (const char* name : kRankVariables)
        if (entry.rfind(std::string(name) + "=", 0) == 0) return true;
    return false;
}

}  // namespace tether
