#include "util/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "util/errors.hpp"

namespace tether {

using nlohmann::json;

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

JsonReader::JsonReader(const json* object, std::string path, json& resolved, std::vector<KeyInfo>* keys)
    : object_(object), path_(std::move(path)), resolved_(resolved), keys_(keys) {
    if (object_ && object_->is_null()) object_ = nullptr;
    if (object_ && !object_->is_object())
        throw ConfigError((path_.empty() ? std::string("the config") : path_) + ": expected a JSON object, got " +
                          object_->dump());
    if (!resolved_.is_object()) resolved_ = json::object();
}

bool JsonReader::has(const std::string& key) const { return object_ && object_->contains(key); }

const json* JsonReader::find(const std::string& key) {
    asked_.insert(key);
    if (!object_) return nullptr;
    const auto it = object_->find(key);
    return it == object_->end() ? nullptr : &*it;
}

void JsonReader::document(const std::string& key, const std::string& type, const json& fallback,
                          const std::string& allowed) {
    if (keys_) keys_->push_back({path_of(key), type, fallback.dump(), allowed});
}

namespace {

std::string range_text(double min, double max, bool min_exclusive) {
    auto show = [](double v) {
        json j = v;
        return j.dump();
    };
    std::string text = min_exclusive ? "> " + show(min) : ">= " + show(min);
    if (max < std::numeric_limits<double>::max()) text += " and <= " + show(max);
    return text;
}

std::string integer_expected(std::int64_t min, std::int64_t max) {
    return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string number_expected(double min, double max, bool min_exclusive) {
    return "a number " + range_text(min, max, min_exclusive);
}

bool number_allowed(double value, double min, double max, bool min_exclusive) {
    return std::isfinite(value) && value >= min && value <= max && !(min_exclusive && value == min);
}

[[noreturn]] void fail_at(const std::string& path, const std::string& expected, const json& got) {
    throw ConfigError(path + ": expected " + expected + ", got " + got.dump());
}

// `value` among `allowed`, or the error that names the nearest.
void check_among(const std::string& path, const std::string& value, const std::vector<std::string>& allowed,
                 const std::string& listing) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    std::string message = path + ": \"" + value + "\" is not allowed; expected one of " + listing;
    for (const auto& a : allowed)
        if (edit_distance(a, value) <= std::max<std::size_t>(1, a.size() / 3)) {
            message += " (did you mean \"" + a + "\"?)";
            break;
        }
    throw ConfigError(message);
}

std::string listing_of(const std::vector<std::string>& allowed) {
    std::string listing;
    for (const auto& a : allowed) listing += (listing.empty() ? "" : " | ") + a;
    return listing;
}

}  // namespace

void JsonReader::fail(const std::string& key, const std::string& expected, const json& got) const {
    fail_at(path_of(key), expected, got);
}

void check_integer(const std::string& path, std::int64_t value, std::int64_t min, std::int64_t max) {
    if (value < min || value > max) fail_at(path, integer_expected(min, max), value);
}

void check_number(const std::string& path, double value, double min, double max, bool min_exclusive) {
    if (!number_allowed(value, min, max, min_exclusive))
        fail_at(path, number_expected(min, max, min_exclusive), value);  // NaN and inf show as null, as JSON has them
}

void check_choice(const std::string& path, const std::string& value, const std::vector<std::string>& allowed) {
    check_among(path, value, allowed, listing_of(allowed));
}

std::int64_t JsonReader::integer(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max) {
    const std::string expected = integer_expected(min, max);
    document(key, "integer", fallback, expected);
    std::int64_t value = fallback;
    if (const json* v = find(key)) {
        if (v->is_number_integer()) value = v->get<std::int64_t>();
        else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
                 std::fabs(v->get<double>()) < 9e15)
            value = std::int64_t(v->get<double>());
        else fail(key, expected, *v);
        if (value < min || value > max) fail(key, expected, *v);
    }
    resolved_[key] = value;
    return value;
}

double JsonReader::number(const std::string& key, double fallback, double min, double max, bool min_exclusive) {
    const std::string expected = number_expected(min, max, min_exclusive);
    document(key, "number", fallback, expected);
    double value = fallback;
    if (const json* v = find(key)) {
        if (!v->is_number()) fail(key, expected, *v);
        value = v->get<double>();
        if (!number_allowed(value, min, max, min_exclusive)) fail(key, expected, *v);
    }
    resolved_[key] = value;
    return value;
}

std::optional<double> JsonReader::optional_number(const std::string& key, std::optional<double> fallback, double min,
                                                  double max, bool min_exclusive, const std::string& when_null) {
    const std::string expected = "null (" + when_null + ") or " + number_expected(min, max, min_exclusive);
    document(key, "number or null", fallback ? json(*fallback) : json(nullptr), expected);
    const json* v = find(key);
    if (!v || v->is_null()) {
        const std::optional<double> value = v ? std::nullopt : fallback;
        resolved_[key] = value ? json(*value) : json(nullptr);
        return value;
    }
    if (!v->is_number()) fail(key, expected, *v);
    const double value = v->get<double>();
    if (!number_allowed(value, min, max, min_exclusive)) fail(key, expected, *v);
    resolved_[key] = value;
    return value;
}

bool JsonReader::boolean(const std::string& key, bool fallback) {
    document(key, "boolean", fallback, "true or false");
    bool value = fallback;
    if (const json* v = find(key)) {
        if (!v->is_boolean()) fail(key, "true or false", *v);
        value = v->get<bool>();
    }
    resolved_[key] = value;
    return value;
}

std::string JsonReader::string(const std::string& key, const std::string& fallback) {
    document(key, "string", fallback, "a string");
    std::string value = fallback;
    if (const json* v = find(key)) {
        if (!v->is_string()) fail(key, "a string", *v);
        value = v->get<std::string>();
    }
    resolved_[key] = value;
    return value;
}

std::string JsonReader::choice(const std::string& key, const std::string& fallback,
                               const std::vector<std::string>& allowed) {
    const std::string listing = listing_of(allowed);
    document(key, "string", fallback, listing);
    std::string value = fallback;
    if (const json* v = find(key)) {
        if (!v->is_string()) fail(key, "one of " + listing, *v);
        value = v->get<std::string>();
        check_among(path_of(key), value, allowed, listing);
    }
    resolved_[key] = value;
    return value;
}

std::vector<std::int64_t> JsonReader::integer_list(const std::string& key, const std::vector<std::int64_t>& fallback,
                                                   std::int64_t min, std::size_t min_length) {
    const std::string expected = "a list of " + (min_length ? "at least " + std::to_string(min_length) + " " : std::string()) +
                                 "integers >= " + std::to_string(min);
    document(key, "list of integers", fallback, expected);
    std::vector<std::int64_t> value = fallback;
    if (const json* v = find(key)) {
        if (!v->is_array() || v->size() < min_length) fail(key, expected, *v);
        value.clear();
        for (const json& e : *v) {
            if (!e.is_number_integer() || e.get<std::int64_t>() < min) fail(key, expected, *v);
            value.push_back(e.get<std::int64_t>());
        }
    }
    resolved_[key] = value;
    return value;
}

std::vector<std::string> JsonReader::string_list(const std::string& key, const std::vector<std::string>& fallback,
                                                 const std::string& expected) {
    document(key, "list of strings", fallback, expected);
    std::vector<std::string> value = fallback;
    if (const json* v = find(key)) {
        if (!v->is_array()) fail(key, expected, *v);
        value.clear();
        for (const json& e : *v) {
            if (!e.is_string()) fail(key, expected, *v);
            value.push_back(e.get<std::string>());
        }
    }
    resolved_[key] = value;
    return value;
}

JsonReader JsonReader::object(const std::string& key) {
    const json* v = find(key);
    if (v && !v->is_object() && !v->is_null()) fail(key, "a JSON object", *v);
    return JsonReader(v, path_of(key), resolved_[key], keys_);
}

void JsonReader::finish() const {
    if (!object_) return;
    for (const auto& [key, value] : object_->items()) {
        if (asked_.count(key)) continue;
        std::string message = path_of(key) + ": unknown key";
        std::string best;
        std::size_t best_distance = 3;
        for (const auto& known : asked_) {
            const std::size_t d = edit_distance(known, key);
            if (d < best_distance || (d == best_distance && best.empty() && d <= known.size() / 3)) {
                best = known;
                best_distance = d;
            }
        }
        if (!best.empty()) message += "; did you mean " + path_of(best) + "?";
        else {
            std::string listing;
            for (const auto& known : asked_) listing += (listing.empty() ? "" : ", ") + known;
            message += "; known keys here: " + listing;
        }
        throw ConfigError(message);
    }
}

void apply_override(json& config, const std::string& assignment) {
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
        throw ConfigError("--set " + assignment + ": expected KEY=VALUE, e.g. --set training.epochs=5");
    const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    const auto overflow = [&] {
        return ConfigError("--set " + assignment + ": " + key + ": " + text +
                           " is not a number a double can hold (at most about 1.8e308); give a finite value");
    };
    json value;
    try {
        value = json::parse(text, nullptr, /*allow_exceptions=*/false);
    } catch (const json::exception&) {
        throw overflow();  // nlohmann may throw out_of_range for a number no double holds
    }
    if (value.is_discarded()) {
        // A number too large for a double is discarded as unparsable, and would be read as the
        // string "1e999": say what it is instead.
        char* end = nullptr;
        const double number = std::strtod(text.c_str(), &end);
        if (!text.empty() && end == text.c_str() + text.size() && std::isinf(number) &&
            text.find_first_of("iInN") == std::string::npos)
            throw overflow();
        value = text;  // a bare word is a string
    }
    json* node = &config;
    std::string walked;
    std::size_t start = 0;
    while (true) {
        const auto dot = key.find('.', start);
        const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (part.empty()) throw ConfigError("--set " + assignment + ": empty component in key \"" + key + "\"");
        if (!node->is_object())
            throw ConfigError("--set " + assignment + ": " + walked + " is " + node->dump() +
                              ", not an object, so it has no key \"" + part + "\"");
        walked += (walked.empty() ? "" : ".") + part;
        if (dot == std::string::npos) {
            (*node)[part] = value;
            return;
        }
        json& next = (*node)[part];
        if (next.is_null()) next = json::object();
        node = &next;
        start = dot + 1;
    }
}

}  // namespace tether
