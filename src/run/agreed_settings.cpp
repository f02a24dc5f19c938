#include "run/agreed_settings.hpp"

#include <filesystem>
#include <fstream>

#include "strategy/configured_strategy.hpp"

namespace tether {

namespace {

std::uint64_t fnv1a(const char* bytes, std::size_t size, std::uint64_t hash = 1469598103934665603ull) {
    for (std::size_t i = 0; i < size; ++i) {
        hash ^= std::uint8_t(bytes[i]);
        hash *= 1099511628211ull;
    }
    return hash;
}

nlohmann::json file_identity(const DataConfig& data, const std::string& file) {
    const std::filesystem::path p(file);
    const std::string path = p.is_absolute() ? file : (std::filesystem::path(data.dir) / p).string();
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error) return {{"file", p.filename().string()}, {"bytes", nullptr}};
    std::ifstream in(path, std::ios::binary);
    std::vector<char> head(64 * 1024);
    in.read(head.data(), std::streamsize(head.size()));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(head.data(), std::size_t(in.gcount()))));
    // The file name is left out: two hosts may name the same data differently.
    return {{"bytes", size}, {"head_hash", hex}};
}

void differences(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, std::string& out) {
    if (!out.empty()) return;
    if (a.is_object() && b.is_object()) {
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

nlohmann::json data_identity(const DataConfig& data, std::int64_t seed) {
    if (data.source == "synthetic")
        return {{"source", "synthetic"}, {"train_samples", data.train_samples}, {"test_samples", data.test_samples},
                {"features", data.features}, {"classes", data.classes}, {"noise", data.noise}, {"seed", seed},
                {"validation_samples", data.validation_samples}};
    // validation_samples decides which samples the workers' shards hold: all must agree on it.
    return {{"source", "idx"},
            {"train_images", file_identity(data, data.train_images)},
            {"train_labels", file_identity(data, data.train_labels)},
            {"validation_samples", data.validation_samples}};
}

nlohmann::json agreed_settings(const RunConfig& config, const std::vector<std::size_t>& layer_sizes,
                               std::size_t num_parameters) {
    nlohmann::json strategy = config.strategy.rule->describe();
    strategy["name"] = config.strategy.name;
    strategy["communication_window"] = config.strategy.rule->communication_window();
    const ClusterConfig& k = config.cluster;
    nlohmann::json cluster = {{"workers", k.workers},
                              {"servers", k.servers},
                              {"chunk_elements", k.chunk_elements},
                              {"codec", to_string(k.payload_codec().kind)},
                              {"reply_codec", to_string(k.reply_codec_options().kind)}};
    if (k.payload_codec().kind == CodecKind::topk || k.reply_codec_options().kind == CodecKind::topk)
        cluster["topk_ratio"] = k.topk_ratio;
    return {{"strategy", strategy},
            {"cluster", cluster},
            {"model", {{"layer_sizes", layer_sizes}, {"parameters", num_parameters}}},
            {"data", data_identity(config.data, config.training.seed)}};
}

nlohmann::json server_settings(nlohmann::json agreed, std::size_t server) {
    agreed["cluster"]["server"] = server;
    return agreed;
}

std::uint64_t settings_fingerprint(const nlohmann::json& settings) {
    const std::string text = settings.dump();
    return fnv1a(text.data(), text.size());
}

std::string first_difference(const nlohmann::json& center, const nlohmann::json& worker) {
    std::string out;
    differences(center, worker, "", out);
    return out;
}

std::function<std::string(const std::string&)> mismatch_explainer(nlohmann::json agreed) {
    return [agreed = std::move(agreed)](const std::string& worker_settings) {
        const auto theirs = nlohmann::json::parse(worker_settings, nullptr, /*allow_exceptions=*/false);
        return theirs.is_discarded() ? std::string() : first_difference(agreed, theirs);
    };
}

}  // namespace tether
