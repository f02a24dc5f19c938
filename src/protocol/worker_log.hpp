// A worker's own scalars (loss, accuracy, validation_accuracy, ...) on their way into the run
// directory: MessageType::log, from a joined worker to server 0, one message whose payload is a
// UTF-8 JSON object of names and numbers, at most kMaxLogBytes. JSON has no NaN or infinity: a
// value that is not finite travels as null (a diverged loss is worth recording). The center
// writes it into metrics.jsonl as a row tagged with the worker (center/center_log.cpp); nothing
// answers it. Both ends check it with log_problem(), so a worker's mistake is an error where
// it logs, and a peer's malformed log is refused and counted by the center.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tether {

constexpr std::size_t kMaxLogBytes = 4096;
constexpr std::size_t kMaxLogNameBytes = 64;

// The keys the center adds to a worker's row: a worker may not log them.
constexpr const char* kLogRowKeys[] = {"wall_seconds", "samples", "worker", "worker_samples"};

// "" when `scalars` is a valid log: a non-empty JSON object whose names are 1 to
// kMaxLogNameBytes of [A-Za-z0-9_.-/], none of kLogRowKeys, and whose values are numbers or
// null. Otherwise why not, naming the first name at fault.
std::string log_problem(const nlohmann::json& scalars);

// The payload of one log of `scalars`. Throws std::invalid_argument naming what is
// wrong (log_problem, a name given twice, more than kMaxLogBytes).
std::string encode_log(const std::vector<std::pair<std::string, double>>& scalars);

// The scalars of a received payload, or nullopt with `problem` set (not UTF-8 JSON, or
// log_problem). The size is the caller's to check first.
std::optional<nlohmann::json> decode_log(const std::uint8_t* data, std::size_t size, std::string& problem);

}  // namespace tether
