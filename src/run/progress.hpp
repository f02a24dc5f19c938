// Progress lines on standard output, one per evaluation.
#pragma once

#include <string>

#include "run/run_recorder.hpp"

namespace tether {

class Progress {
public:
    Progress(std::string label, double total_epochs) : label_(std::move(label)), total_epochs_(total_epochs) {}
    void report(const EvaluationPoint& point, double samples_per_second);

private:
    std::string label_;
    double total_epochs_;
};

}  // namespace tether
