"""experiments/plot.py on sweep directories made up here: the figures are written, seeds are
pooled as mean ± sd, labels read as a reader names the keys, a target no seed reached is said,
and a sweep from before the validation split is still drawn. Exit 77 (skip) without matplotlib."""
import csv
import importlib.util
import json
import math
import os
import sys
import tempfile
from pathlib import Path

try:
    import matplotlib  # noqa: F401  (only: is it there?)
except ImportError:
    print("matplotlib is not installed: skipped")
    sys.exit(77)

source = Path(os.environ["TETHER_SOURCE_DIR"])
spec = importlib.util.spec_from_file_location("plot", source / "experiments" / "plot.py")
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)

OLD_COLUMNS = ["strategy.name", "repeat", "final_test_accuracy", "best_test_accuracy", "wall_seconds",
               "time_to_target", "bytes_sent", "mean_staleness", "temporal_efficiency", "status", "run"]
NEW_COLUMNS = ["strategy.name", "strategy.communication_window", "repeat", "final_test_accuracy",
               "final_validation_accuracy", "best_validation_accuracy", "wall_seconds", "time_to_target", "bytes_sent",
               "mean_staleness", "temporal_efficiency", "status", "run"]


def write_run(directory, strategy, window, seed, speed):
    """A run whose validation accuracy rises from 10% to 90% in 4 / speed seconds."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({
        "data": {"source": "idx", "dir": "/usr/share/datasets/fashion-mnist"}, "training": {"epochs": 3},
        "eval": {"target_accuracy": 0.85}}))
    (directory / "summary.json").write_text(json.dumps({"strategy": strategy, "model": "mlp 784-256-128-10"}))
    lines = []
    for step in range(9):
        t = step / speed
        accuracy = min(0.9, 0.1 + 0.2 * t) + 0.01 * seed
        lines.append(json.dumps({"wall_seconds": t, "samples": 1000 * step, "validation_accuracy": accuracy}))
    (directory / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def write_summary(sweep, columns, rows):
    with (sweep / "summary.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def check_labels_and_bands():
    assert plot.label("strategy.communication_window") == "communication window τ"
    assert plot.label("cluster.workers") == "workers N"
    assert plot.label("training.some_new_key") == "some new key"
    row = {"strategy.name": "adag", "strategy.communication_window": "16", "cluster.workers": "4"}
    assert plot.point_label(row, ["strategy.name", "strategy.communication_window"]) == "adag, τ = 16"
    assert plot.point_label(row, ["strategy.name"]) == "adag"
    # Two seeds at 0.5 and 0.7 everywhere: mean 60%, sample sd 14.14 points.
    curves = [[{"samples": 0, "a": 0.5}, {"samples": 10, "a": 0.5}], [{"samples": 0, "a": 0.7}, {"samples": 10, "a": 0.7}]]
    xs, mean, sd = plot.mean_band(curves, "samples", "a")
    assert abs(mean[0] - 60) < 1e-9 and abs(mean[-1] - 60) < 1e-9
    assert abs(sd[0] - 20 / math.sqrt(2)) < 1e-9
    assert xs[0] == 0 and xs[-1] == 10


def check_new_sweep(root):
    sweep = root / "new"
    rows = []
    for strategy, speed in [("adag", 4.0), ("downpour", 1.0)]:
        for window in (1, 4):
            for seed in (0, 1):
                run = f"strategy.name={strategy},strategy.communication_window={window},repeat={seed}"
                write_run(sweep / run, strategy, window, seed, speed)
                reached = strategy == "adag" or seed == 0  # downpour's second seed never reaches 85%
                rows.append({"strategy.name": strategy, "strategy.communication_window": window, "repeat": seed,
                             "final_test_accuracy": 0.88, "final_validation_accuracy": 0.89,
                             "best_validation_accuracy": 0.9 + 0.01 * seed, "wall_seconds": 2,
                             "time_to_target": 3.75 / speed if reached else "", "status": "complete", "run": run})
    write_summary(sweep, NEW_COLUMNS, rows)
    (root / "new-png").mkdir()
    written = {p.name for p in plot.plot_sweep(sweep, root / "new-png")}
    expected = {"final_test_accuracy_vs_strategy_communication_window.png",
                "best_validation_accuracy_vs_strategy_communication_window.png",
                "time_to_target_vs_strategy_communication_window.png", "accuracy_over_time.png",
                "accuracy_over_samples.png"}
    assert written == expected, written
    for name in expected:
        assert (root / "new-png" / name).stat().st_size > 10_000, name
    assert plot.common_title([sweep / r["run"] for r in rows]) == "Fashion-MNIST · mlp 784-256-128-10 · 3 epochs"


def check_old_sweep(root):
    """Columns as tether wrote them before the validation split, and no run directories."""
    sweep = root / "old"
    sweep.mkdir()
    rows = [{"strategy.name": s, "repeat": 0, "final_test_accuracy": a, "best_test_accuracy": a, "wall_seconds": 3,
             "time_to_target": t, "status": "complete", "run": f"strategy.name={s},repeat=0"}
            for s, a, t in [("averaging", 0.88, 2.5), ("easgd", 0.86, "")]]
    write_summary(sweep, OLD_COLUMNS, rows)
    (root / "old-png").mkdir()
    written = {p.name for p in plot.plot_sweep(sweep, root / "old-png")}
    assert written == {"final_test_accuracy_by_run.png", "time_to_target_by_run.png"}, written


with tempfile.TemporaryDirectory() as directory:
    check_labels_and_bands()
    check_new_sweep(Path(directory))
    check_old_sweep(Path(directory))
print("plot.py: all checks passed")
