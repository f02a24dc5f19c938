// Server 0's evaluation queue holds one snapshot waiting at most (two behind the first): a flood
// of snapshots (a center whose sample count leaps, or evaluations slower than training) costs
// points of the curve, counted, never memory; the first point (t = 0) and the final x~ are
// never lost.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "config/config.hpp"
#include "data/load.hpp"
#include "record/run_recorder.hpp"
#include "run/model_identity.hpp"
#include "run/run_records.hpp"
#include "run/progress_printer.hpp"
#include "run/snapshot_evaluator.hpp"
#include "test_support.hpp"

using namespace tether;
using tether::testing::TempDir;

TEST_CASE("snapshots that evaluation cannot keep up with are coalesced to the latest and counted; the final one stays") {
    TempDir dir;
    const RunConfig config = parse_config(nlohmann::json::parse(R"({
        "name": "coalesced",
        "data": {"source": "synthetic", "train_samples": 600, "test_samples": 100, "validation_samples": 0,
                 "features": 8, "classes": 3},
        "model": {"hidden_layers": [16]},
        "training": {"epochs": 1, "batch_size": 16, "device": "cpu", "threads": 1},
        "strategy": {"name": "adag"},
        "cluster": {"workers": 2}
    })"));
    const TrainTestSplit data = load_data(config.data, 1);
    const ModelIdentity identity = model_identity(config, *data.train);
    RunRecorder recorder(record_settings(config), dir.file("run"));
    ProgressPrinter progress(config.name, 1.0, data.train->size(), "test");
    SnapshotEvaluator evaluator(config, data, recorder, progress, nullptr);
    // 1,000 snapshots before the evaluation thread scores any: the first and the latest wait,
    // 998 are replaced.
    for (std::uint64_t i = 1; i <= 1000; ++i) {
        PendingSnapshot p;
        p.x = identity.initial;
        p.version = i;
        p.versions = {i};
        p.stats.total_samples = i;
        p.wall_seconds = 0.001 * double(i);
        evaluator.push(std::move(p));
    }
    CHECK(evaluator.skipped() == 998);
    evaluator.start();
    // The final x~, unchanged since the last snapshot (so not to be recorded twice): it replaces
    // the waiting one, if still waiting, and is then recorded in its place.
    PendingSnapshot last;
    last.x = identity.initial;
    last.x[0] += 1.0f;  // tells it apart
    last.version = 1000;
    last.versions = {1000};
    last.stats.total_samples = 1000;
    last.wall_seconds = 1.0;
    last.final = true;
    last.record = false;
    evaluator.push(std::move(last));
    const std::vector<float> final_x = evaluator.finish();
    CHECK(final_x.size() == identity.initial.size());
    CHECK(final_x[0] == identity.initial[0] + 1.0f);
    CHECK(evaluator.skipped() == 998);
    // The first snapshot, then the latest state, once.
    CHECK(tether::testing::lines_in(dir.file("run") + "/metrics.jsonl") == 2);
    std::ifstream in(dir.file("run") + "/metrics.jsonl");
    std::string first;
    std::getline(in, first);
    CHECK(nlohmann::json::parse(first)["center_version"] == 1);
}
