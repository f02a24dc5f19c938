#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace boost::program_options {
class options_description;
}

namespace tether::cli {

// Parses `arguments` against `options`, with one positional argument bound to the option
// named `positional`. Returns false (after printing the options) when --help was asked for.
bool parse_arguments(const std::vector<std::string>& arguments, boost::program_options::options_description& options,
                     const char* positional);

// Refuses (ConfigError, exit 2) an --out that names something other than a directory, before
// anything starts: found at the first write, it would fail the run late (exit 1).
void check_out_directory(const std::string& out);

// Prints why a run failed (summary.json's run_failed, failure_reason, worker_failures) and
// returns the exit code: 1 for a failed run, 0 otherwise.
int report_verdict(const nlohmann::json& summary);

// Each command takes the arguments after its name and returns the process exit code.
int run_command(const std::vector<std::string>& arguments);
int server_command(const std::vector<std::string>& arguments);
int worker_command(const std::vector<std::string>& arguments);
int sweep_command(const std::vector<std::string>& arguments);
int keygen_command(const std::vector<std::string>& arguments);

}  // namespace tether::cli
