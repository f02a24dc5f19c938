#include "run/worker_run.hpp"

#include <optional>

#include "backend/backend.hpp"
#include "backend/device_choice.hpp"
#include "cluster/launcher.hpp"
#include "run/model_identity.hpp"
#include "train/local_trainer.hpp"
#include "worker/worker_settings.hpp"

namespace tether {

WorkerResult run_worker(const RunConfig& config, const TrainTestSplit& data, Transport& transport,
                        const std::string& address, const std::string& identity, int threads, const Launcher* launcher) {
    const ClusterSettings& k = config.cluster;
    // Declared first, destroyed last: the trainer and the rule hold buffers in its memory.
    std::unique_ptr<Backend> backend;
    const ModelIdentity model = model_identity(config, *data.train);
    WorkerOptions options = worker_options(k);
    options.epochs = std::size_t(config.training.epochs);
    WorkerNode node(connect_servers(k, transport, address, "--connect", identity, model.servers), options, model.num_parameters);
    // Under a launcher the shard follows the rank: the rank asks for that place, so a restarted
    // rank takes its own place back, and the place's record is its shard's.
    const std::size_t workers = std::size_t(k.workers);
    if (launcher) node.ask_for_place(std::uint32_t(std::size_t(launcher->rank - (k.center_trains ? 0 : 1)) % workers));
    const Welcome welcome = node.join();
    // One GPU per worker: under a launcher the ranks of a host share its GPUs by local rank;
    // otherwise (local and embedded runs) by worker index.
    const int slot = launcher ? launcher->local_rank : int(welcome.worker_id);
    BackendOptions device = choose_backend(config.training.device, threads, slot);
    device.flush_denormals = config.training.flush_denormals;
    device.tf32 = config.training.tf32;
    backend = make_backend(device);

    // Under a launcher the shard (and the seed) follow the rank, whichever order the ranks joined in.
    const std::size_t index = launcher ? std::size_t(launcher->rank - (k.center_trains ? 0 : 1)) : welcome.worker_id;
    DatasetView shard = DatasetView::whole(data.train).shard(index % workers, workers);
    LocalTrainer trainer(config, *backend, std::move(shard), std::uint64_t(config.training.seed) * 1000003u + index);
    const StrategyContext context{int(k.workers), model.num_parameters};
    // Leases: every worker maps the center's positions to rows by the run's seed alike.
    std::optional<SampleStream> stream;
    if (k.leases) stream.emplace(data.train, std::uint64_t(config.training.seed));
    return node.train(trainer, k.strategy->make_worker_rule(context), welcome, stream ? &*stream : nullptr);
}

}  // namespace tether
