#include "sweep/sweep_plan.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "config/config.hpp"
#include "util/errors.hpp"

namespace tether {

using nlohmann::json;

namespace {

json read_json(const std::string& path, const std::string& what) {
    std::ifstream in(path);
    if (!in) throw ConfigError(path + ": cannot open " + what);
    std::stringstream text;
    text << in.rdbuf();
    try {
        return json::parse(text.str());
    } catch (const json::parse_error& e) {
        throw ConfigError(path + ": not valid JSON: " + e.what());
    }
}

std::string id_part(const std::string& key, const json& value) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    std::string part = key + "=" + text;
    for (char& c : part)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '=' && c != '-' && c != '_') c = '_';
    return part;
}

json with_assignment(json document, const std::string& key, const json& value) {
    apply_override(document, key + "=" + value.dump());
    return document;
}

// A section of the sweep file as written (json objects sort their keys; tables and run ids
// follow the file).
nlohmann::ordered_json in_file_order(const std::string& path, const char* section, nlohmann::ordered_json fallback) {
    std::ifstream in(path);
    return nlohmann::ordered_json::parse(in).value(section, fallback);
}

}  // namespace

std::optional<std::size_t> SweepPlan::reference_for(const SweepRun& run) const {
    for (std::size_t i = 0; i < runs.size(); ++i)
        if (runs[i].is_reference && runs[i].repeat == run.repeat) return i;
    return reference;
}

// "points": [{KEY: VALUE, ...}, ...], combinations of keys that vary together (tau = N, 2N
// for each N); every point names the same keys, none of them a grid key. Returns the keys.
template <typename Fail>
static std::vector<std::string> check_points(const nlohmann::json& points, const nlohmann::json& grid, Fail fail) {
    std::vector<std::string> keys;
    if (!points.is_array()) fail("points: expected a list of objects of KEY: VALUE, got " + points.dump());
    for (std::size_t i = 0; i < points.size(); ++i) {
        const auto& point = points[i];
        const std::string where = "points[" + std::to_string(i) + "]";
        if (!point.is_object() || point.empty()) fail(where + ": expected a non-empty object of KEY: VALUE, got " + point.dump());
        std::vector<std::string> these;
        for (const auto& [key, value] : point.items()) {
            if (grid.contains(key)) fail(where + "." + key + ": also a grid key; a key varies in the grid or in points, not both");
            these.push_back(key);
        }
        if (i == 0) keys = these;
        else if (these != keys)
            fail(where + ": names " + nlohmann::json(these).dump() + ", but points[0] names " + nlohmann::json(keys).dump() +
                 "; every point must name the same keys");
    }
    return keys;
}

SweepPlan load_sweep(const std::string& path, const SweepOverrides& overrides) {
    const json sweep = read_json(path, "the sweep file");
    auto fail = [&](const std::string& message) { throw ConfigError(path + ": " + message); };
    if (!sweep.is_object()) fail("expected a JSON object with \"base\" and \"grid\"");
    for (const auto& [key, value] : sweep.items())
        if (key != "base" && key != "grid" && key != "points" && key != "repeats" && key != "reference" && key != "name")
            fail(key + ": unknown key; a sweep has base, grid, points, repeats, reference and name");

    json base;
    if (!sweep.contains("base")) fail("base: missing; give a config path (relative to the sweep file) or an object");
    if (sweep["base"].is_string()) {
        const auto base_path = std::filesystem::path(path).parent_path() / sweep["base"].get<std::string>();
        base = read_json(base_path.string(), "the sweep's base config");
    } else if (sweep["base"].is_object()) {
        base = sweep["base"];
    } else {
        fail("base: expected a config path or a config object, got " + sweep["base"].dump());
    }

    SweepPlan plan;
    plan.name = sweep.value("name", std::filesystem::path(path).stem().string());
    const json grid = sweep.value("grid", json::object());
    const json points = sweep.value("points", json::array());
    if (!grid.is_object() || (grid.empty() && points.empty()))
        fail("grid: expected an object of KEY: [VALUES], e.g. {\"cluster.workers\": [1, 2, 4]} (or points)");
    for (const auto& [key, values] : grid.items())
        if (!values.is_array() || values.empty()) fail("grid." + key + ": expected a non-empty list of values, got " + values.dump());
    // The grid keys in the order the file gives them (json objects sort their keys).
    const nlohmann::ordered_json ordered_grid = in_file_order(path, "grid", nlohmann::ordered_json::object());
    for (const auto& [key, values] : ordered_grid.items()) plan.keys.push_back(key);
    std::vector<std::string> point_keys = check_points(points, grid, fail);
    if (!point_keys.empty()) {  // the first point's keys as written
        point_keys.clear();
        const nlohmann::ordered_json first = in_file_order(path, "points", nlohmann::ordered_json::array())[0];
        for (const auto& [key, value] : first.items()) point_keys.push_back(key);
    }
    plan.keys.insert(plan.keys.end(), point_keys.begin(), point_keys.end());
    for (const auto& assignment : overrides.assignments) {
        const std::string key = assignment.substr(0, assignment.find('='));
        if (std::find(plan.keys.begin(), plan.keys.end(), key) != plan.keys.end())
            fail("--set " + assignment + ": " + key + " is a grid key of this sweep, and the grid would override it; "
                 "change the grid instead");
        try {
            apply_override(base, assignment);
        } catch (const ConfigError& e) {
            fail("--set " + assignment + ": " + e.what());
        }
    }
    const json repeats_value = overrides.repeats ? json(*overrides.repeats) : sweep.value("repeats", json(1));
    if (!repeats_value.is_number_integer() || repeats_value.get<int>() < 1)
        fail(std::string(overrides.repeats ? "--repeats" : "repeats") + ": expected an integer >= 1, got " + repeats_value.dump());
    const int repeats = repeats_value.get<int>();

    // Every combination of the grid, odometer order (the last key varies fastest), each with
    // every point after it.
    const std::size_t grid_keys = plan.keys.size() - point_keys.size();
    std::vector<std::size_t> index(grid_keys, 0);
    std::vector<std::vector<std::pair<std::string, json>>> combinations;
    while (true) {
        std::vector<std::pair<std::string, json>> combination;
        for (std::size_t k = 0; k < grid_keys; ++k) combination.emplace_back(plan.keys[k], grid[plan.keys[k]][index[k]]);
        if (points.empty()) combinations.push_back(combination);
        for (const auto& point : points) {
            auto with_point = combination;
            for (const auto& key : point_keys) with_point.emplace_back(key, point[key]);
            combinations.push_back(std::move(with_point));
        }
        std::size_t k = grid_keys;
        while (k > 0 && ++index[k - 1] == grid[plan.keys[k - 1]].size()) index[--k] = 0;
        if (k == 0) break;
    }

    std::optional<std::vector<std::pair<std::string, json>>> reference;
    if (sweep.contains("reference")) {
        if (!sweep["reference"].is_object()) fail("reference: expected an object of KEY: VALUE naming one run");
        reference.emplace();
        for (const auto& [key, value] : sweep["reference"].items()) reference->emplace_back(key, value);
    }

    auto make_run = [&](const std::vector<std::pair<std::string, json>>& assignments, int repeat, bool is_reference) {
        SweepRun run;
        run.assignments = assignments;
        run.repeat = repeat;
        run.is_reference = is_reference;
        run.document = base;
        for (const auto& [key, value] : assignments) {
            try {
                run.document = with_assignment(run.document, key, value);
            } catch (const ConfigError& e) {
                fail(std::string(is_reference ? "reference." : "grid.") + key + ": " + e.what());
            }
        }
        if (repeats > 1) {  // repeat r: the run's own seed (from the base or the grid) + r
            const json* seed = run.document.contains("training") ? &run.document["training"] : nullptr;
            const json given = seed && seed->contains("seed") ? (*seed)["seed"] : json(1);
            if (!given.is_number_integer()) fail("training.seed: expected an integer, got " + given.dump());
            run.document = with_assignment(run.document, "training.seed", given.get<std::int64_t>() + repeat);
        }
        for (const auto& [key, value] : assignments) run.id += (run.id.empty() ? "" : ",") + id_part(key, value);
        if (is_reference && run.id.empty()) run.id = "reference";
        run.id += ",repeat=" + std::to_string(repeat);
        try {
            parse_config(run.document);
        } catch (const ConfigError& e) {
            std::string where;
            for (const auto& [key, value] : assignments) where += (where.empty() ? "" : ", ") + key + " = " + value.dump();
            fail("run " + run.id + " (" + where + "): " + e.what());
        }
        return run;
    };

    for (int r = 0; r < repeats; ++r)
        for (const auto& combination : combinations) {
            bool matches_reference = reference.has_value();
            if (reference) {
                // The reference names some keys; a grid run matches when it agrees on all of them.
                json a = base, b = base;
                for (const auto& [key, value] : combination) a = with_assignment(a, key, value);
                b = a;
                for (const auto& [key, value] : *reference) b = with_assignment(b, key, value);
                matches_reference = a == b;
            }
            plan.runs.push_back(make_run(combination, r, matches_reference));
        }
    if (reference) {
        bool found = false;
        int matches_in_repeat_0 = 0;
        for (const auto& run : plan.runs) {
            found = found || run.is_reference;
            matches_in_repeat_0 += run.is_reference && run.repeat == 0;
        }
        if (matches_in_repeat_0 > 1)
            fail("reference: " + sweep["reference"].dump() + " matches " + std::to_string(matches_in_repeat_0) +
                 " runs of the grid; name a value for every grid key so that it picks one");
        if (!found)  // the reference is not a grid point: it runs as an extra run
            for (int r = 0; r < repeats; ++r) plan.runs.push_back(make_run(*reference, r, true));
        for (std::size_t i = 0; i < plan.runs.size(); ++i)
            if (plan.runs[i].is_reference && plan.runs[i].repeat == 0 && !plan.reference) plan.reference = i;
    }
    std::set<std::string> ids;
    for (const auto& run : plan.runs)
        if (!ids.insert(run.id).second)
            fail("two runs would share the directory " + run.id +
                 "; grid values that differ only in characters other than letters, digits, '.', '-' and '_' "
                 "cannot be told apart");
    return plan;
}

}  // namespace tether
