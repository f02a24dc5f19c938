#include "config/config.hpp"

#include <fstream>
#include <sstream>

#include "util/errors.hpp"

namespace tether {

using nlohmann::json;

namespace {

DataConfig parse_data(JsonReader r) {
    DataConfig d;
    d.source = r.choice("source", d.source, {"idx", "synthetic"});
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
    r.finish();
    return d;
}

OptimizerConfig parse_optimizer(JsonReader r) {
    OptimizerConfig o;
    o.name = r.choice("name", o.name, {"sgd", "nesterov", "adam"});
    o.learning_rate = r.number("learning_rate", o.learning_rate, 0.0, 1e3, true);
    o.momentum = r.number("momentum", o.momentum, 0.0, 0.999999);
    o.beta1 = r.number("beta1", o.beta1, 0.0, 0.999999);
    o.beta2 = r.number("beta2", o.beta2, 0.0, 0.999999999);
    o.epsilon = r.number("epsilon", o.epsilon, 0.0, 1.0, true);
    r.finish();
    return o;
}

TrainingConfig parse_training(JsonReader r) {
    TrainingConfig t;
    t.epochs = r.integer("epochs", t.epochs, 1, 1'000'000);
    t.batch_size = r.integer("batch_size", t.batch_size, 1, 1'000'000);
    t.device = r.choice("device", t.device, {"auto", "cpu", "cuda"});
    t.threads = r.integer("threads", t.threads, 0, 4096);
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

}  // namespace

RunConfig parse_config(const json& document, std::vector<KeyInfo>* keys) {
    RunConfig c;
    JsonReader root(&document, "", c.resolved, keys);
    c.name = root.string("name", c.name);
    if (c.name.empty() || c.name.find('/') != std::string::npos)
        throw ConfigError("name: \"" + c.name + "\" must be a non-empty word without '/' (it names the run directory)");
    c.data = parse_data(root.object("data"));
    {
        JsonReader m = root.object("model");
        c.model.hidden_layers = m.integer_list("hidden_layers", c.model.hidden_layers, 1, 0);
        m.finish();
    }
    c.training = parse_training(root.object("training"));
    c.eval = parse_eval(root.object("eval"));
    {
        JsonReader s = root.object("strategy");
        c.strategy.name = s.choice("name", c.strategy.name, {"sequential"});
        s.finish();
        if (const auto it = document.find("strategy"); it != document.end() && it->is_object())
            c.strategy.block = *it;
    }
    {
        JsonReader k = root.object("cluster");
        c.cluster.mode = k.choice("mode", c.cluster.mode, {"embedded", "local"});
        c.cluster.workers = k.integer("workers", c.cluster.workers, 1, 1024);
        k.finish();
    }
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
