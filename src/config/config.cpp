#include "config/config.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/device_choice.hpp"
#include "model/layer_spec.hpp"
#include "util/errors.hpp"

namespace tether {

using nlohmann::json;

namespace {

// Keys a config no longer has, each with what replaced it: a file that still gives one is
// refused naming the replacement, never read as something else.
struct RemovedKey {
    const char *section, *name, *replacement;
};
constexpr RemovedKey kRemovedKeys[] = {
    {"cluster", "shard_elements", "renamed cluster.chunk_elements (the same value)"},
    {"cluster", "overlap", "replaced by strategy.overlap_steps, the local steps after which an exchange's reply lands "
                           "(the exchange runs on the worker's thread meanwhile); overlap: true was "
                           "strategy.overlap_steps = strategy.communication_window, false is 0"},
};

void refuse_removed_keys(const json& document) {
    if (!document.is_object()) return;
    for (const RemovedKey& k : kRemovedKeys) {
        const auto section = document.find(k.section);
        if (section != document.end() && section->is_object() && section->contains(k.name))
            throw ConfigError(std::string(k.section) + "." + k.name + ": " + k.replacement);
    }
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
    e.every_seconds = r.number("every_seconds", e.every_seconds, 0.0, 86400.0);
    e.target_accuracy = r.optional_number("target_accuracy", e.target_accuracy, 0.0, 1.0, false, "no target");
    e.test_samples = r.integer("test_samples", e.test_samples, 0, 100'000'000);
    e.require_learning = r.boolean("require_learning", e.require_learning);
    r.finish();
    return e;
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

RunConfig parse_config(const json& document, std::vector<KeyInfo>* keys, const Launcher* launcher) {
    RunConfig c;
    refuse_removed_keys(document);
    JsonReader root(&document, "", c.resolved, keys);
    c.name = root.string("name", c.name);
    if (c.name.empty() || c.name.find('/') != std::string::npos)
        throw ConfigError("name: \"" + c.name + "\" must be a non-empty word without '/' (it names the run directory)");
    c.data = parse_data(root.object("data"));
    c.model = parse_model(root.object("model"));
    c.training = parse_training(root.object("training"));
    c.eval = parse_eval(root.object("eval"));
    {
        // After the training section: a strategy may need a local optimizer (eamsgd). The model
        // has not met the data yet, so the parameter count is not known here (0).
        JsonReader cluster = root.object("cluster");
        JsonReader security = root.object("security");
        JsonReader strategy = root.object("strategy");
        c.cluster = read_cluster_settings(cluster, security, strategy, StrategyContext{1, 0, c.training.optimizer.name},
                                          launcher);
    }
    check_thread_split(c);
    root.finish();
    return c;
}

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides, const Launcher* launcher) {
    // A directory opens as a stream on Linux and reads as nothing: say what it is.
    if (std::filesystem::is_directory(path))
        throw ConfigError(path + ": is a directory; give the config file (JSON) itself, e.g. configs/adag.json");
    std::ifstream in(path);
    if (!in) throw ConfigError(path + ": cannot open the config file");
    std::stringstream text;
    text << in.rdbuf();
    json document;
    try {
        document = json::parse(text.str());
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
        throw ConfigError(path + ": not valid JSON: " + e.what());
    }
    try {
        for (const auto& o : overrides) apply_override(document, o);
        return parse_config(document, nullptr, launcher);
    } catch (const ConfigError& e) {
        throw ConfigError(path + ": " + e.what());
    }
}

}  // namespace tether
