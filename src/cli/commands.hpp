#pragma once

#include <string>
#include <vector>

namespace tether::cli {

// Each command takes the arguments after its name and returns the process exit code.
int run_command(const std::vector<std::string>& arguments);
int server_command(const std::vector<std::string>& arguments);
int worker_command(const std::vector<std::string>& arguments);
int sweep_command(const std::vector<std::string>& arguments);

}  // namespace tether::cli
