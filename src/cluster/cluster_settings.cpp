// A cluster's settings from a config file's blocks or from ServiceOptions, and the checks of
// the settings as a whole, which both take.
#include "cluster/cluster_settings.hpp"

#include <tether/tether.hpp>

#include "strategy/registry.hpp"
#include "transport/curve_keys.hpp"
#include "util/errors.hpp"
#include "util/option_visitors.hpp"

namespace tether {

namespace {

SecuritySettings read_security(JsonReader r) {
    SecuritySettings s;
    for_each_curve_key(s.keys, [&](const char* name, std::string& key) { key = r.string(name, key); });
    s.insecure = r.boolean("insecure", s.insecure);
    r.finish();
    return s;
}

// Which files each side needs is checked where the keys are loaded (center_transport,
// worker_transport): one config serves the center and the workers, each holding only its own
// secret.
void check_security(const ClusterSettings& c) {
    const SecuritySettings& s = c.security;
    const CurveKeys& k = s.keys;
    if (!s.enabled() && (!k.center_secret_key.empty() || !k.worker_public_key.empty() || !k.worker_secret_key.empty() ||
                         !k.authorized_workers.empty()))
        throw ConfigError(c.security_key("center_public_key") + ": empty while other security.* keys are set; CURVE is on "
                          "only when the center's public key is given (tether keygen writes one)");
    if (s.enabled() && s.insecure)
        throw ConfigError(c.security_key("insecure") + ": true while " + c.security_key("center_public_key") +
                          " is set; give keys or ask for none, not both");
}

// A lossy codec needs to know what the strategy's vectors are (codec/wire_vector.hpp).
void check_codecs(const ClusterSettings& k) {
    if (!k.strategy->uses_center()) return;
    const WireKinds kinds = k.strategy->wire_kinds();
    const auto check = [&](const std::string& key, CodecKind codec, WireVector kind, const char* vector) {
        if (lossy(codec) && kind == WireVector::unknown)
            throw ConfigError(k.key(key) + ": \"" + to_string(codec) + "\" compresses the " + vector + ", but strategy \"" +
                              k.strategy->name() + "\" does not say whether it is a state or an update "
                              "(Strategy::wire_kinds in <tether/strategy.hpp>), and a lossy codec must know; use "
                              "\"float32\", or declare wire_kinds() in the strategy");
    };
    check("codec", k.payload_codec().kind, kinds.payload, "workers' exchanges");
    check(k.reply_codec == "same" ? "codec" : "reply_codec", k.reply_codec_options().kind, kinds.reply, "center's replies");
}

// A policy's fragments are the servers' ranges: here, and nowhere else, the two must agree.
void check_fragments(const ClusterSettings& k, const JsonReader& strategy) {
    if (!k.strategy->uses_center()) return;
    const std::unique_ptr<ExchangePolicy> policy = k.strategy->make_exchange_policy({int(k.workers)});
    const std::int64_t fragments = std::int64_t(policy->fragments());
    if (fragments == 0) return;
    const std::string what = fragments > 1 ? std::to_string(fragments) + " fragments"
                                           : strategy.path_of("mixing") + " (merged fragment by fragment)";
    if (fragments != k.servers && fragments > 1)
        throw ConfigError(strategy.path_of("fragments") + ": " + std::to_string(fragments) + " fragments, but " +
                          k.key("servers") + " is " + std::to_string(k.servers) + "; each fragment is one server's range " +
                          "of x~: set " + k.key("servers") + " to " + std::to_string(fragments));
    if (fragments != k.servers)  // one fragment: a range of its own for its mixing
        throw ConfigError(strategy.path_of("mixing") + ": set with 1 fragment and " + k.key("servers") + " " +
                          std::to_string(k.servers) + "; mixing merges fragment by fragment, one server each: set " +
                          strategy.path_of("fragments") + " to " + std::to_string(k.servers) + " or " + k.key("servers") +
                          " to 1");
    // A joiner starts at step 0, out of phase with the others' fragments: each server's rounds
    // would wait on exchanges that come at other steps.
    if (k.elastic)
        throw ConfigError(k.key("elastic") + ": true with " + what + "; workers joining mid-run would exchange their "
                          "fragments out of phase with the others'");
}

// A server on every rank (cluster.server_placement "ranks"): each rank is a worker and hosts
// one server, so the servers, the workers and the ranks are one count.
void check_placement(const ClusterSettings& k) {
    const std::string ranks = k.key("server_placement") + " \"ranks\"";
    if (k.workers > 256)
        throw ConfigError(k.key("server_placement") + ": \"ranks\" with " + std::to_string(k.workers) + " workers (" +
                          k.key("workers") + "); at most 256 ranks can each host one of x~'s servers");
    if (k.servers != k.workers)
        throw ConfigError(k.key("servers") + ": " + std::to_string(k.servers) + " with " + ranks + " and " +
                          k.key("workers") + " " + std::to_string(k.workers) + "; every rank hosts one server and " +
                          "trains as one worker, so the servers are the workers: set " + k.key("servers") + " to " +
                          std::to_string(k.workers) + " (a config file may leave it unset)");
    if (!k.center_trains)
        throw ConfigError(k.key("center_trains") + ": false with " + ranks + "; every rank, rank 0 too, trains as one "
                          "worker beside its server");
    if (k.elastic)
        throw ConfigError(k.key("elastic") + ": true with " + ranks + "; the servers are the ranks, so the workers "
                          "are fixed too");
}

// The rules between the settings, whichever way they came in; `strategy` reads the strategy
// block (left finished).
void settle(ClusterSettings& k, JsonReader& strategy, StrategyContext context) {
    if (k.step_delay_ms.size() > std::size_t(k.workers))
        throw ConfigError(k.key("step_delay_ms") + ": " + std::to_string(k.step_delay_ms.size()) + " delays for " +
                          std::to_string(k.workers) + " workers (" + k.key("workers") + "); give at most one per worker");
    if (k.max_peers < k.workers)
        throw ConfigError(k.key("max_peers") + ": " + std::to_string(k.max_peers) + " is less than " + k.key("workers") +
                          " (" + std::to_string(k.workers) + "); the center must be able to hold every worker");
    if (k.heartbeat_ms * 2 > k.worker_timeout_ms)
        throw ConfigError(k.key("heartbeat_ms") + ": " + std::to_string(k.heartbeat_ms) + " must be at most half of " +
                          k.key("worker_timeout_ms") + " (" + std::to_string(k.worker_timeout_ms) +
                          "), or live workers would be counted lost");
    if (k.servers_on_ranks()) check_placement(k);
    check_security(k);
    // Strategy defaults such as alpha = 0.9 / N depend on the workers.
    context.workers = int(k.workers);
    k.strategy = make_strategy(strategy, context);
    strategy.finish();
    if (!k.strategy->uses_center() && k.workers != 1)
        throw ConfigError(k.key("workers") + ": " + std::to_string(k.workers) + " workers with " + strategy.path_of("name") +
                          " \"" + k.strategy->name() + "\"; sequential training uses exactly 1 worker (pick a distributed "
                          "strategy such as \"adag\" or \"aeasgd\" for more)");
    check_codecs(k);
    check_fragments(k, strategy);
    k.check_warmstart();
}

// What the embedding API names otherwise: ServiceOptions' field for each key of the "cluster" block.
std::string field_of(const std::string& key) {
    std::string field = key;
    ClusterOptions options;
    for_each_cluster_option(options, [&](const OptionName& name, const auto&, const OptionLimits&) {
        if (key == name.key) field = name.field_name();
    });
    return field;
}

}  // namespace

std::string ClusterSettings::security_key(const std::string& name) const {
    return (origin == "ServiceOptions" ? origin : "security") + "." + name;
}

std::string ClusterSettings::key(const std::string& name) const {
    return origin + "." + (origin == "ServiceOptions" ? field_of(name) : name);
}

ClusterSettings read_cluster_settings(JsonReader r, JsonReader security, JsonReader strategy, StrategyContext context,
                                      const Launcher* launcher) {
    ClusterSettings k;
    k.origin = r.path();
    k.mode = r.choice("mode", k.mode, {"embedded", "local"});
    k.center_trains = r.boolean("center_trains", k.center_trains);
    // A launcher knows the world size: it is the default, and a config that says otherwise is wrong now, not after a timeout.
    if (launcher) k.workers = launcher->check_workers(0, k.center_trains, r.path_of("workers"));
    for_each_cluster_option(k, OptionReader{r});
    if (launcher) launcher->check_workers(int(k.workers), k.center_trains, r.path_of("workers"));
    // One server per rank: as many servers as workers, unless told otherwise (refused in settle).
    if (k.servers_on_ranks() && !r.has("servers")) r.settle_default("servers", k.servers = k.workers);
    k.step_delay_ms = r.integer_list("step_delay_ms", k.step_delay_ms, 0, 0);
    k.min_trained_share = r.number("min_trained_share", k.min_trained_share, 0.0, 1.0);
    r.finish();
    k.security = read_security(security);
    settle(k, strategy, context);
    return k;
}

void ClusterSettings::check_warmstart(std::uint64_t samples_per_worker) const {
    if (warmstart_samples > 0 && servers > 1)
        throw ConfigError(key("warmstart_samples") + ": " + std::to_string(warmstart_samples) + " with " + key("servers") + " " +
                          std::to_string(servers) + "; the warmstart is built for one server (give 1 server, or 0)");
    if (samples_per_worker > 0 && std::uint64_t(warmstart_samples) > samples_per_worker)
        throw ConfigError(key("warmstart_samples") + ": " + std::to_string(warmstart_samples) + " is more than worker 0 trains in "
                          "all (training.epochs x its shard = " + std::to_string(samples_per_worker) +
                          "), so the other workers would never start; give at most that");
}

ClusterSettings cluster_settings(const ServiceOptions& o, std::size_t num_parameters, nlohmann::json* resolved_blocks) {
    if (o.strategy.empty())
        throw ConfigError("ServiceOptions.strategy: empty; a center needs a strategy block such as {\"name\": \"adag\"} "
                          "(only a worker may leave it empty, to take the center's)");
    nlohmann::json strategy;
    try {
        strategy = nlohmann::json::parse(o.strategy);
    } catch (const nlohmann::json::parse_error& e) {
        throw ConfigError("ServiceOptions.strategy: not valid JSON: " + std::string(e.what()));
    }
    if (!strategy.is_object() || !strategy.contains("name"))
        throw ConfigError("ServiceOptions.strategy: expected a JSON object naming a strategy, such as {\"name\": \"aeasgd\"}, "
                          "got " + strategy.dump());
    ClusterSettings k;
    k.origin = "ServiceOptions";
    for_each_service_option(o, OptionChecker{k.origin});
    static_cast<ClusterOptions&>(k) = o;
    k.security = {o.curve_keys(), o.insecure};
    // Rules that tie a strategy to a training section (eamsgd wants Nesterov) are the embedding
    // user's own: their optimizer is theirs (no local_optimizer).
    nlohmann::json resolved;
    JsonReader strategy_reader(&strategy, "ServiceOptions.strategy", resolved["strategy"]);
    settle(k, strategy_reader, StrategyContext{1, num_parameters});
    if (!k.strategy->uses_center()) {
        std::string names;
        for (const auto& name : strategy_names())
            if (name != "sequential") names += (names.empty() ? "" : ", ") + name;
        throw ConfigError("ServiceOptions.strategy.name: \"" + k.strategy->name() +
                          "\" has no center; name a distributed strategy (one of " + names + ")");
    }
    if (resolved_blocks) {
        // As a config file's config.json holds them: every key of the three blocks. A secret
        // key given inline (the Z85 key itself, not a file) stays out of it.
        nlohmann::json& cluster = resolved["cluster"];
        for_each_cluster_option(k, OptionWriter{cluster});
        cluster.update({{"mode", k.mode}, {"center_trains", k.center_trains}, {"step_delay_ms", k.step_delay_ms},
                        {"min_trained_share", k.min_trained_share}});
        nlohmann::json& security = resolved["security"] = security_block(o.curve_keys());
        security["insecure"] = o.insecure;
        for (const char* name : {"center_secret_key", "worker_secret_key"})
            if (is_z85_key(security[name].get<std::string>())) security[name] = "(a Z85 key given inline: not recorded)";
        *resolved_blocks = std::move(resolved);
    }
    return k;
}

nlohmann::json security_block(const CurveKeys& keys) {
    nlohmann::json block = nlohmann::json::object();
    for_each_curve_key(keys, [&](const char* name, const std::string& key) { block[name] = key; });
    return block;
}

std::vector<std::string> split_addresses(const std::string& list, const std::string& what) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = list.find(',', start);
        out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (out.back().empty())
            throw ConfigError(what + " \"" + list + "\": an empty address; give ZeroMQ endpoints separated by ','");
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

}  // namespace tether
