#include "config/config.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "backend/device_choice.hpp"
#include "model/layer_spec.hpp"
#include "strategy/registry.hpp"
#include "util/errors.hpp"

namespace tether {

using nlohmann::json;

namespace {

// Keys renamed since they were documented: the old name still works, with a warning on stderr
// naming the new one; the resolved config (config.json) has the new name.
struct RenamedKey {
    const char *section, *old_name, *new_name;
};
constexpr RenamedKey kRenamedKeys[] = {{"cluster", "shard_elements", "chunk_elements"}};

// `document`, or a copy of it in `renamed` with the old names replaced by the new ones.
const json& with_current_names(const json& document, json& renamed) {
    const json* current = &document;
    for (const RenamedKey& k : kRenamedKeys) {
        if (!current->is_object() || !current->contains(k.section)) continue;
        const json& section = current->at(k.section);
        if (!section.is_object() || !section.contains(k.old_name)) continue;
        const std::string old_path = std::string(k.section) + "." + k.old_name, new_path = std::string(k.section) + "." + k.new_name;
        if (section.contains(k.new_name))
            throw ConfigError(old_path + " is the old name of " + new_path + "; give only " + new_path);
        if (current == &document) {
            renamed = document;
            current = &renamed;
        }
        json& moved = renamed[k.section];
        moved[k.new_name] = moved[k.old_name];
        moved.erase(k.old_name);
        std::fprintf(stderr, "tether: config key %s is deprecated; it is now %s\n", old_path.c_str(), new_path.c_str());
    }
    return *current;
}

DataConfig parse_data(JsonReader r) {
    DataConfig d;
    d.source = r.choice("source", d.source, {"idx", "synthetic", "cifar10", "cifar100"});
    d.dir = r.string("dir", d.dir);
    d.train_images = r.string("train_images", d.train_images);
    d.train_labels = r.string("train_labels", d.train_labels);
    d.test_images = r.string("test_images", d.test_images);
    d.test_labels = r.string("test_labels", d.test_labels);
    d.train_samples = r.integer("train_samples", d.train_samples, 1, 10'000'000);
    d.test_samples = r.integer("test_samples", d.test_samples, 1, 10'000'000);
    d.features = r.integer("features", d.features, 1, 1'000'000);
    d.classes = r.integer("classes", d.classes, 2, 100'000);
    d.noise = r.number("noise", d.noise, 0.0, 1e6);
    d.validation_samples = r.integer("validation_samples", d.validation_samples, 0, 10'000'000);
    r.finish();
    return d;
}

ModelConfig parse_model(JsonReader r) {
    ModelConfig m;
    const bool mlp_given = r.has("hidden_layers");
    m.hidden_layers = r.integer_list("hidden_layers", m.hidden_layers, 1, 0);
    m.layers = r.string_list("layers", m.layers,
                             "a list of layers: \"dense N\", \"conv F KxK [stride S] [pad P]\", \"maxpool S\", "
                             "\"relu\", \"dropout R\", \"layernorm\" (docs/models.md); empty = the MLP of hidden_layers");
    if (mlp_given && !m.layers.empty())
        throw ConfigError("model: give either hidden_layers (an MLP) or layers (a layer list), not both");
    parse_layers(m.layers);  // syntax now; shapes when the model meets the data
    r.finish();
    return m;
}

}  // namespace

// Each schedule reads only its own keys, so a key of another (final_scale with "step") is
// refused by name, as a strategy's are.
ScheduleOptions parse_schedule(JsonReader r) {
    ScheduleOptions s;
    s.name = r.choice("name", s.name, {"constant", "cosine", "step"});
    if (s.name == "cosine") s.final_scale = r.number("final_scale", s.final_scale, 0.0, 1.0);
    if (s.name == "step") {
        s.every_epochs = r.integer("every_epochs", s.every_epochs, 0, 1'000'000);
        s.milestones = r.integer_list("milestones", s.milestones, 1, 0);
        s.factor = r.number("factor", s.factor, 0.0, 1.0, true);
        if ((s.every_epochs > 0) == !s.milestones.empty())
            throw ConfigError(r.path_of("every_epochs") + ": give either every_epochs (a decay every E epochs) or " +
                              "milestones (the epochs of the decays, e.g. [5, 8]) for a \"step\" schedule, " +
                              (s.every_epochs > 0 ? "not both" : "got neither"));
        for (std::size_t i = 1; i < s.milestones.size(); ++i)
            if (s.milestones[i] <= s.milestones[i - 1])
                throw ConfigError(r.path_of("milestones") + ": " + r.resolved()["milestones"].dump() +
                                  " must be in ascending order, each epoch once");
    }
    r.finish();
    return s;
}

namespace {

OptimizerConfig parse_optimizer(JsonReader r) {
    OptimizerConfig o;
    o.name = r.choice("name", o.name, {"sgd", "nesterov", "adam"});
    o.learning_rate = r.number("learning_rate", o.learning_rate, 0.0, 1e3, true);
    o.momentum = r.number("momentum", o.momentum, 0.0, 0.999999);
    o.beta1 = r.number("beta1", o.beta1, 0.0, 0.999999);
    o.beta2 = r.number("beta2", o.beta2, 0.0, 0.999999999);
    o.epsilon = r.number("epsilon", o.epsilon, 0.0, 1.0, true);
    o.warmup_epochs = r.number("warmup_epochs", o.warmup_epochs, 0.0, 1000.0);
    o.schedule = parse_schedule(r.object("schedule"));
    r.finish();
    return o;
}

// auto | cpu | cuda | cuda:N (backend/device_choice.hpp).
std::string device(JsonReader& r, const std::string& key, const std::string& fallback) {
    const std::string value = r.string(key, fallback);
    if (!is_device_string(value))
        throw ConfigError(r.path_of(key) + ": expected one of auto | cpu | cuda | cuda:N (N a GPU index), got \"" +
                          value + "\"");
    return value;
}

TrainingConfig parse_training(JsonReader r) {
    TrainingConfig t;
    t.epochs = r.integer("epochs", t.epochs, 1, 1'000'000);
    t.batch_size = r.integer("batch_size", t.batch_size, 1, 1'000'000);
    t.device = device(r, "device", t.device);
    t.eval_device = device(r, "eval_device", t.eval_device);
    t.threads = r.integer("threads", t.threads, 0, 4096);
    t.thread_split = r.choice("thread_split", t.thread_split, {"auto", "layers", "rows"});
    t.flush_denormals = r.boolean("flush_denormals", t.flush_denormals);
    t.tf32 = r.boolean("tf32", t.tf32);
    t.seed = r.integer("seed", t.seed, 0, std::numeric_limits<std::int64_t>::max());
    t.optimizer = parse_optimizer(r.object("optimizer"));
    r.finish();
    return t;
}

EvalConfig parse_eval(JsonReader r) {
    EvalConfig e;
    e.per_epoch = r.integer("per_epoch", e.per_epoch, 1, 1000);
    e.target_accuracy = r.optional_number("target_accuracy", e.target_accuracy, 0.0, 1.0, false, "no target");
    e.test_samples = r.integer("test_samples", e.test_samples, 0, 100'000'000);
    r.finish();
    return e;
}

ClusterConfig parse_cluster(JsonReader r) {
    ClusterConfig k;
    k.mode = r.choice("mode", k.mode, {"embedded", "local"});
    k.workers = r.integer("workers", k.workers, 1, 1024);
    k.endpoint = r.string("endpoint", k.endpoint);
    k.quorum = r.number("quorum", k.quorum, 0.0, 1.0, true);
    k.round_timeout_ms = r.integer("round_timeout_ms", k.round_timeout_ms, 1, 86'400'000);
    k.worker_timeout_ms = r.integer("worker_timeout_ms", k.worker_timeout_ms, 100, 86'400'000);
    k.heartbeat_ms = r.integer("heartbeat_ms", k.heartbeat_ms, 10, 3'600'000);
    k.join_timeout_ms = r.integer("join_timeout_ms", k.join_timeout_ms, 100, 86'400'000);
    k.reply_timeout_ms = r.integer("reply_timeout_ms", k.reply_timeout_ms, 100, 86'400'000);
    k.chunk_elements = r.integer("chunk_elements", k.chunk_elements, 1, 1 << 24);
    k.step_delay_ms = r.integer_list("step_delay_ms", k.step_delay_ms, 0, 0);
    k.max_failed_share = r.number("max_failed_share", k.max_failed_share, 0.0, 1.0);
    k.checkpoint_seconds = r.integer("checkpoint_seconds", k.checkpoint_seconds, 0, 86'400 * 365);
    k.elastic = r.boolean("elastic", k.elastic);
    k.overlap = r.boolean("overlap", k.overlap);
    k.max_peers = r.integer("max_peers", k.max_peers, 1, 1'000'000);
    k.servers = r.integer("servers", k.servers, 1, 256);
    k.codec = r.choice("codec", k.codec, {"float32", "fp16", "bf16", "int8", "topk"});
    k.reply_codec = r.choice("reply_codec", k.reply_codec, {"same", "float32", "fp16", "bf16", "int8", "topk"});
    k.topk_ratio = r.number("topk_ratio", k.topk_ratio, 0.0, 1.0, true);
    if (k.step_delay_ms.size() > std::size_t(k.workers))
        throw ConfigError("cluster.step_delay_ms: " + std::to_string(k.step_delay_ms.size()) + " delays for " +
                          std::to_string(k.workers) + " workers (cluster.workers); give at most one per worker");
    r.finish();
    if (k.max_peers < k.workers)
        throw ConfigError("cluster.max_peers: " + std::to_string(k.max_peers) + " is less than cluster.workers (" +
                          std::to_string(k.workers) + "); the center must be able to hold every worker");
    if (k.heartbeat_ms * 2 > k.worker_timeout_ms)
        throw ConfigError("cluster.heartbeat_ms: " + std::to_string(k.heartbeat_ms) +
                          " must be at most half of cluster.worker_timeout_ms (" + std::to_string(k.worker_timeout_ms) +
                          "), or live workers would be counted lost");
    return k;
}

SecurityConfig parse_security(JsonReader r) {
    SecurityConfig s;
    s.center_public_key = r.string("center_public_key", s.center_public_key);
    s.center_secret_key = r.string("center_secret_key", s.center_secret_key);
    s.worker_public_key = r.string("worker_public_key", s.worker_public_key);
    s.worker_secret_key = r.string("worker_secret_key", s.worker_secret_key);
    s.authorized_workers = r.string("authorized_workers", s.authorized_workers);
    r.finish();
    // Which files each side needs is checked where the keys are loaded (security/curve_keys):
    // one config serves the center and the workers, each holding only its own secret.
    if (!s.enabled() && (!s.center_secret_key.empty() || !s.worker_public_key.empty() ||
                         !s.worker_secret_key.empty() || !s.authorized_workers.empty()))
        throw ConfigError("security.center_public_key: empty while other security.* keys are set; CURVE is on only "
                          "when the center's public key file is given (tether keygen writes one)");
    return s;
}

// Rules that tie the strategy to other sections; a strategy's factory sees only its own block
// and its StrategyContext.
void check_strategy_against_run(const RunConfig& c) {
    const std::string& name = c.strategy.name;
    if (name == "sequential" && c.cluster.workers != 1)
        throw ConfigError("cluster.workers: " + std::to_string(c.cluster.workers) +
                          " workers with strategy.name \"sequential\"; sequential training uses exactly 1 worker "
                          "(pick a distributed strategy such as \"adag\" or \"aeasgd\" for more)");
    const WireKinds kinds = c.strategy.rule->wire_kinds();
    const auto check_codec = [&](const char* key, CodecKind codec, WireVector kind, const char* vector) {
        if (lossy(codec) && kind == WireVector::unknown && c.strategy.rule->uses_center())
            throw ConfigError(std::string("cluster.") + key + ": \"" + to_string(codec) + "\" compresses the " + vector +
                              ", but strategy \"" + name + "\" does not say whether it is a state or an update "
                              "(Strategy::wire_kinds in <tether/strategy.hpp>), and a lossy codec must know; use "
                              "\"float32\", or declare wire_kinds() in the strategy");
    };
    check_codec("codec", c.cluster.payload_codec().kind, kinds.payload, "workers' exchanges");
    check_codec(c.cluster.reply_codec == "same" ? "codec" : "reply_codec", c.cluster.reply_codec_options().kind, kinds.reply,
                "center's replies");
}

// training.thread_split "layers" needs an MLP with a hidden layer (the widths against the
// thread count are checked when the threads are known: plan_cpu_threads).
void check_thread_split(const RunConfig& c) {
    if (c.training.thread_split != "layers") return;
    if (!c.model.layers.empty())
        throw ConfigError("training.thread_split: \"layers\" splits the hidden layers of model.hidden_layers between a "
                          "worker's threads, and this model is model.layers; use \"rows\" (minibatch row slices) or \"auto\"");
    if (c.model.hidden_layers.empty())
        throw ConfigError("training.thread_split: \"layers\" splits the hidden layers of model.hidden_layers between a "
                          "worker's threads, and it has none; use \"rows\" (minibatch row slices) or \"auto\"");
}

}  // namespace

RunConfig parse_config(const json& given, std::vector<KeyInfo>* keys) {
    RunConfig c;
    json renamed;
    const json& document = with_current_names(given, renamed);
    JsonReader root(&document, "", c.resolved, keys);
    c.name = root.string("name", c.name);
    if (c.name.empty() || c.name.find('/') != std::string::npos)
        throw ConfigError("name: \"" + c.name + "\" must be a non-empty word without '/' (it names the run directory)");
    c.data = parse_data(root.object("data"));
    c.model = parse_model(root.object("model"));
    c.training = parse_training(root.object("training"));
    c.eval = parse_eval(root.object("eval"));
    c.cluster = parse_cluster(root.object("cluster"));
    c.security = parse_security(root.object("security"));
    {
        // After the cluster: strategy defaults such as alpha = 0.9 / N depend on N; after the
        // training section: a strategy may need a local optimizer (eamsgd). The model has not
        // met the data yet, so the parameter count is not known here (0).
        JsonReader s = root.object("strategy");
        c.strategy.rule = make_strategy(s, StrategyContext{int(c.cluster.workers), 0, c.training.optimizer.name});
        c.strategy.name = c.strategy.rule->name();
        s.finish();
    }
    check_strategy_against_run(c);
    check_thread_split(c);
    root.finish();
    return c;
}

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
    std::ifstream in(path);
    if (!in) throw ConfigError(path + ": cannot open the config file");
    std::stringstream text;
    text << in.rdbuf();
    json document;
    try {
        document = json::parse(text.str());
    } catch (const json::parse_error& e) {
        throw ConfigError(path + ": not valid JSON: " + e.what());
    }
    try {
        for (const auto& o : overrides) apply_override(document, o);
        return parse_config(document);
    } catch (const ConfigError& e) {
        throw ConfigError(path + ": " + e.what());
    }
}

}  // namespace tether
