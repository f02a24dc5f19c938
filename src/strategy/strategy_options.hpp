// StrategyOptions (the public reader of a strategy's block) over JsonReader (util/json_reader.hpp):
// the same strict checks, errors and documented keys for config files and the embedding API.
#pragma once

#include <nlohmann/json.hpp>

#include <tether/strategy.hpp>

#include "util/json_reader.hpp"

namespace tether {

class JsonStrategyOptions final : public StrategyOptions {
public:
    explicit JsonStrategyOptions(JsonReader& reader) : reader_(reader) {}

    std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max) override {
        return reader_.integer(key, fallback, min, max);
    }
    double number(const std::string& key, double fallback, double min, double max, bool min_exclusive) override {
        return reader_.number(key, fallback, min, max, min_exclusive);
    }
    std::optional<double> optional_number(const std::string& key, std::optional<double> fallback, double min, double max,
                                          bool min_exclusive, const std::string& when_null) override {
        return reader_.optional_number(key, fallback, min, max, min_exclusive, when_null);
    }
    bool boolean(const std::string& key, bool fallback) override { return reader_.boolean(key, fallback); }
    std::string string(const std::string& key, const std::string& fallback) override {
        return reader_.string(key, fallback);
    }
    std::string choice(const std::string& key, const std::string& fallback,
                       const std::vector<std::string>& allowed) override {
        return reader_.choice(key, fallback, allowed);
    }
    std::string path_of(const std::string& key) const override { return reader_.path_of(key); }
    void resolve(const std::string& key, double value) override { resolved_by_strategy_[key] = value; }

    // What the block resolved to, with the values the strategy resolved itself.
    nlohmann::json description() const {
        nlohmann::json d = reader_.resolved();
        for (const auto& [key, value] : resolved_by_strategy_.items()) d[key] = value;
        return d;
    }

private:
    JsonReader& reader_;
    nlohmann::json resolved_by_strategy_ = nlohmann::json::object();
};

}  // namespace tether
