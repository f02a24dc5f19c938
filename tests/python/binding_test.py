#!/usr/bin/python3
"""The Python package over the C++ core: buffers written in place (no copies), clear errors,
tether.torch's flattened parameters, and a short Fashion-MNIST run of examples/python with
worker processes over tcp://127.0.0.1. Run by meson test with PYTHONPATH=build/python."""
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import torch

import tether
import tether.torch

CASES = []


def case(f):
    CASES.append(f)
    return f


def run_workers(center, arrays, body):
    errors = []

    def work(i):
        try:
            body(i, center.connect_worker(arrays[i]))
        except Exception as e:  # noqa: BLE001 (reported below, with its thread)
            errors.append(f"worker {i}: {e!r}")
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(arrays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@case
def averaging_writes_the_callers_arrays_in_place():
    center = tether.CenterService(np.zeros(5, np.float32), strategy={"name": "averaging", "communication_window": 1},
                                  workers=2)
    arrays = [np.zeros(5, np.float32), np.zeros(5, np.float32)]
    buffers = [a.ctypes.data for a in arrays]

    def body(i, worker):
        arrays[i][:] = 1.0 + 2.0 * i  # 1 and 3: the round's mean is 2
        assert worker.step(8) is True
        worker.finish()
    run_workers(center, arrays, body)
    final = center.wait()
    assert np.array_equal(final, np.full(5, 2.0, np.float32)), final
    for a, address in zip(arrays, buffers):
        assert a.ctypes.data == address  # the same memory, written in place
        assert np.array_equal(a, final), a
    stats = center.stats()
    assert stats["rounds"] == 1 and stats["workers_finished"] == 2, stats


@case
def bad_buffers_and_strategies_are_refused_with_what_is_wrong():
    center = tether.CenterService(np.zeros(4, np.float32), strategy="aeasgd", workers=1, join_timeout_ms=2000)
    for bad, words in [(np.zeros(4, np.float64), "float32"), (np.zeros(8, np.float32)[::2], "C-contiguous")]:
        try:
            center.connect_worker(bad)
        except TypeError as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{bad.dtype} / strided array accepted")
    try:
        tether.CenterService(np.zeros(4, np.float32), strategy={"name": "adag", "moving_rate": 0.5}, workers=2)
    except RuntimeError as e:
        assert "moving_rate" in str(e), e
    else:
        raise AssertionError("adag with a moving rate accepted")
    try:
        tether.CenterService(np.zeros(4, np.float32), strategy="adag", workers=2, reply_timeout=5)
    except TypeError as e:
        assert "reply_timeout" in str(e), e
    else:
        raise AssertionError("an unknown option accepted")
    worker = center.connect_worker(np.zeros(4, np.float32))  # lets the center finish
    worker.finish()
    center.wait()


@case
def torch_parameters_become_views_of_one_buffer():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    before = [p.detach().clone() for p in model.parameters()]
    flat = tether.torch.flatten_parameters(model)
    assert flat.numel() == sum(p.numel() for p in before) == 26
    offset = 0
    for p, old in zip(model.parameters(), before):
        assert torch.equal(p, old)  # same values
        assert p.data_ptr() == flat.data_ptr() + 4 * offset  # now a view of the flat buffer
        offset += p.numel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    assert not torch.equal(flat[:12].view(4, 3), before[0])  # the step landed in the flat buffer
    try:
        tether.torch.flatten_parameters(torch.nn.Linear(2, 2).double())
    except TypeError as e:
        assert "float32" in str(e)
    else:
        raise AssertionError("float64 parameters accepted")


@case
def a_short_fashion_mnist_run_with_worker_processes():
    example = Path(os.environ["TETHER_SOURCE_DIR"]) / "examples/python/fashion_mnist.py"
    for strategy in ("adag", "aeasgd"):
        out = subprocess.run([sys.executable, str(example), "--strategy", strategy, "--workers", "2", "--epochs", "1",
                              "--train-samples", "6000", "--min-accuracy", "0.55"],
                             capture_output=True, text=True, timeout=240, env=os.environ)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"tether {strategy}, 2 worker processes" in out.stdout, out.stdout


def main():
    failed = 0
    for f in CASES:
        try:
            f()
            print(f"ok   {f.__name__}")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {f.__name__}: {e!r}")
    print(f"{len(CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
