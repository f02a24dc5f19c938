// What walks an option table (for_each_cluster_option, for_each_service_option): read each option
// from a config block (the file's edge: JSON), check a typed struct's options with the same
// limits and errors, or write them as a resolved block of config.json.
#pragma once

#include <nlohmann/json.hpp>

#include <tether/cluster_options.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "util/json_reader.hpp"

namespace tether {

// Each option from the block `reader` reads, its field's value the default (docs and the
// resolved block come with it, util/json_reader.hpp).
struct OptionReader {
    JsonReader& reader;
    template <typename Field>
    void operator()(const OptionName& name, Field& field, const OptionLimits& limits) const {
        if constexpr (std::is_same_v<Field, bool>) {
            field = reader.boolean(name.key, field);
        } else if constexpr (std::is_integral_v<Field>) {
            field = Field(reader.integer(name.key, std::int64_t(field), limits.min_integer, limits.max_integer));
        } else if constexpr (std::is_floating_point_v<Field>) {
            field = reader.number(name.key, field, limits.min, limits.max, limits.min_exclusive);
        } else {
            static_assert(std::is_same_v<Field, std::string>, "an option is a bool, an integer, a number or a string");
            field = limits.words.empty() ? reader.string(name.key, field) : reader.choice(name.key, field, limits.words);
        }
    }
};

// Each option of a typed struct checked as OptionReader checks it, the error naming
// "ORIGIN.FIELD" ("ServiceOptions.heartbeat_ms").
struct OptionChecker {
    std::string origin;
    template <typename Field>
    void operator()(const OptionName& name, const Field& field, const OptionLimits& limits) const {
        const std::string path = origin + "." + name.field_name();
        if constexpr (std::is_same_v<Field, bool>) {
            return;
        } else if constexpr (std::is_integral_v<Field>) {
            check_integer(path, std::int64_t(field), limits.min_integer, limits.max_integer);
        } else if constexpr (std::is_floating_point_v<Field>) {
            check_number(path, field, limits.min, limits.max, limits.min_exclusive);
        } else if (!limits.words.empty()) {
            check_choice(path, field, limits.words);
        }
    }
};

// Each option into `block` under its key, as a config file's block holds it.
struct OptionWriter {
    nlohmann::json& block;
    template <typename Field>
    void operator()(const OptionName& name, const Field& field, const OptionLimits&) const {
        block[name.key] = field;
    }
};

}  // namespace tether
