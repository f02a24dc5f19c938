// Strict configs: every error names the key, the value and what would be right; `--set`
// overrides; the resolved config carries every default.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "config_support.hpp"
#include "test_support.hpp"
#include "util/errors.hpp"
#include "util/json_reader.hpp"

namespace {

using nlohmann::json;
using tether::ConfigError;
using tether::testing::TempDir;

using tether::testing::parse_error;

std::string override_error(json document, const std::string& assignment) {
    try {
        tether::apply_override(document, assignment);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

using tether::testing::contains;

}  // namespace

TEST_CASE("an empty config takes every default") {
    const tether::RunConfig c = tether::parse_config(json::object());
    CHECK(c.name == "run");
    CHECK(c.data.source == "idx");
    CHECK(c.training.epochs == 10);
    CHECK(c.training.batch_size == 64);
    CHECK(c.training.device == "auto");
    CHECK(c.training.optimizer.name == "adam");
    CHECK(c.model.hidden_layers == std::vector<std::int64_t>{256, 128});
    REQUIRE(c.eval.target_accuracy.has_value());
    CHECK(*c.eval.target_accuracy == doctest::Approx(0.88));
    CHECK(c.cluster.strategy->name() == "sequential");
    CHECK(c.cluster.workers == 1);
}

TEST_CASE("the resolved config holds the given values and the defaults of the rest") {
    const json document = json::parse(R"({
        "name": "small",
        "data": {"source": "synthetic", "features": 8},
        "training": {"epochs": 3, "optimizer": {"name": "sgd", "learning_rate": 0.05}}
    })");
    const tether::RunConfig c = tether::parse_config(document);
    const json& r = c.resolved;
    CHECK(r["name"] == "small");
    CHECK(r["data"]["source"] == "synthetic");
    CHECK(r["data"]["features"] == 8);
    CHECK(r["data"]["train_samples"] == 4000);      // default
    CHECK(r["data"]["dir"] == "/usr/share/datasets/fashion-mnist");
    CHECK(r["training"]["epochs"] == 3);
    CHECK(r["training"]["batch_size"] == 64);       // default
    CHECK(r["training"]["device"] == "auto");       // default
    CHECK(r["training"]["threads"] == 0);           // default
    CHECK(r["training"]["optimizer"]["name"] == "sgd");
    CHECK(r["training"]["optimizer"]["learning_rate"] == 0.05);
    CHECK(r["training"]["optimizer"]["momentum"] == 0.9);  // default
    CHECK(r["model"]["hidden_layers"] == json::array({256, 128}));
    CHECK(r["eval"]["per_epoch"] == 1);
    CHECK(r["eval"]["target_accuracy"] == 0.88);
    CHECK(r["strategy"]["name"] == "sequential");
    CHECK(r["cluster"]["mode"] == "embedded");
    CHECK(r["cluster"]["workers"] == 1);
    // The resolved config parses back to the same config.
    CHECK(tether::parse_config(r).resolved == r);
}

TEST_CASE("a null target accuracy means no target") {
    const tether::RunConfig c = tether::parse_config(json::parse(R"({"eval": {"target_accuracy": null}})"));
    CHECK_FALSE(c.eval.target_accuracy.has_value());
    CHECK(c.resolved["eval"]["target_accuracy"].is_null());
}

TEST_CASE("parse_config lists every key it knows") {
    std::vector<tether::KeyInfo> keys;
    tether::parse_config(json::object(), &keys);
    const auto has = [&](const std::string& path) {
        for (const auto& k : keys)
            if (k.path == path) return true;
        return false;
    };
    CHECK(has("training.optimizer.learning_rate"));
    CHECK(has("eval.target_accuracy"));
    CHECK(has("data.train_images"));
    CHECK(has("cluster.workers"));
    CHECK_FALSE(has("training.optimiser"));
}

TEST_CASE("unknown keys are rejected with a suggestion") {
    CHECK(parse_error(json::parse(R"({"training": {"optimiser": {"name": "sgd"}}})")) ==
          "training.optimiser: unknown key; did you mean training.optimizer?");
    CHECK(parse_error(json::parse(R"({"trainng": {}})")) == "trainng: unknown key; did you mean training?");
    CHECK(parse_error(json::parse(R"({"training": {"optimizer": {"lerning_rate": 0.1}}})")) ==
          "training.optimizer.lerning_rate: unknown key; did you mean training.optimizer.learning_rate?");
    // Nothing close: the known keys are listed instead.
    const std::string far = parse_error(json::parse(R"({"eval": {"zzzzzzzzzz": 1}})"));
    CHECK(contains(far, "eval.zzzzzzzzzz: unknown key"));
    CHECK(contains(far, "per_epoch"));
    CHECK(contains(far, "target_accuracy"));
}

TEST_CASE("values of the wrong type name the key and the value") {
    const std::string batch = parse_error(json::parse(R"({"training": {"batch_size": "64"}})"));
    CHECK(contains(batch, "training.batch_size"));
    CHECK(contains(batch, "\"64\""));
    CHECK(contains(batch, "integer"));

    const std::string rate = parse_error(json::parse(R"({"training": {"optimizer": {"learning_rate": "fast"}}})"));
    CHECK(contains(rate, "training.optimizer.learning_rate"));
    CHECK(contains(rate, "\"fast\""));

    const std::string layers = parse_error(json::parse(R"({"model": {"hidden_layers": [64, 1.5]}})"));
    CHECK(contains(layers, "model.hidden_layers"));
    CHECK(contains(layers, "1.5"));

    const std::string section = parse_error(json::parse(R"({"training": 5})"));
    CHECK(contains(section, "training"));
    CHECK(contains(section, "object"));
    CHECK(contains(section, "5"));

    CHECK_THROWS_AS(tether::parse_config(json::array({1, 2})), ConfigError);
}

TEST_CASE("values out of range name the key, the value and the range") {
    const std::string epochs = parse_error(json::parse(R"({"training": {"epochs": 0}})"));
    CHECK(contains(epochs, "training.epochs"));
    CHECK(contains(epochs, "got 0"));
    CHECK(contains(epochs, "from 1"));

    const std::string target = parse_error(json::parse(R"({"eval": {"target_accuracy": 1.5}})"));
    CHECK(contains(target, "eval.target_accuracy"));
    CHECK(contains(target, "1.5"));
    CHECK(contains(target, "<= 1"));

    const std::string rate = parse_error(json::parse(R"({"training": {"optimizer": {"learning_rate": 0}}})"));
    CHECK(contains(rate, "training.optimizer.learning_rate"));
    CHECK(contains(rate, "> 0"));

    CHECK(contains(parse_error(json::parse(R"({"training": {"batch_size": -3}})")), "training.batch_size"));
    CHECK(contains(parse_error(json::parse(R"({"data": {"classes": 1}})")), "data.classes"));
    CHECK(contains(parse_error(json::parse(R"({"cluster": {"workers": 0}})")), "cluster.workers"));
}

TEST_CASE("an integer written as a whole float is accepted") {
    const tether::RunConfig c = tether::parse_config(json::parse(R"({"training": {"epochs": 3.0}})"));
    CHECK(c.training.epochs == 3);
    CHECK(contains(parse_error(json::parse(R"({"training": {"epochs": 2.5}})")), "training.epochs"));
}

TEST_CASE("a bad choice lists the allowed values") {
    const std::string device = parse_error(json::parse(R"({"training": {"device": "gpu"}})"));
    CHECK(contains(device, "training.device"));
    CHECK(contains(device, "\"gpu\""));
    CHECK(contains(device, "auto | cpu | cuda"));

    const std::string name = parse_error(json::parse(R"({"training": {"optimizer": {"name": "adamm"}}})"));
    CHECK(contains(name, "sgd | nesterov | adam"));
    CHECK(contains(name, "did you mean \"adam\"?"));

    CHECK(contains(parse_error(json::parse(R"({"data": {"source": "csv"}})")), "idx | synthetic"));
}

TEST_CASE("straggler delays: one per worker at most, none negative") {
    const tether::RunConfig c = tether::parse_config(
        json::parse(R"({"strategy": {"name": "adag"}, "cluster": {"workers": 3, "step_delay_ms": [0, 5]}})"));
    CHECK(c.cluster.step_delay_ms == std::vector<std::int64_t>{0, 5});
    const std::string too_many = parse_error(
        json::parse(R"({"strategy": {"name": "adag"}, "cluster": {"workers": 2, "step_delay_ms": [0, 0, 5]}})"));
    CHECK(contains(too_many, "cluster.step_delay_ms: 3 delays for 2 workers"));
    CHECK(contains(parse_error(json::parse(R"({"cluster": {"step_delay_ms": [-1]}})")), "cluster.step_delay_ms"));
}

TEST_CASE("the run name must be usable as a directory name") {
    CHECK(contains(parse_error(json::parse(R"({"name": "a/b"})")), "name"));
    CHECK(contains(parse_error(json::parse(R"({"name": ""})")), "name"));
}

TEST_CASE("--set overrides nested keys and creates missing objects") {
    json config = json::parse(R"({"training": {"epochs": 10, "optimizer": {"name": "adam"}}})");
    tether::apply_override(config, "training.epochs=3");
    tether::apply_override(config, "training.optimizer.learning_rate=0.01");
    tether::apply_override(config, "eval.target_accuracy=null");
    tether::apply_override(config, "training.device=cpu");          // a bare word is a string
    tether::apply_override(config, "name=\"quoted\"");             // a JSON string
    tether::apply_override(config, "model.hidden_layers=[8, 4]");
    tether::apply_override(config, "data.noise=1e-1");
    CHECK(config["training"]["epochs"] == 3);
    CHECK(config["training"]["optimizer"]["name"] == "adam");       // siblings are kept
    CHECK(config["training"]["optimizer"]["learning_rate"] == 0.01);
    CHECK(config["eval"].is_object());
    CHECK(config["eval"]["target_accuracy"].is_null());
    CHECK(config["training"]["device"] == "cpu");
    CHECK(config["name"] == "quoted");
    CHECK(config["model"]["hidden_layers"] == json::array({8, 4}));
    CHECK(config["data"]["noise"] == 0.1);

    const tether::RunConfig c = tether::parse_config(config);
    CHECK(c.training.epochs == 3);
    CHECK(c.training.optimizer.learning_rate == doctest::Approx(0.01));
    CHECK_FALSE(c.eval.target_accuracy.has_value());
    CHECK(c.model.hidden_layers == std::vector<std::int64_t>{8, 4});
}

TEST_CASE("--set with a value that is not a JSON number stays a string, and parsing then rejects it") {
    json config = json::object();
    tether::apply_override(config, "training.epochs=five");
    CHECK(config["training"]["epochs"] == "five");
    const std::string message = parse_error(config);
    CHECK(contains(message, "training.epochs"));
    CHECK(contains(message, "\"five\""));
}

TEST_CASE("malformed --set is rejected") {
    const std::string no_equals = override_error(json::object(), "training.epochs");
    CHECK(contains(no_equals, "training.epochs"));
    CHECK(contains(no_equals, "KEY=VALUE"));
    CHECK(contains(override_error(json::object(), "=5"), "KEY=VALUE"));
    CHECK(contains(override_error(json::object(), "training..epochs=5"), "empty component"));
    CHECK(contains(override_error(json::object(), ".epochs=5"), "empty component"));
    CHECK(contains(override_error(json::object(), "training.=5"), "empty component"));
    const std::string inside = override_error(json::parse(R"({"training": {"epochs": 5}})"), "training.epochs.x=1");
    CHECK(contains(inside, "training.epochs"));
    CHECK(contains(inside, "not an object"));
}

TEST_CASE("load_config reads a file and applies overrides in order") {
    TempDir dir;
    const std::string path = dir.file("config.json");
    tether::testing::write_text(path, R"({"name": "fromfile", "training": {"epochs": 4}})");
    const tether::RunConfig c = tether::load_config(path, {"training.epochs=6", "training.epochs=7", "training.seed=9"});
    CHECK(c.name == "fromfile");
    CHECK(c.training.epochs == 7);
    CHECK(c.training.seed == 9);
    CHECK(c.resolved["training"]["epochs"] == 7);
}

TEST_CASE("load_config errors name the file") {
    TempDir dir;
    SUBCASE("missing file") {
        const std::string path = dir.file("missing.json");
        CHECK_THROWS_WITH_AS(tether::load_config(path, {}), doctest::Contains(path.c_str()), ConfigError);
    }
    SUBCASE("invalid JSON") {
        const std::string path = dir.file("broken.json");
        tether::testing::write_text(path, R"({"training": {"epochs": 4,}})");
        const std::string expected = path + ": not valid JSON";
        CHECK_THROWS_WITH_AS(tether::load_config(path, {}), doctest::Contains(expected.c_str()), ConfigError);
    }
    SUBCASE("a bad key in the file") {
        const std::string path = dir.file("typo.json");
        tether::testing::write_text(path, R"({"training": {"optimiser": {}}})");
        CHECK_THROWS_WITH_AS(tether::load_config(path, {}),
                             (path + ": training.optimiser: unknown key; did you mean training.optimizer?").c_str(),
                             ConfigError);
    }
    SUBCASE("a bad override") {
        const std::string path = dir.file("fine.json");
        tether::testing::write_text(path, "{}");
        CHECK_THROWS_WITH_AS(tether::load_config(path, {"training.epochs"}), doctest::Contains(path.c_str()),
                             ConfigError);
        CHECK_THROWS_WITH_AS(tether::load_config(path, {"training.epochs=0"}),
                             doctest::Contains("training.epochs"), ConfigError);
    }
}

TEST_CASE("edit_distance") {
    CHECK(tether::edit_distance("optimiser", "optimizer") == 1);
    CHECK(tether::edit_distance("", "abc") == 3);
    CHECK(tether::edit_distance("kitten", "sitting") == 3);
    CHECK(tether::edit_distance("same", "same") == 0);
}

TEST_CASE("a removed key is refused naming what replaced it, in the file and through --set") {
    TempDir dir;
    CHECK_THROWS_WITH_AS(tether::parse_config(json::parse(R"({"cluster": {"shard_elements": 100}})")),
                         "cluster.shard_elements: renamed cluster.chunk_elements (the same value)", ConfigError);
    tether::testing::write_text(dir.file("c.json"), "{}");
    CHECK_THROWS_WITH_AS(tether::load_config(dir.file("c.json"), {"cluster.overlap=false"}),
                         doctest::Contains("c.json: cluster.overlap: replaced by strategy.overlap_steps"), ConfigError);
    // The new names read as always.
    CHECK(tether::load_config(dir.file("c.json"), {"cluster.chunk_elements=200"}).cluster.chunk_elements == 200);
}
