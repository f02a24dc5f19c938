// Reading a cluster's settings: the config file's blocks, and ServiceOptions turned into them.
#include "cluster/cluster_settings.hpp"

#include <tether/tether.hpp>

#include "strategy/registry.hpp"
#include "transport/curve_keys.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

// The ServiceOptions fields whose names differ from their key in the "cluster" block.
constexpr const char* kServiceNames[][2] = {{"endpoint", "address"}};

SecuritySettings read_security(JsonReader r) {
    SecuritySettings s;
    for_each_curve_key(s.keys, [&](const char* name, std::string& key) { key = r.string(name, key); });
    s.insecure = r.boolean("insecure", s.insecure);
    r.finish();
    const CurveKeys& k = s.keys;
    // Which files each side needs is checked where the keys are loaded (center_transport,
    // worker_transport): one config serves the center and the workers, each holding only its
    // own secret.
    if (!s.enabled() && (!k.center_secret_key.empty() || !k.worker_public_key.empty() || !k.worker_secret_key.empty() ||
                         !k.authorized_workers.empty()))
        throw ConfigError(r.path_of("center_public_key") + ": empty while other security.* keys are set; CURVE is on only "
                          "when the center's public key is given (tether keygen writes one)");
    if (s.enabled() && s.insecure)
        throw ConfigError(r.path_of("insecure") + ": true while " + r.path_of("center_public_key") +
                          " is set; give keys or ask for none, not both");
    return s;
}

// A lossy codec needs to know what the strategy's vectors are (codec/wire_vector.hpp).
void check_codecs(const ClusterSettings& k, const JsonReader& r) {
    if (!k.strategy->uses_center()) return;
    const WireKinds kinds = k.strategy->wire_kinds();
    const auto check = [&](const std::string& key, CodecKind codec, WireVector kind, const char* vector) {
        if (lossy(codec) && kind == WireVector::unknown)
            throw ConfigError(r.path_of(key) + ": \"" + to_string(codec) + "\" compresses the " + vector + ", but strategy \"" +
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
void check_placement(const ClusterSettings& k, const JsonReader& r) {
    const std::string ranks = r.path_of("server_placement") + " \"ranks\"";
    if (k.servers != k.workers)
        throw ConfigError(r.path_of("servers") + ": " + std::to_string(k.servers) + " with " + ranks + " and " +
                          r.path_of("workers") + " " + std::to_string(k.workers) + "; every rank hosts one server and " +
                          "trains as one worker, so the servers are the workers: set " + r.path_of("servers") + " to " +
                          std::to_string(k.workers) + " (a config file may leave it unset)");
    if (!k.center_trains)
        throw ConfigError(r.path_of("center_trains") + ": false with " + ranks + "; every rank, rank 0 too, trains as one "
                          "worker beside its server");
    if (k.elastic)
        throw ConfigError(r.path_of("elastic") + ": true with " + ranks + "; the servers are the ranks, so the workers "
                          "are fixed too");
}

}  // namespace

std::string ClusterSettings::security_key(const std::string& name) const {
    return (origin == "ServiceOptions" ? origin : "security") + "." + name;
}

std::string ClusterSettings::key(const std::string& name) const {
    if (origin == "ServiceOptions")
        for (const auto& [block_key, field] : kServiceNames)
            if (name == block_key) return origin + "." + field;
    return origin + "." + name;
}

ClusterSettings read_cluster_settings(JsonReader r, JsonReader security, JsonReader strategy, StrategyContext context,
                                      const Launcher* launcher) {
    ClusterSettings k;
    k.mode = r.choice("mode", k.mode, {"embedded", "local"});
    k.center_trains = r.boolean("center_trains", k.center_trains);
    // A launcher knows the world size: it is the default, and a config that says otherwise is wrong now, not after a timeout.
    const std::int64_t workers = launcher ? launcher->check_workers(0, k.center_trains, r.path_of("workers")) : k.workers;
    k.workers = r.integer("workers", workers, 1, 1024);
    if (launcher) launcher->check_workers(int(k.workers), k.center_trains, r.path_of("workers"));
    k.endpoint = r.string("endpoint", k.endpoint);
    k.quorum = r.number("quorum", k.quorum, 0.0, 1.0, true);
    k.round_timeout_ms = r.integer("round_timeout_ms", k.round_timeout_ms, 1, 86'400'000);
    k.worker_timeout_ms = r.integer("worker_timeout_ms", k.worker_timeout_ms, 100, 86'400'000);
    k.center_restart_ms = r.integer("center_restart_ms", k.center_restart_ms, 0, 86'400'000);
    k.heartbeat_ms = r.integer("heartbeat_ms", k.heartbeat_ms, 10, 3'600'000);
    k.join_timeout_ms = r.integer("join_timeout_ms", k.join_timeout_ms, 100, 86'400'000);
    k.reply_timeout_ms = r.integer("reply_timeout_ms", k.reply_timeout_ms, 100, 86'400'000);
    k.chunk_elements = r.integer("chunk_elements", k.chunk_elements, 1, 1 << 24);
    k.step_delay_ms = r.integer_list("step_delay_ms", k.step_delay_ms, 0, 0);
    k.max_failed_share = r.number("max_failed_share", k.max_failed_share, 0.0, 1.0);
    k.min_trained_share = r.number("min_trained_share", k.min_trained_share, 0.0, 1.0);
    k.checkpoint_seconds = r.integer("checkpoint_seconds", k.checkpoint_seconds, 0, 86'400 * 365);
    k.elastic = r.boolean("elastic", k.elastic);
    k.warmstart_samples = r.integer("warmstart_samples", k.warmstart_samples, 0, std::int64_t(1) << 50);
    k.max_peers = r.integer("max_peers", k.max_peers, 1, 1'000'000);
    k.server_placement = r.choice("server_placement", k.server_placement, {"center", "ranks"});
    if (k.servers_on_ranks() && k.workers > 256)
        throw ConfigError(r.path_of("server_placement") + ": \"ranks\" with " + std::to_string(k.workers) + " workers (" +
                          r.path_of("workers") + "); at most 256 ranks can each host one of x~'s servers");
    // One server per rank: as many servers as workers, unless told otherwise (refused below).
    k.servers = r.integer("servers", k.servers_on_ranks() ? k.workers : k.servers, 1, 256);
    k.codec = r.choice("codec", k.codec, {"float32", "fp16", "bf16", "int8", "int4", "topk"});
    k.reply_codec = r.choice("reply_codec", k.reply_codec, {"same", "float32", "fp16", "bf16", "int8", "int4", "topk"});
    k.topk_ratio = r.number("topk_ratio", k.topk_ratio, 0.0, 1.0, true);
    r.finish();
    k.origin = r.path();
    if (k.step_delay_ms.size() > std::size_t(k.workers))
        throw ConfigError(r.path_of("step_delay_ms") + ": " + std::to_string(k.step_delay_ms.size()) + " delays for " +
                          std::to_string(k.workers) + " workers (" + r.path_of("workers") + "); give at most one per worker");
    if (k.max_peers < k.workers)
        throw ConfigError(r.path_of("max_peers") + ": " + std::to_string(k.max_peers) + " is less than " + r.path_of("workers") +
                          " (" + std::to_string(k.workers) + "); the center must be able to hold every worker");
    if (k.heartbeat_ms * 2 > k.worker_timeout_ms)
        throw ConfigError(r.path_of("heartbeat_ms") + ": " + std::to_string(k.heartbeat_ms) + " must be at most half of " +
                          r.path_of("worker_timeout_ms") + " (" + std::to_string(k.worker_timeout_ms) +
                          "), or live workers would be counted lost");
    if (k.servers_on_ranks()) check_placement(k, r);
    k.security = read_security(security);
    // Strategy defaults such as alpha = 0.9 / N depend on the workers.
    context.workers = int(k.workers);
    k.strategy = make_strategy(strategy, context);
    strategy.finish();
    if (!k.strategy->uses_center() && k.workers != 1)
        throw ConfigError(r.path_of("workers") + ": " + std::to_string(k.workers) + " workers with " + strategy.path_of("name") +
                          " \"" + k.strategy->name() + "\"; sequential training uses exactly 1 worker (pick a distributed "
                          "strategy such as \"adag\" or \"aeasgd\" for more)");
    check_codecs(k, r);
    check_fragments(k, strategy);
    k.check_warmstart();
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
    // The fields under their keys of the "cluster" block (kServiceNames); the rest take its
    // defaults. Rules that tie a strategy to a training section (eamsgd wants Nesterov) are the
    // embedding user's own: their optimizer is theirs (no local_optimizer).
    const nlohmann::json cluster = {
        {"workers", o.workers},         {"endpoint", o.address},
        {"quorum", o.quorum},           {"round_timeout_ms", o.round_timeout_ms},
        {"worker_timeout_ms", o.worker_timeout_ms}, {"heartbeat_ms", o.heartbeat_ms},
        {"center_restart_ms", o.center_restart_ms},
        {"join_timeout_ms", o.join_timeout_ms},     {"reply_timeout_ms", o.reply_timeout_ms},
        {"servers", o.servers},         {"server_placement", o.server_placement},
        {"codec", o.codec},             {"reply_codec", o.reply_codec},
        {"topk_ratio", o.topk_ratio},   {"checkpoint_seconds", o.checkpoint_seconds},
        {"max_failed_share", o.max_failed_share}, {"warmstart_samples", o.warmstart_samples}};
    // The security fields, under their own names (ServiceOptions.insecure, not .security.insecure).
    nlohmann::json security = security_block(o.curve_keys());
    security["insecure"] = o.insecure;
    nlohmann::json resolved;
    ClusterSettings k = read_cluster_settings(JsonReader(&cluster, "ServiceOptions", resolved["cluster"]),
                                              JsonReader(&security, "ServiceOptions", resolved["security"]),
                                              JsonReader(&strategy, "ServiceOptions.strategy", resolved["strategy"]),
                                              StrategyContext{1, num_parameters});
    if (!k.strategy->uses_center()) {
        std::string names;
        for (const auto& name : strategy_names())
            if (name != "sequential") names += (names.empty() ? "" : ", ") + name;
        throw ConfigError("ServiceOptions.strategy.name: \"" + k.strategy->name() +
                          "\" has no center; name a distributed strategy (one of " + names + ")");
    }
    // The resolved blocks go into a run directory's config.json: a secret key given inline
    // (the Z85 key itself, not a file) stays out of it.
    for (const char* name : {"center_secret_key", "worker_secret_key"}) {
        const auto value = resolved["security"].find(name);
        if (value != resolved["security"].end() && value->is_string() && is_z85_key(value->get<std::string>()))
            *value = "(a Z85 key given inline: not recorded)";
    }
    if (resolved_blocks) *resolved_blocks = std::move(resolved);
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
