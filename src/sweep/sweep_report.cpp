// summary.csv and summary.md of a sweep: one row per run, the varied keys first.
#include <cmath>
#include <cstdio>
#include <map>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "record/run_recorder.hpp"
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
        const double x = v.get<double>();
        // Fixed decimals read best in columns, but would print a learning rate of 3e-05 as
        // 0.0000: values too small for them keep their significant digits.
        if (x != 0 && std::fabs(x) < std::pow(10.0, -precision + 1))
            std::snprintf(buffer, sizeof buffer, "%.*g", precision, x);
        else
            std::snprintf(buffer, sizeof buffer, "%.*f", precision, x);
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

// "mean ± sd" over the values present (sample standard deviation; n = 1 has none).
std::string mean_and_spread(const std::vector<double>& values, int precision) {
    if (values.empty()) return "";
    double mean = 0;
    for (double v : values) mean += v / double(values.size());
    char buffer[96];
    if (values.size() == 1) {
        std::snprintf(buffer, sizeof buffer, "%.*f", precision, mean);
        return buffer;
    }
    double squares = 0;
    for (double v : values) squares += (v - mean) * (v - mean);
    std::snprintf(buffer, sizeof buffer, "%.*f ± %.*f", precision, mean, precision,
                  std::sqrt(squares / double(values.size() - 1)));
    return buffer;
}

void write_table(std::ostream& csv, std::ostream& md, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
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
}

// The accuracy figures of a run, in table order: the test set once at the end, then what was
// read off the validation curve. Runs without a split (or from before it) leave the validation
// columns empty; their best accuracy on the test curve stays in their summary.json.
const char* const kAccuracyColumns[] = {"final_test_accuracy", "final_validation_accuracy", "best_validation_accuracy"};

// "complete", "reference", "missing" (no summary), or "failed: diverged" / "failed" for a run
// that ended with run_failed (its figures are kept: a diverged run's accuracy is a result).
std::string run_status(const json& summary, bool is_reference) {
    if (!summary.is_object()) return "missing";
    if (summary.value("run_failed", false))
        return summary.value("diverged_workers", 0) > 0 ? "failed: diverged" : "failed";
    return is_reference ? "reference" : "complete";
}

// One row per grid point: the repeats (seeds) of that point pooled as mean ± sd.
std::vector<std::vector<std::string>> rows_by_point(const SweepPlan& plan, const std::string& directory,
                                                    std::vector<std::string>& header) {
    std::vector<std::string> figures(std::begin(kAccuracyColumns), std::end(kAccuracyColumns));
    figures.insert(figures.end(), {"wall_seconds", "time_to_target", "time_to_target_bracket_seconds"});
    header = plan.keys;
    header.push_back("seeds");
    header.push_back("failed");
    for (const auto& f : figures) header.push_back(f);
    std::vector<std::string> order;
    std::map<std::string, std::pair<const SweepRun*, std::map<std::string, std::vector<double>>>> points;
    for (const SweepRun& run : plan.runs) {
        const std::string point = run.id.substr(0, run.id.rfind(",repeat="));
        if (!points.count(point)) order.push_back(point);
        auto& [first, values] = points[point];
        if (!first) first = &run;
        std::ifstream in(fs::path(directory) / run.id / "summary.json");
        const json summary = in ? json::parse(in, nullptr, false) : json();
        if (!summary.is_object()) continue;
        values["seeds"].push_back(1);
        if (summary.value("run_failed", false)) values["failed"].push_back(1);
        for (const auto& f : figures)
            if (summary.contains(f) && summary[f].is_number()) values[f].push_back(summary[f].get<double>());
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& point : order) {
        const auto& [run, values] = points[point];
        std::vector<std::string> row;
        for (const auto& key : plan.keys) {
            json value;
            for (const auto& [k, v] : run->assignments)
                if (k == key) value = v;
            row.push_back(run->is_reference && value.is_null() ? "(reference)" : cell(value));
        }
        const auto seeds = values.find("seeds");
        row.push_back(std::to_string(seeds == values.end() ? 0 : seeds->second.size()));
        const auto failed = values.find("failed");
        row.push_back(std::to_string(failed == values.end() ? 0 : failed->second.size()));
        for (const auto& f : figures) {
            const auto found = values.find(f);
            row.push_back(found == values.end() ? "" : mean_and_spread(found->second, f == "wall_seconds" ? 1 : 4));
        }
        rows.push_back(row);
    }
    return rows;
}

}  // namespace

std::string write_sweep_report(const SweepPlan& plan, const std::string& directory) {
    std::vector<std::string> figures(std::begin(kAccuracyColumns), std::end(kAccuracyColumns));
    figures.insert(figures.end(),
                   {"wall_seconds", "time_to_target", "time_to_target_bracket_seconds", "bytes_sent", "mean_staleness"});
    std::vector<std::string> header = plan.keys;
    header.push_back("repeat");
    header.insert(header.end(), figures.begin(), figures.end());
    for (const char* column : {"temporal_efficiency", "status", "run"}) header.push_back(column);
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
        for (const auto& key : figures)
            row.push_back(ok && summary.contains(key) ? cell(summary[key], key == "bytes_sent" ? 0 : 4) : "");
        // Empty where it is undefined (sweep/temporal_efficiency.hpp), never a made-up 0.
        std::string efficiency;
        if (const auto ref = plan.reference_for(run); ok && ref) {
            const fs::path ref_metrics = fs::path(directory) / plan.runs[*ref].id / "metrics.jsonl";
            if (fs::exists(ref_metrics) && fs::exists(dir / "metrics.jsonl"))
                if (const auto e = temporal_efficiency(read_accuracy_curve((dir / "metrics.jsonl").string()),
                                                       read_accuracy_curve(ref_metrics.string())))
                    efficiency = cell(json(*e));
        }
        row.push_back(efficiency);
        row.push_back(run_status(summary, run.is_reference));
        row.push_back(run.id);
        rows.push_back(row);
    }
    std::ofstream csv(fs::path(directory) / "summary.csv");
    std::ostringstream md;
    write_table(csv, md, header, rows);
    // The same runs pooled by grid point over their seeds.
    std::vector<std::string> point_header;
    const auto point_rows = rows_by_point(plan, directory, point_header);
    std::ofstream point_csv(fs::path(directory) / "summary_by_point.csv");
    std::ostringstream point_md;
    write_table(point_csv, point_md, point_header, point_rows);
    std::ofstream(fs::path(directory) / "summary.md")
        << "# Sweep " << plan.name << "\n\n"
        << "final_test_accuracy: the test set, evaluated once per run on its final model. "
           "final_ and best_validation_accuracy, time_to_target (seconds to eval.target_accuracy, read linearly "
           "between the two evaluations around it; time_to_target_bracket_seconds: the time between them): read off "
           "the validation curve. temporal_efficiency: how many times sooner than the reference run this run reaches "
           "the accuracies both reach (docs/metrics.md#temporal-efficiency).\n\n"
        << "## By grid point (mean ± sample standard deviation over seeds)\n\n"
        << point_md.str() << "\n## Every run\n\n" << md.str();
    return point_md.str() + "\n" + md.str();
}

}  // namespace tether
