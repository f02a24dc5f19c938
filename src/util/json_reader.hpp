// Strict, typed reading of one JSON object. Every getter names its key, its default and what
// is allowed; finish() rejects the keys nobody asked for (with a "did you mean"). The reader
// also writes each resolved value (given or default) into `resolved`, so the resolved config
// and the list of known keys come from the same code that parses them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tether {

// One documented key, as seen while parsing (for docs/config.md and the docs test).
struct KeyInfo {
    std::string path;
    std::string type;
    std::string default_value;
    std::string allowed;
};

class JsonReader {
public:
    // `object` may be null (then every key takes its default). `path` is the dotted prefix.
    JsonReader(const nlohmann::json* object, std::string path, nlohmann::json& resolved,
               std::vector<KeyInfo>* keys = nullptr);

    std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min,
                         std::int64_t max = std::numeric_limits<std::int32_t>::max());
    double number(const std::string& key, double fallback, double min, double max,
                  bool min_exclusive = false);
    std::optional<double> optional_number(const std::string& key, std::optional<double> fallback, double min, double max, bool min_exclusive,
                                          const std::string& when_null);
    bool boolean(const std::string& key, bool fallback);
    std::string string(const std::string& key, const std::string& fallback);
    std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
    std::vector<std::int64_t> integer_list(const std::string& key, const std::vector<std::int64_t>& fallback,
                                           std::int64_t min, std::size_t min_length);
    // `expected` describes the allowed strings (for errors and docs/config.md).
    std::vector<std::string> string_list(const std::string& key, const std::vector<std::string>& fallback,
                                         const std::string& expected);
    // A nested object reader; the nested reader must be finished by the caller.
    JsonReader object(const std::string& key);

    // A key's default that depends on other keys, settled after them: `value` is what the
    // resolved block says it is (the key was not given).
    void settle_default(const std::string& key, const nlohmann::json& value) { resolved_[key] = value; }

    // Throws ConfigError for the first key that no getter asked for.
    void finish() const;

    const std::string& path() const { return path_; }
    std::string path_of(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
    bool has(const std::string& key) const;
    // Every key asked for so far, with its value as given or defaulted.
    const nlohmann::json& resolved() const { return resolved_; }

private:
    const nlohmann::json* find(const std::string& key);
    void document(const std::string& key, const std::string& type, const nlohmann::json& fallback,
                  const std::string& allowed);
    [[noreturn]] void fail(const std::string& key, const std::string& expected, const nlohmann::json& got) const;

    const nlohmann::json* object_;
    std::string path_;
    nlohmann::json& resolved_;
    std::vector<KeyInfo>* keys_;
    std::set<std::string> asked_;
};

// The checks of JsonReader's getters for a value that is typed already (the embedding API's
// options): the same limits, and the same error, "PATH: expected ..., got VALUE".
void check_integer(const std::string& path, std::int64_t value, std::int64_t min, std::int64_t max);
void check_number(const std::string& path, double value, double min, double max, bool min_exclusive);
void check_choice(const std::string& path, const std::string& value, const std::vector<std::string>& allowed);

// Edit distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b);

// Applies one `--set a.b.c=VALUE` to `config`. VALUE is read as JSON when it parses as JSON
// (numbers, true/false, null, arrays, quoted strings) and as a plain string otherwise.
void apply_override(nlohmann::json& config, const std::string& assignment);

}  // namespace tether
