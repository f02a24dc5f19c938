"""experiments/sweeps/tune.py: a grid whose edge wins is widened until the best rate is strictly inside,
per combination of the other keys, within --max-extensions, and a re-run runs nothing again.

A fake `tether` (this file, run with `sweep`) stands for the sweep runner: each run's final
validation accuracy is a known function of its rate, peaked at a different rate per strategy,
and it logs every run it makes. Then the real binary (TETHER_BIN) tunes a small synthetic
sweep, so the run directories tune.py reads are the ones tether sweep writes. Run by meson test with
PYTHONPATH=experiments:examples/python (experiments/README.md) and TETHER_SOURCE_DIR."""
import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

OPTIMUM = {"adag": 0.03, "downpour": 3e-5}  # peak of the fake objective per strategy
KEY = "training.optimizer.learning_rate"
DIVERGES = 0.1  # runs at this rate or above diverge (tune.py scores them 0 and goes on)

from tetherlab.tether_sweep import run_id

source = Path(os.environ.get("TETHER_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def script(name):
    """A script of experiments/sweeps, NAME.py, as a module (it is not in a package)."""
    spec = importlib.util.spec_from_file_location(name, source / "experiments" / "sweeps" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tune, ci_table = script("tune"), script("ci_table")


def objective(strategy, rate, seed):
    # Falls off with the distance in decades from the optimum; the seed moves it a little.
    return 0.9 - 0.1 * (math.log10(rate) - math.log10(OPTIMUM[strategy])) ** 2 + 0.001 * seed


def fake_sweep(sweep_path, out):
    sweep = json.loads(Path(sweep_path).read_text())
    failed = False
    for point in sweep["points"]:
        for repeat in range(sweep["repeats"]):
            run = Path(out) / run_id(list(point.items()), repeat)
            if (run / "summary.json").is_file():
                continue  # complete: skipped, as tether sweep does
            run.mkdir(parents=True)
            accuracy = objective(point["strategy.name"], point[KEY], repeat)
            if point[KEY] >= DIVERGES:  # a diverged run: no accuracy, and tether sweep exits 1
                accuracy, failed = None, True
            (run / "summary.json").write_text(json.dumps({"final_validation_accuracy": accuracy,
                                                           "best_validation_accuracy": accuracy,
                                                           "final_test_accuracy": accuracy,
                                                           "run_failed": accuracy is None}))
            with open(Path(out) / "fake_runs.log", "a") as f:
                f.write(run.name + "\n")
    return 1 if failed else 0


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_widening_logic():
    # The top edge wins: one value a grid step above it; then the bound stops it.
    assert tune.widen({1e-3: 0.5, 1e-2: 0.7}, 10, {"low": 0, "high": 0}, 2) == ("high", 0.1)
    assert tune.widen({1e-3: 0.5, 1e-2: 0.7}, 10, {"low": 0, "high": 2}, 2) is None
    assert tune.widen({1e-3: 0.8, 1e-2: 0.7}, 10, {"low": 0, "high": 0}, 2) == ("low", 1e-4)
    assert tune.widen({1e-3: 0.5, 1e-2: 0.8, 1e-1: 0.7}, 10, {"low": 0, "high": 0}, 2) is None
    assert tune.verdict({1e-3: 0.5, 1e-2: 0.8, 1e-1: 0.7}) == (1e-2, True)
    assert tune.verdict({1e-3: 0.5, 1e-2: 0.8}) == (1e-2, False)
    assert abs(tune.grid_factor([1e-4, 1e-3, 1e-2]) - 10) < 1e-9
    assert tune.significant(0.001 * 10 ** 0.5) == 0.00316
    # One tuning per combination of the other grid keys and the points, in tether sweep's order.
    sweep = {"grid": {"strategy.name": ["adag", "downpour"], KEY: [1e-3, 1e-2]},
             "points": [{"cluster.workers": 4, "strategy.communication_window": 4}, {"cluster.workers": 8,
                                                                                     "strategy.communication_window": 8}]}
    assert [dict(c) for c in tune.combinations_of(sweep, KEY)] == [
        {"strategy.name": s, "cluster.workers": n, "strategy.communication_window": n}
        for s in ("adag", "downpour") for n in (4, 8)]


def test_fake_objective():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sweep = {"name": "fake", "base": {"name": "unused"}, "repeats": 2,
                 "grid": {"strategy.name": ["adag", "downpour"], KEY: [1e-4, 1e-3, 1e-2]}}
        (tmp / "sweep.json").write_text(json.dumps(sweep))
        wrapper = tmp / "tether"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
        wrapper.chmod(0o755)
        args = [str(tmp / "sweep.json"), "--key", KEY, "--out", str(tmp / "out"), "--tether", str(wrapper),
                "--max-extensions", "3"]
        assert tune.main(args) == 0
        results = {r["strategy.name"]: r for r in read_csv(tmp / "out" / "tune_result.csv")}
        # adag peaks at 0.03: the top edge (0.01) wins first, 0.1 is added, and 0.01 is then inside
        # (0.03 lies between 0.01 and 0.1, nearer 0.01 in decades).
        assert float(results["adag"][f"best_{KEY}"]) == 0.01, results
        assert results["adag"]["strictly_inside"] == "True"
        assert results["adag"]["values_tried"] == "0.0001 0.001 0.01 0.1"
        # downpour peaks at 3e-5: 1e-5 is added below and wins (nearer 3e-5 than 1e-4 is), so
        # 1e-6 is added too, and 1e-5 is inside.
        assert float(results["downpour"][f"best_{KEY}"]) == 1e-5, results
        assert results["downpour"]["strictly_inside"] == "True"
        assert results["downpour"]["values_tried"] == "1e-06 1e-05 0.0001 0.001 0.01"
        rows = read_csv(tmp / "out" / "tune.csv")
        assert len(rows) == 9 and sum(r["won"] == "True" for r in rows) == 2
        assert "| adag | 0.01 | True |" in (tmp / "out" / "tune.md").read_text()
        runs = (tmp / "out" / "fake_runs.log").read_text().splitlines()
        assert len(runs) == 18 and len(set(runs)) == 18  # 9 values x 2 seeds, each once

        # Re-running runs nothing again and gives the same tables.
        before = (tmp / "out" / "tune_result.csv").read_text()
        assert tune.main(args) == 0
        assert len((tmp / "out" / "fake_runs.log").read_text().splitlines()) == 18
        assert (tmp / "out" / "tune_result.csv").read_text() == before

        # --final-repeats 3: each winner runs with 3 seeds; the 2 tuning seeds are reused, so one
        # new run per combination, at the winning rate only.
        assert tune.main(args + ["--final-repeats", "3"]) == 0
        final = json.loads((tmp / "out" / "final_sweep.json").read_text())
        assert final["repeats"] == 3
        assert [(p["strategy.name"], p[KEY]) for p in final["points"]] == [("adag", 0.01), ("downpour", 1e-5)]
        new = (tmp / "out" / "fake_runs.log").read_text().splitlines()[18:]
        assert sorted(new) == sorted(run_id(list(p.items()), 2) for p in final["points"]), new

        # experiments/sweeps/ci_table.py on those final runs: mean ± the 95% half-width (t with 2 degrees
        # of freedom, 4.303) over the 3 seeds, and each cell's tuned rate listed under the table.
        seeds = [100 * objective("adag", 0.01, r) for r in range(3)]
        mean, half = statistics.mean(seeds), 4.303 * statistics.stdev(seeds) / math.sqrt(3)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert ci_table.main([str(tmp / "out"), "--rows", "strategy.name", "--cols", KEY, "--percent"]) == 0
        assert f"| adag |  | {mean:.2f} ± {half:.2f} (n=3) |" in printed.getvalue(), printed.getvalue()
        assert "Tuned training.optimizer.learning_rate per cell" in printed.getvalue()

        # A bound of one value per edge: downpour's best stays at the edge, and the table says so.
        bounded = args[:-1] + ["1"]
        bounded[bounded.index("--out") + 1] = str(tmp / "bounded")
        assert tune.main(bounded) == 0
        results = {r["strategy.name"]: r for r in read_csv(tmp / "bounded" / "tune_result.csv")}
        assert results["downpour"]["strictly_inside"] == "False"
        assert results["downpour"]["values_tried"] == "1e-05 0.0001 0.001 0.01"


def test_real_sweep():
    binary = os.environ.get("TETHER_BIN")
    if not binary:
        print("TETHER_BIN not set: the real sweep is not run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = {"data": {"source": "synthetic", "train_samples": 2000, "test_samples": 100, "validation_samples": 300,
                         "features": 8, "classes": 3},
                "model": {"hidden_layers": [8]},
                "training": {"epochs": 2, "batch_size": 32, "device": "cpu", "threads": 1,
                             "optimizer": {"name": "sgd", "learning_rate": 0.1}},
                "eval": {"per_epoch": 1}, "strategy": {"name": "sequential"}, "cluster": {"workers": 1}}
        (tmp / "base.json").write_text(json.dumps(base))
        sweep = {"name": "real", "base": "base.json", "grid": {KEY: [0.003, 0.01]}}
        (tmp / "sweep.json").write_text(json.dumps(sweep))
        args = [str(tmp / "sweep.json"), "--key", KEY, "--out", str(tmp / "out"), "--tether", binary,
                "--max-extensions", "1"]
        assert tune.main(args) == 0
        result = read_csv(tmp / "out" / "tune_result.csv")
        # Two values are an edge each: whichever wins, one value is added beyond it.
        tried = result[0]["values_tried"].split()
        assert len(result) == 1 and tried in (["0.0009", "0.003", "0.01"], ["0.003", "0.01", "0.0333"]), result
        for rate in tried:  # tune.py reads the directories tether sweep writes
            run = tmp / "out" / run_id([(KEY, float(rate))], 0)
            assert (run / "summary.json").is_file(), run
        summary = read_csv(tmp / "out" / "summary.csv")
        assert len(summary) == 3 and all(r["status"] == "complete" for r in summary), summary

        # A plain sweep of grid x points, tabled straight from its file (ci_table multiplies the
        # grid into the points in the order tether sweep names runs), one row per two keys.
        plain = {"name": "plain", "base": "base.json", "grid": {"training.epochs": [1, 2]},
                 "points": [{"training.batch_size": 32, KEY: 0.01}, {"training.batch_size": 64, KEY: 0.03}],
                 "repeats": 2}
        (tmp / "plain.json").write_text(json.dumps(plain))
        assert subprocess.run([binary, "sweep", str(tmp / "plain.json"), "--out", str(tmp / "plain")]).returncode == 0
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert ci_table.main([str(tmp / "plain"), "--sweep", str(tmp / "plain.json"), "--rows",
                                  f"training.batch_size,{KEY}", "--cols", "training.epochs", "--percent"]) == 0
        rows = [line for line in printed.getvalue().splitlines() if line.startswith("| 32 / 0.01 |")
                or line.startswith("| 64 / 0.03 |")]
        assert len(rows) == 2 and all(line.count("(n=2)") == 2 for line in rows), printed.getvalue()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":  # this file as the fake tether
        sys.exit(fake_sweep(sys.argv[2], sys.argv[sys.argv.index("--out") + 1]))
    test_widening_logic()
    test_fake_objective()
    test_real_sweep()
    print("tune_test: passed")
