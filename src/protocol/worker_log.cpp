#include "protocol/worker_log.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

namespace tether {

namespace {

bool name_character(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || c == '/';
}

}  // namespace

std::string log_problem(const nlohmann::json& scalars) {
    if (!scalars.is_object()) return "expected a JSON object of names and numbers, got " + std::string(scalars.type_name());
    if (scalars.empty()) return "no scalars";
    for (const auto& [name, value] : scalars.items()) {
        if (name.empty() || name.size() > kMaxLogNameBytes)
            return "name \"" + name.substr(0, kMaxLogNameBytes) + "\": " + std::to_string(name.size()) +
                   " bytes; a name has 1 to " + std::to_string(kMaxLogNameBytes);
        for (char c : name)
            if (!name_character(c))
                return "name \"" + name + "\": letters, digits and _ . - / only";
        for (const char* reserved : kLogRowKeys)
            if (name == reserved)
                return "name \"" + name + "\": the center writes it into every worker's row itself; pick another name";
        if (!value.is_number() && !value.is_null())
            return "\"" + name + "\": " + value.type_name() + "; a scalar is a number";
    }
    return "";
}

std::string encode_log(const std::vector<std::pair<std::string, double>>& scalars) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [name, value] : scalars) {
        if (object.contains(name)) throw std::invalid_argument("log: \"" + name + "\" given twice");
        object[name] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
    }
    const std::string problem = log_problem(object);
    if (!problem.empty()) throw std::invalid_argument("log: " + problem);
    std::string text = object.dump();
    if (text.size() > kMaxLogBytes)
        throw std::invalid_argument("log: " + std::to_string(text.size()) + " bytes of JSON, at most " +
                                    std::to_string(kMaxLogBytes) + "; log fewer scalars at once");
    return text;
}

std::optional<nlohmann::json> decode_log(const std::uint8_t* data, std::size_t size, std::string& problem) {
    // nlohmann's parser refuses bytes that are not UTF-8 in a string, as it refuses bad JSON.
    nlohmann::json scalars = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (scalars.is_discarded()) {
        problem = "not UTF-8 JSON";
        return std::nullopt;
    }
    problem = log_problem(scalars);
    if (!problem.empty()) return std::nullopt;
    return scalars;
}

}  // namespace tether
