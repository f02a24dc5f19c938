#include "cluster/agreed_settings.hpp"

#include "cluster/cluster_settings.hpp"
#include "util/errors.hpp"
#include "util/fnv1a.hpp"

namespace tether {

namespace {

// Keys compared before the others: a different strategy explains everything else that differs
// ("strategy.name: center adag, worker aeasgd", not its window).
constexpr const char* kFirstKeys[] = {"strategy", "name"};

void differences(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, std::string& out) {
    if (!out.empty()) return;
    if (a.is_object() && b.is_object()) {
        for (const char* key : kFirstKeys)
            if (a.contains(key) && b.contains(key)) differences(a.at(key), b.at(key), path.empty() ? key : path + "." + key, out);
        if (!out.empty()) return;
        for (const auto& [key, value] : a.items()) {
            const std::string sub = path.empty() ? key : path + "." + key;
            if (!b.contains(key)) {
                out = sub + ": center " + value.dump() + ", worker has no such setting";
                return;
            }
            differences(value, b.at(key), sub, out);
            if (!out.empty()) return;
        }
        for (const auto& [key, value] : b.items())
            if (!a.contains(key)) {
                out = (path.empty() ? key : path + "." + key) + ": center has no such setting, worker " + value.dump();
                return;
            }
        return;
    }
    if (a != b) out = (path.empty() ? "settings" : path) + ": center " + a.dump() + ", worker " + b.dump();
}

}  // namespace

std::vector<ServerIdentity> ClusterSettings::server_identities(std::size_t num_parameters, nlohmann::json model,
                                                               const nlohmann::json& data,
                                                               const nlohmann::json& training) const {
    if (std::size_t(servers) > num_parameters)
        throw ConfigError(key("servers") + ": " + std::to_string(servers) + " servers for a model of " +
                          std::to_string(num_parameters) + " parameters; each server needs at least one");
    nlohmann::json strategy_settings = strategy->describe();
    strategy_settings["communication_window"] = strategy->communication_window();
    nlohmann::json cluster = {{"workers", workers},
                              {"servers", servers},
                              {"chunk_elements", chunk_elements},
                              {"codec", to_string(payload_codec().kind)},
                              {"reply_codec", to_string(reply_codec_options().kind)}};
    if (payload_codec().kind == CodecKind::topk || reply_codec_options().kind == CodecKind::topk)
        cluster["topk_ratio"] = topk_ratio;
    // How the run ends and where its data come from: a worker that trains a fixed shard beside
    // leasing ones, or stops on its own epochs in a run with a budget, is refused naming the key.
    // Only when set, so that a run without them keeps its fingerprint.
    if (budget_samples > 0) cluster["budget_samples"] = budget_samples;
    if (leases) cluster["leases"] = true;
    model["parameters"] = num_parameters;
    nlohmann::json agreed = {{"strategy", strategy_settings}, {"cluster", cluster}, {"model", model}};
    if (!data.is_null()) agreed["data"] = data;
    if (!training.is_null()) agreed["training"] = training;
    std::vector<ServerIdentity> out;
    for (std::size_t k = 0; k < std::size_t(servers); ++k) {
        // The server's index too, so that a worker that mixes up the servers' addresses is
        // refused ("cluster.server: center 1, worker 0").
        agreed["cluster"]["server"] = k;
        out.push_back({k, server_range(num_parameters, std::size_t(servers), k), agreed, settings_fingerprint(agreed)});
    }
    return out;
}

std::uint64_t settings_fingerprint(const nlohmann::json& settings) {
    const std::string text = settings.dump();
    return fnv1a(text.data(), text.size());
}

std::function<std::string(const std::string&)> mismatch_explainer(nlohmann::json agreed) {
    return [agreed = std::move(agreed)](const std::string& worker_settings) {
        const auto theirs = nlohmann::json::parse(worker_settings, nullptr, /*allow_exceptions=*/false);
        std::string out;
        if (!theirs.is_discarded()) differences(agreed, theirs, "", out);
        return out;
    };
}

}  // namespace tether
