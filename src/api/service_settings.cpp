#include "api/service_settings.hpp"

#include "run/agreed_settings.hpp"
#include "strategy/registry.hpp"
#include "util/errors.hpp"
#include "util/json_reader.hpp"

namespace tether {
namespace {

std::string distributed_names() {
    std::string names;
    for (const auto& name : strategy_names())
        if (name != "sequential") names += (names.empty() ? "" : ", ") + name;
    return names;
}

// The strategy of ServiceOptions.strategy, built by the registry the config parser uses: the
// same names (a registered strategy too), keys, defaults and errors, named
// "ServiceOptions.strategy.KEY". Rules that tie a strategy to a training section (eamsgd wants
// Nesterov) are the embedding user's own: their optimizer is theirs.
std::shared_ptr<const ConfiguredStrategy> build_strategy(const ServiceOptions& o, std::size_t count) {
    const std::string where = "ServiceOptions.strategy";
    nlohmann::json block;
    try {
        block = nlohmann::json::parse(o.strategy);
    } catch (const nlohmann::json::parse_error& e) {
        throw ConfigError(where + ": not valid JSON: " + std::string(e.what()));
    }
    if (!block.is_object())
        throw ConfigError(where + ": expected a JSON object such as {\"name\": \"aeasgd\"}, got " + block.dump());
    if (!block.contains("name"))
        throw ConfigError(where + ": no \"name\"; name a strategy, e.g. {\"name\": \"aeasgd\"}");
    if (o.workers < 1)
        throw ConfigError("ServiceOptions.workers: " + std::to_string(o.workers) + "; at least 1 worker is needed");
    if (o.worker_timeout_ms < 200)
        throw ConfigError("ServiceOptions.worker_timeout_ms: " + std::to_string(o.worker_timeout_ms) +
                          " ms is too short for the workers' heartbeats; use at least 200");
    nlohmann::json resolved;
    JsonReader reader(&block, where, resolved);
    auto strategy = make_strategy(reader, StrategyContext{o.workers, count});
    reader.finish();
    if (!strategy->uses_center())
        throw ConfigError(where + ".name: \"" + strategy->name() +
                          "\" has no center; name a distributed strategy (one of " + distributed_names() + ")");
    return strategy;
}

CodecOptions codec_option(const std::string& key, const std::string& name, double topk_ratio) {
    try {
        return {codec_kind(name), topk_ratio};
    } catch (const std::invalid_argument& e) {
        throw ConfigError("ServiceOptions." + key + ": " + e.what());
    }
}

// A lossy codec needs to know what the strategy's vectors are (codec/wire_vector.hpp).
void check_codec(const std::string& key, const CodecOptions& codec, WireVector kind, const std::string& strategy) {
    if (lossy(codec.kind) && kind == WireVector::unknown)
        throw ConfigError("ServiceOptions." + key + ": \"" + to_string(codec.kind) + "\" needs to know whether strategy \"" +
                          strategy + "\" sends states or updates (Strategy::wire_kinds), and it does not say; use \"float32\"");
}

}  // namespace

ServiceSettings service_settings(const ServiceOptions& o, std::size_t count, std::size_t buffer_count) {
    ServiceSettings s;
    s.strategy = build_strategy(o, count);
    if (!(o.topk_ratio > 0 && o.topk_ratio <= 1))
        throw ConfigError("ServiceOptions.topk_ratio: " + std::to_string(o.topk_ratio) + "; expected > 0 and <= 1");
    s.payload_codec = codec_option("codec", o.codec, o.topk_ratio);
    s.reply_codec = codec_option("reply_codec", o.reply_codec == "same" ? o.codec : o.reply_codec, o.topk_ratio);
    const WireKinds kinds = s.strategy->wire_kinds();
    check_codec("codec", s.payload_codec, kinds.payload, s.strategy->name());
    check_codec(o.reply_codec == "same" ? "codec" : "reply_codec", s.reply_codec, kinds.reply, s.strategy->name());
    if (o.servers < 1 || std::size_t(o.servers) > count)
        throw ConfigError("ServiceOptions.servers: " + std::to_string(o.servers) + " for " + std::to_string(count) +
                          " parameters; from 1 to the parameter count (each server needs at least one)");
    // What a center and its workers must agree on: the strategy with its resolved options, the
    // worker, parameter and buffer counts, the codecs and the servers. Both sides hash it into the
    // fingerprint; the hello carries it, so a worker that differs is refused naming the
    // setting and both values.
    nlohmann::json agreed = {{"strategy", s.strategy->describe()}, {"workers", o.workers}, {"parameters", count},
                             {"buffers", buffer_count},
                             {"cluster", {{"servers", o.servers}, {"codec", to_string(s.payload_codec.kind)},
                                          {"reply_codec", to_string(s.reply_codec.kind)}}}};
    if (s.payload_codec.kind == CodecKind::topk || s.reply_codec.kind == CodecKind::topk)
        agreed["cluster"]["topk_ratio"] = o.topk_ratio;
    for (std::size_t k = 0; k < std::size_t(o.servers); ++k) {
        ServerIdentity server;
        server.range = server_range(count, std::size_t(o.servers), k);
        server.agreed = server_settings(agreed, k);
        server.fingerprint = settings_fingerprint(server.agreed);
        s.servers.push_back(std::move(server));
    }
    return s;
}


}  // namespace tether
