#!/usr/bin/python3
"""tether.torch over a model's whole state: BatchNorm's buffers averaged by the center (counters
through a float32 shadow, rounded back), a complete state_dict that loads strictly, b~ taken by
a joining worker, tied weights once, model states tether cannot exchange refused by name, and
a short run of examples/python/batchnorm_cnn.py. Run by meson test with PYTHONPATH=build/python."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

import tether
import tether.torch
from harness import case, main, run_threads


def batchnorm_model():
    torch.manual_seed(0)  # every worker and the center build the same x(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


@case
def a_batchnorm_models_buffers_are_averaged_and_its_state_dict_loads_strictly():
    # Two workers (threads) see data of different means and scales and take 4 and 7 steps: the
    # center's running mean and variance must be the mean of the two workers' last-sent
    # buffers, far from BatchNorm's initial 0 and 1, and num_batches_tracked round(5.5) = 6.
    center = tether.torch.CenterService(batchnorm_model(), strategy={"name": "adag", "communication_window": 2},
                                        workers=2)
    models, last = [batchnorm_model(), batchnorm_model()], [None, None]

    def work(i):
        model = models[i]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        worker = tether.torch.Worker(model, center=center)
        generator = torch.Generator().manual_seed(i)
        for _ in range(4 + 3 * i):
            x = torch.randn(16, 3, generator=generator) * (1 + 2 * i) + (5 if i else -5)
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            worker.step(16)
        last[i] = {k: v.clone() for k, v in model.state_dict().items()}  # what finish() sends last
        worker.finish()
    run_threads(2, work)
    state = center.wait()
    model = batchnorm_model()
    model.load_state_dict(state, strict=True)
    assert list(state) == list(model.state_dict()), list(state)
    for key in ("1.running_mean", "1.running_var"):
        expected = (last[0][key] + last[1][key]) / 2
        assert torch.allclose(state[key], expected, rtol=1e-6, atol=1e-6), (key, state[key], expected)
    assert state["1.running_mean"].abs().min() > 0.1, state["1.running_mean"]  # not the initial zeros
    assert (state["1.running_var"] - 1).abs().max() > 0.5, state["1.running_var"]  # nor the initial ones
    assert state["1.num_batches_tracked"].dtype == torch.int64 and int(state["1.num_batches_tracked"]) == 6
    # The parameters are x~, in model.parameters() order.
    final = center.snapshot()
    assert np.array_equal(torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy(), final.x)
    assert final.buffers.size == 8 + 8 + 1


@case
def streaming_diloco_ends_at_the_workers_mean_with_its_buffers():
    # Streaming DiLoCo (2 fragments on 2 servers, H = 4, replies 1 step late) with outer rate 1
    # and no momentum: each server's round is its fragment's mean. After 8 steps fragment 0 went
    # out after step 8 (landing at finish) and fragment 1, changed since step 6, goes out at
    # finish: x~ is the mean of the workers' last parameters, b~ of their last buffers (which
    # travel with fragment 0, server 0's).
    strategy = {"name": "diloco", "communication_window": 4, "fragments": 2, "overlap_steps": 1,
                "outer_learning_rate": 1.0, "outer_momentum": 0.0}
    center = tether.torch.CenterService(batchnorm_model(), strategy=strategy, workers=2, servers=2)
    models, last, reports = [batchnorm_model(), batchnorm_model()], [None, None], [None, None]

    def work(i):
        model = models[i]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        worker = tether.torch.Worker(model, center=center)
        generator = torch.Generator().manual_seed(i)
        for _ in range(8):
            x = torch.randn(16, 3, generator=generator) * (1 + 2 * i) + (5 if i else -5)
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            worker.step(16)
        last[i] = {k: v.clone() for k, v in model.state_dict().items()}
        reports[i] = worker.finish()
    run_threads(2, work)
    state = center.wait()
    for key, value in state.items():
        if key.endswith("num_batches_tracked"):
            assert int(value) == 8, (key, value)
            continue
        expected = (last[0][key] + last[1][key]) / 2
        assert torch.allclose(value, expected, rtol=1e-5, atol=1e-6), (key, value, expected)
    # 3 fragments on schedule (after steps 2, 4 and 6; step 8's lands at finish) + 2 = 5.
    assert [r["exchanges"] for r in reports] == [5, 5], reports


@case
def a_joining_worker_takes_the_averaged_buffers_and_counters():
    # b~(0) comes from the center's model; a worker joins with it, counters included.
    source = batchnorm_model()
    with torch.no_grad():
        source[1].running_mean.fill_(2.0)
        source[1].num_batches_tracked.fill_(40)
    center = tether.torch.CenterService(source, strategy="adag", workers=1)
    model = batchnorm_model()
    worker = tether.torch.Worker(model, center=center)
    assert torch.equal(model[1].running_mean, torch.full((8,), 2.0)) and int(model[1].num_batches_tracked) == 40
    model.train()
    model(torch.randn(4, 3))  # BatchNorm counts a batch
    worker.step(4)
    worker.finish()
    assert int(center.wait()["1.num_batches_tracked"]) == 41


@case
def model_states_tether_cannot_exchange_are_refused_by_name():
    double = batchnorm_model()
    double[1].running_var = double[1].running_var.double()
    shared = torch.nn.Linear(4, 4)
    shared.bias = torch.nn.Parameter(shared.weight.data[0])  # a view of the weight's first row
    strided = torch.nn.Linear(4, 3)
    strided.weight = torch.nn.Parameter(torch.zeros(3, 4).t().contiguous().t())
    for model, error, words in [(double, TypeError, "buffer '1.running_var' is torch.float64"),
                                (shared, ValueError, "'bias' and 'weight' share memory"),
                                (strided, TypeError, "parameter 'weight' is not contiguous"),
                                (batchnorm_model().state_dict(), TypeError, "does not say which entries are parameters")]:
        try:
            tether.torch.CenterService(model, strategy="adag")
        except error as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{words}: accepted")


@case
def tied_weights_are_exchanged_once_and_both_keys_come_back():
    def tied():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False))
        model[1].weight = model[0].weight
        return model
    center = tether.torch.CenterService(tied(), strategy={"name": "averaging", "communication_window": 1})
    model = tied()
    worker = tether.torch.Worker(model.state_dict(keep_vars=True), center=center)  # a state_dict works too
    assert len(worker.parameters) == 1
    with torch.no_grad():
        model[0].weight.add_(1.0)
    worker.step(1)
    worker.finish()
    state = center.wait()
    assert set(state) == {"0.weight", "1.weight"} and torch.equal(state["0.weight"], state["1.weight"])
    fresh = tied()
    fresh.load_state_dict(state, strict=True)
    assert torch.equal(fresh[0].weight, model[0].weight)


@case
def a_short_batchnorm_cnn_run_with_worker_processes():
    # The center's complete state_dict (x~ and the averaged running statistics) loads and evaluates.
    example = Path(os.environ["TETHER_SOURCE_DIR"]) / "examples/python/batchnorm_cnn.py"
    out = subprocess.run([sys.executable, str(example), "--mode", "tether", "--strategy", "adag", "--workers", "2",
                          "--train-samples", "4000", "--min-accuracy", "0.65"],
                         capture_output=True, text=True, timeout=240, env=os.environ)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tether adag, 2 processes" in out.stdout, out.stdout


if __name__ == "__main__":
    sys.exit(main())
