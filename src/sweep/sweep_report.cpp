// summary.csv and summary.md of a sweep: one row per run, the varied keys first.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run/run_recorder.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/temporal_efficiency.hpp"

namespace tether {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string cell(const json& v, int precision = 4) {
    if (v.is_null()) return "";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_float()) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.*f", precision, v.get<double>());
        return buffer;
    }
    return v.dump();
}

std::string csv_escape(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

}  // namespace

std::string write_sweep_report(const SweepPlan& plan, const std::string& directory) {
    std::vector<std::string> header = plan.keys;
    for (const char* column : {"repeat", "final_test_accuracy", "best_test_accuracy", "wall_seconds", "time_to_target",
                               "bytes_sent", "mean_staleness", "temporal_efficiency", "status", "run"})
        header.push_back(column);
    std::vector<std::vector<std::string>> rows;
    for (const SweepRun& run : plan.runs) {
        const fs::path dir = fs::path(directory) / run.id;
        std::ifstream in(dir / "summary.json");
        const json summary = in ? json::parse(in, nullptr, false) : json();
        const bool ok = summary.is_object();
        std::vector<std::string> row;
        for (const auto& key : plan.keys) {
            json value;
            for (const auto& [k, v] : run.assignments)
                if (k == key) value = v;
            row.push_back(run.is_reference && value.is_null() ? "(reference)" : cell(value));
        }
        row.push_back(std::to_string(run.repeat));
        for (const char* key : {"final_test_accuracy", "best_test_accuracy", "wall_seconds", "time_to_target", "bytes_sent",
                                "mean_staleness"})
            row.push_back(ok && summary.contains(key) ? cell(summary[key], std::string(key) == "bytes_sent" ? 0 : 4) : "");
        std::string efficiency;
        if (const auto ref = plan.reference_for(run); ok && ref) {
            const fs::path ref_metrics = fs::path(directory) / plan.runs[*ref].id / "metrics.jsonl";
            if (fs::exists(ref_metrics) && fs::exists(dir / "metrics.jsonl"))
                efficiency = cell(json(temporal_efficiency(read_accuracy_curve((dir / "metrics.jsonl").string()),
                                                           read_accuracy_curve(ref_metrics.string()))));
        }
        row.push_back(efficiency);
        row.push_back(ok ? (run.is_reference ? "reference" : "complete") : "missing");
        row.push_back(run.id);
        rows.push_back(row);
    }
    std::ofstream csv(fs::path(directory) / "summary.csv");
    std::ostringstream md;
    for (std::size_t i = 0; i < header.size(); ++i) {
        csv << (i ? "," : "") << csv_escape(header[i]);
        md << "| " << header[i] << " ";
    }
    csv << "\n";
    md << "|\n";
    for (std::size_t i = 0; i < header.size(); ++i) md << "|---";
    md << "|\n";
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            csv << (i ? "," : "") << csv_escape(row[i]);
            md << "| " << row[i] << " ";
        }
        csv << "\n";
        md << "|\n";
    }
    std::ofstream(fs::path(directory) / "summary.md") << "# Sweep " << plan.name << "\n\n" << md.str();
    return md.str();
}

}  // namespace tether
