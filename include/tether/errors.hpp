// The error tether throws for something the user has to fix: a strategy block with a wrong key
// or value, an impossible combination, a buffer it cannot use. Its message names the key (or
// argument), the value and what would be right. The `tether` command exits with code 2 on it
// (1 on any other failure). A strategy factory of your own throws it too.
#pragma once

#include <stdexcept>
#include <string>

namespace tether {

class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace tether
