#include "run/worker_run.hpp"

#include <cstdlib>

#include "strategy/configured_strategy.hpp"
#include "backend/backend.hpp"
#include "backend/device_choice.hpp"
#include "run/center_run.hpp"
#include "train/local_trainer.hpp"
#include "run/center_security.hpp"
#include "util/errors.hpp"

namespace tether {

WorkerResult run_worker(const RunConfig& config, const TrainTestSplit& data, Transport& transport,
                        const std::string& address, const std::string& identity, int threads) {
    const ClusterConfig& k = config.cluster;
    // Declared first, destroyed last: the trainer and the rule hold buffers in its memory.
    std::unique_ptr<Backend> backend;
    const ModelIdentity model = model_identity(config, *data.train);
    WorkerOptions options;
    options.chunk_elements = std::size_t(k.chunk_elements);
    options.payload_codec = k.payload_codec();
    options.reply_codec = k.reply_codec_options();
    options.wire_kinds = config.strategy.rule->wire_kinds();
    options.join_timeout_ms = int(k.join_timeout_ms);
    options.reply_timeout_ms = int(k.reply_timeout_ms);
    options.heartbeat_ms = int(k.heartbeat_ms);
    options.center_timeout_ms = int(k.worker_timeout_ms);
    options.epochs = std::size_t(config.training.epochs);
    options.step_delay_ms = k.step_delay_ms;
    options.communication_window = config.strategy.rule->communication_window();
    options.overlap = k.overlap;
    TransportOptions transport_options;
    transport_options.heartbeat_timeout_ms = int(k.worker_timeout_ms);
    transport_options.send_timeout_ms = int(k.worker_timeout_ms);  // a send, too, waits no longer than the liveness bound
    std::vector<ServerLink> links;
    const std::vector<std::string> addresses = split_addresses(address, "--connect");
    if (addresses.size() != model.servers.size())
        throw ConfigError("--connect " + address + ": " + std::to_string(addresses.size()) + " address(es), but cluster.servers is " +
                          std::to_string(model.servers.size()) + "; give every server's address, server 0 first, separated by ','");
    for (std::size_t k = 0; k < addresses.size(); ++k) {
        TransportOptions server_options = transport_options;
        secure_client(config, addresses[k], server_options);
        links.push_back({transport.connect(addresses[k], identity, server_options), model.servers[k].fingerprint,
                         model.servers[k].agreed.dump(), addresses[k]});
    }
    WorkerNode node(std::move(links), options, model.num_parameters);
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
    return node.train(trainer, config.strategy.rule->make_worker_rule(context), welcome);
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
