// The two kinds of failure the CLI distinguishes: a ConfigError is the user's to fix (bad
// config, bad flag, impossible device request; exit code 2), anything else is a runtime
// failure (exit code 1).
#pragma once

#include <tether/errors.hpp>  // ConfigError, public: a user's strategy factory throws it too

#include <stdexcept>
#include <string>

namespace tether {

// A worker whose loss or parameters went non-finite (NaN or Inf): a runtime failure that the
// run reports by name ("diverged at step S (loss nan)").
class DivergedError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A `tether` process whose training diverged exits with this (0 success, 1 other failures, 2
// usage or config errors): the parent of local workers knows the kind without reading text.
constexpr int kDivergedExit = 3;

}  // namespace tether
