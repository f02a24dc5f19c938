#!/usr/bin/python3
"""Run records from Python: CenterService(run_dir=...) writes the run directory `tether run`
writes (config.json, metrics.jsonl with the center's statistics and the scalars workers log,
exchanges.jsonl, checkpoint.bin, summary.json), resume=True goes on from its checkpoint,
tether.torch.load_checkpoint gives the checkpoint as a complete state_dict, and
experiments/plot.py draws such a run. Run by meson test with PYTHONPATH=build/python and the
experiments' path (experiments/README.md)."""
import importlib.util
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

import tether
import tether.torch
from harness import case, main, run_threads

STRATEGY = {"name": "adag", "communication_window": 2}
STEPS, BATCH = 12, 16


def batchnorm_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def train(center, steps=STEPS):
    """Two worker threads: SGD on a least-squares toy task, logging the loss (a tensor) and a
    validation accuracy that rises with the step, every 3 steps."""
    def work(i):
        model = batchnorm_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        worker = tether.torch.Worker(model, center=center)
        generator = torch.Generator().manual_seed(i)
        for step in range(steps):
            x = torch.randn(BATCH, 3, generator=generator)
            loss = (model(x) - x[:, :2]).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            worker.step(BATCH)
            if step % 3 == 0:
                worker.log(loss=loss.detach(), validation_accuracy=0.5 + 0.03 * step, epoch=step / steps)
        worker.finish()
    run_threads(2, work)
    return center.wait()


@case
def a_run_dir_holds_the_run_and_resume_goes_on_from_its_checkpoint():
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "py-run"
        center = tether.torch.CenterService(batchnorm_model(), strategy=STRATEGY, workers=2, run_dir=str(run_dir),
                                            metrics_seconds=0.05)
        state = train(center)
        version = center.snapshot().version
        config = json.loads((run_dir / "config.json").read_text())
        assert config["strategy"]["name"] == "adag" and config["cluster"]["workers"] == 2, config
        assert config["model"] == {"parameters": 3 * 8 + 8 + 8 + 8 + 8 * 2 + 2, "buffers": 8 + 8 + 1}, config["model"]
        logged = [r for r in rows(run_dir) if "worker" in r]
        stats = [r for r in rows(run_dir) if "worker" not in r]
        assert len(logged) == 2 * 4, logged  # steps 0, 3, 6, 9 of each worker
        assert {r["worker"] for r in logged} == {0, 1}, logged
        assert all(isinstance(r["loss"], float) and r["loss"] > 0 for r in logged), logged
        assert stats and stats[-1]["center_version"] == version and stats[-1]["samples"] == 2 * STEPS * BATCH, stats[-1]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["run_failed"] is False and summary["center_version"] == version, summary
        assert abs(summary["final_validation_accuracy"] - 0.77) < 1e-9, summary  # both logged 0.5 + 0.03 * 9 last
        assert summary["provenance"]["tether_version"] == tether.__version__, summary["provenance"]
        assert summary["exchanges"] == len((run_dir / "exchanges.jsonl").read_text().splitlines()), summary
        # The checkpoint is the final state, as a complete state_dict.
        model = batchnorm_model()
        saved = tether.torch.load_checkpoint(model, run_dir)
        model.load_state_dict(saved, strict=True)
        assert list(saved) == list(state) and all(torch.equal(saved[k], state[k]) for k in state), "checkpoint != final state"
        assert int(saved["1.num_batches_tracked"]) == STEPS

        # Resumed: the version and state go on (the model given only says the sizes).
        resumed = tether.torch.CenterService(torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8),
                                                                 torch.nn.ReLU(), torch.nn.Linear(8, 2)),
                                             strategy=STRATEGY, workers=2, run_dir=str(run_dir), resume=True,
                                             metrics_seconds=0.05)
        assert resumed.snapshot().version == version, resumed.snapshot().version
        assert all(torch.equal(resumed.state_dict()[k], state[k]) for k in state)
        train(resumed, steps=4)
        assert resumed.snapshot().version > version
        assert len([r for r in rows(run_dir) if "worker" in r]) == 2 * 4 + 2 * 2, "the resumed run's logs appended"
        assert json.loads((run_dir / "summary.json").read_text())["center_version"] == resumed.snapshot().version

        # A checkpoint of another model is refused by name.
        try:
            tether.torch.load_checkpoint(torch.nn.Linear(3, 2), run_dir)
        except ValueError as e:
            assert "another model" in str(e), e
        else:
            raise AssertionError("the checkpoint of another model loaded")


@case
def log_refuses_what_is_no_scalar_and_names_the_center_writes():
    center = tether.CenterService(np.zeros(4, np.float32), strategy="adag", workers=1)
    worker = center.connect_worker(np.zeros(4, np.float32))
    for scalars, error, words in [({"loss": "low"}, TypeError, "loss is str 'low'; a scalar is a number"),
                                  ({"ok": True}, TypeError, "ok is bool"),
                                  ({"loss": torch.ones(3)}, TypeError, "more than one element"),
                                  ({"samples": 1.0}, ValueError, '"samples": the center writes it'),
                                  ({}, TypeError, "at least one scalar")]:
        try:
            worker.log(**scalars)
        except error as e:
            assert words in str(e), (scalars, e)
        else:
            raise AssertionError(f"log({scalars}) accepted")
    worker.log(loss=np.float32(0.5), accuracy=torch.tensor(0.75), steps=3)  # NumPy and tensor scalars, an int
    worker.finish()
    try:
        worker.log(loss=0.1)
    except RuntimeError as e:
        assert "after finish()" in str(e), e
    else:
        raise AssertionError("log() after finish() accepted")
    try:
        center.wait()  # it logged but never stepped: no update reached x~
    except tether.RunFailedError as e:
        assert "no update reached x~" in str(e), e
    else:
        raise AssertionError("a run without an update did not fail")


@case
def plot_py_draws_a_python_run_like_a_tether_run():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed: this case checks nothing")
        return
    spec = importlib.util.spec_from_file_location("plot", Path(os.environ["TETHER_SOURCE_DIR"]) / "experiments" / "plot.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "plotted"
        center = tether.torch.CenterService(batchnorm_model(), strategy=STRATEGY, workers=2, run_dir=run_dir)  # a Path
        train(center)
        assert plot.curve_workers(run_dir) == [0, 1]
        curve, key = plot.read_curve((run_dir, 1))
        assert key == "validation_accuracy" and len(curve) == 4, curve
        written = {p.name for p in plot.plot_runs([run_dir], run_dir)}
        assert written == {"accuracy_over_time.png", "accuracy_over_samples.png"}, written
        for name in written:
            assert (run_dir / name).stat().st_size > 10_000, name


if __name__ == "__main__":
    raise SystemExit(main())
