#!/usr/bin/python3
"""The Python package over the C++ core: buffers written in place (no copies), a worker over a
list of arrays and tensors, snapshot() while workers train, a pause longer than the worker
timeout, overlapped exchanges, clear errors, tether.torch over a model's own tensors, and a
short Fashion-MNIST run of examples/python with worker processes over tcp://127.0.0.1
(a model's whole state, buffers included: torch_state_test.py). Run by
meson test with PYTHONPATH=build/python; the CUDA case runs where PyTorch sees a GPU."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

import tether
import tether.torch
from harness import case, main, run_threads

def run_workers(center, arrays, body):
    run_threads(len(arrays), lambda i: body(i, center.connect_worker(arrays[i])))


@case
def a_numpy_this_build_reads_wrongly_is_refused_at_import():
    """pybind11 before 2.12 (Debian 12's) reads NumPy 2 arrays with NumPy 1's layout: every element
    would read as the first. Importing tether under NumPy 2 must fail by name, not run on garbage.
    NumPy 2 is not installed here: its version is faked before the import, which is all the check reads."""
    code = "import numpy; numpy.__version__ = '2.1.0'; import tether"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    if tuple(tether._tether.pybind11_version) >= (2, 12):
        assert done.returncode == 0, done.stderr  # a pybind11 that reads NumPy 2
        return
    assert done.returncode != 0, "tether imported under NumPy 2 with a pybind11 that cannot read its arrays"
    assert "reads only NumPy 1 arrays, but NumPy 2.1.0 is imported here" in done.stderr, done.stderr
    assert "pip install 'numpy<2'" in done.stderr, done.stderr


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
    for bad, words in [(np.zeros(4, np.float64), "float32"), (np.zeros(8, np.float32)[::2], "C-contiguous"),
                       ([np.zeros(2, np.float32), torch.zeros(2, dtype=torch.float64)], "parameter 1"),
                       (torch.zeros(4, 2).t(), "not contiguous"), ([np.zeros(4, np.float32), "x"], "got str")]:
        try:
            center.connect_worker(bad)
        except TypeError as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{bad!r} accepted")
    shared = np.zeros(4, np.float32)
    try:
        center.connect_worker([shared[:3], shared[2:]])
    except tether.TetherError as e:
        assert "overlap" in str(e), e
    else:
        raise AssertionError("overlapping buffers accepted")
    try:
        tether.CenterService(np.zeros(4, np.float32), strategy={"name": "adag", "moving_rate": 0.5}, workers=2)
    except RuntimeError as e:
        assert "moving_rate" in str(e), e
    else:
        raise AssertionError("adag with a moving rate accepted")
    for name, value, words in [("servers", "3", "servers: expected int, got str '3'"),
                               ("insecure", 1, "insecure: expected bool, got int 1"),
                               ("servers", True, "servers: expected int, got bool True"),
                               ("overlap_exchange", True, "overlap_exchange: replaced by the strategy's overlap_steps")]:
        try:
            tether.CenterService(np.zeros(4, np.float32), strategy="adag", workers=2, **{name: value})
        except TypeError as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{name}={value!r} accepted")
    try:
        tether.CenterService(np.zeros(4, np.float32), strategy="adag", workers=2, reply_timeout=5)
    except TypeError as e:
        assert "reply_timeout" in str(e), e
    else:
        raise AssertionError("an unknown option accepted")
    worker = center.connect_worker(np.zeros(4, np.float32))  # lets the center finish
    worker.step(1)  # one update reaches x~: a run that trained nothing fails its wait()
    worker.finish()
    center.wait()


@case
def a_worker_over_a_list_of_arrays_and_cpu_tensors_writes_each_in_place():
    # x~(0) = 0..5 over an array of 2 and a tensor of 4; averaging with window 1, worker w adds
    # w + 1 per step: after 2 steps x~_j = j + 3, each buffer holding its own slice.
    center = tether.CenterService(np.arange(6, dtype=np.float32),
                                  strategy={"name": "averaging", "communication_window": 1}, workers=2)
    buffers = [[np.zeros(2, np.float32), torch.zeros(4)] for _ in range(2)]
    addresses = [(a.ctypes.data, t.data_ptr()) for a, t in buffers]

    def body(i, worker):
        a, t = buffers[i]
        assert list(a) == [0, 1] and t.tolist() == [2, 3, 4, 5]  # joined: x~(0), slice by slice
        for _ in range(2):
            a += i + 1
            t += i + 1
            assert worker.step(1) is True
        worker.finish()
    run_workers(center, buffers, body)
    assert np.array_equal(center.wait(), np.arange(6, dtype=np.float32) + 3)
    for (a, t), (pa, pt) in zip(buffers, addresses):
        assert (a.ctypes.data, t.data_ptr()) == (pa, pt)  # the same memory, written in place
        assert list(a) == [3, 4] and t.tolist() == [5, 6, 7, 8], (a, t)


@case
def snapshot_and_stats_while_workers_train_and_a_pause_longer_than_the_timeout():
    # downpour, window 1, +1 per step: a snapshot between two updates has x~ = x~(0) + version.
    center = tether.CenterService(np.zeros(3, np.float32), strategy={"name": "downpour", "communication_window": 1},
                                  workers=2, worker_timeout_ms=1000, heartbeat_ms=250)
    seen = []
    training = threading.Event()
    training.set()

    def read():
        while training.is_set():
            snap = center.snapshot()
            seen.append((snap.version, bool(np.all(snap.x == snap.version)), center.stats()["updates_applied"]))
            time.sleep(0.01)
    reader = threading.Thread(target=read)
    reader.start()

    def body(i, worker):
        for s in range(3):
            arrays[i] += 1
            worker.step(1)
            if i == 0 and s == 1:
                time.sleep(2.5)  # "validation" for 2.5x worker_timeout_ms: tether heartbeats meanwhile
        worker.finish()
    arrays = [np.zeros(3, np.float32), np.zeros(3, np.float32)]
    run_workers(center, arrays, body)
    training.clear()
    reader.join()
    assert len(seen) > 10 and all(consistent for _, consistent, _ in seen), seen[:5]
    assert [v for v, _, _ in seen] == sorted(v for v, _, _ in seen)
    final = center.snapshot()
    assert final.version == 6 and np.array_equal(final.x, np.full(3, 6, np.float32)), final
    stats = center.stats()
    assert stats["workers_lost"] == 0 and stats["workers_finished"] == 2, stats


@case
def overlapped_exchanges_keep_every_local_step():
    center = tether.CenterService(np.zeros(4, np.float32),
                                  strategy={"name": "downpour", "communication_window": 2, "overlap_steps": 2}, workers=2)
    arrays = [np.zeros(4, np.float32), np.zeros(4, np.float32)]

    def body(i, worker):
        for _ in range(5):
            arrays[i] += 1
            worker.step(1)
        report = worker.finish()
        assert report["exchanges"] == 3, report  # steps 2 and 4 overlapped, step 5 at finish()
    run_workers(center, arrays, body)
    assert np.array_equal(center.wait(), np.full(4, 10, np.float32))


@case
def async_diloco_takes_an_outer_step_on_each_pseudo_gradient_as_it_arrives():
    # Outer SGD at 0.5: each arrival moves x~ by half the worker's change since it pulled, in any
    # order. Worker i adds 1 + i per step for 4 steps (windows of 2): x~ ends at 0.5 (4 + 8) = 6.
    strategy = {"name": "async-diloco", "communication_window": 2, "outer": "sgd", "outer_learning_rate": 0.5}
    center = tether.CenterService(np.zeros(4, np.float32), strategy=strategy, workers=2)
    arrays = [np.zeros(4, np.float32), np.zeros(4, np.float32)]

    def body(i, worker):
        for _ in range(4):
            arrays[i] += 1.0 + i
            worker.step(1)
        assert worker.finish()["exchanges"] == 2
    run_workers(center, arrays, body)
    assert np.array_equal(center.wait(), np.full(4, 6.0, np.float32))
    assert center.stats()["updates_applied"] == 4, center.stats()


@case
def servers_and_codecs_from_python_with_workers_connecting_by_address():
    # As a process serving workers over tcp should (docs/embedding.md): glibc keeps freed memory.
    assert tether.keep_freed_memory_mapped() is True
    options = dict(strategy={"name": "downpour", "communication_window": 1}, workers=2, servers=3, codec="bf16")
    center = tether.CenterService(np.zeros(10, np.float32), address=",".join(["tcp://127.0.0.1:*"] * 3), **options)
    addresses = center.address.split(",")
    assert len(addresses) == 3 and all(a.startswith("tcp://127.0.0.1:") for a in addresses), center.address
    arrays = [np.zeros(10, np.float32), np.zeros(10, np.float32)]

    def work(i):
        worker = tether.connect(center.address, arrays[i], **options)
        arrays[i] += 1.0  # exact in bf16: each worker's update adds 1 to every range of x~
        assert worker.step(1) is True
        worker.finish()
    run_threads(2, work)
    assert np.array_equal(center.wait(), np.full(10, 2.0, np.float32))
    stats = center.stats()
    assert stats["updates_applied"] == 2 and stats["rejected_messages"] == 0, stats
    for wrong, words in [(dict(options, servers=1), "servers is 1"), (dict(options, codec="fp8"), "fp8")]:
        try:
            tether.connect(center.address, np.zeros(10, np.float32), join_timeout_ms=500, **wrong)
        except (RuntimeError, ValueError) as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{wrong} accepted")


@case
def curve_keys_from_launcher_keys_admit_the_ranks_and_no_keys_beyond_loopback_is_refused():
    try:
        tether.CenterService(np.zeros(4, np.float32), address="tcp://198.18.0.1:*")
    except tether.TetherError as e:
        assert "binding beyond loopback without CURVE keys" in str(e) and "ServiceOptions.insecure" in str(e), e
    else:
        raise AssertionError("a center beyond loopback without keys started")
    old = os.environ.get("TETHER_SECRET")
    os.environ["TETHER_SECRET"] = "ab" * 32  # as `export TETHER_SECRET=$(tether keygen --secret)` sets it
    try:
        rank0, rank1 = tether.launcher_keys(0, "job"), tether.launcher_keys(1, "job")
    finally:
        if old is None:
            del os.environ["TETHER_SECRET"]
        else:
            os.environ["TETHER_SECRET"] = old
    assert rank0 == rank1 and len(rank0["center_public_key"]) == 40, rank0
    center = tether.CenterService(np.zeros(4, np.float32), workers=1, address="tcp://127.0.0.1:*", **rank0)
    try:  # no keys: the CURVE handshake fails, so no answer to its settings request (no strategy given)
        tether.connect(center.address, np.zeros(4, np.float32), join_timeout_ms=500)
    except tether.TetherError as e:
        assert f"no answer from the server at {center.address}" in str(e) and "settings" in str(e), e
    else:
        raise AssertionError("a worker without keys joined")
    x = np.zeros(4, np.float32)
    worker = tether.connect(center.address, x, **rank1)
    x += 1.0
    worker.step(1)
    worker.finish()
    center.wait()
    stats = center.stats()
    assert stats["workers_finished"] == 1 and stats["updates_applied"] == 1, stats


@case
def torch_worker_trains_the_models_own_tensors():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # before the Worker: fine now
    pointers = [p.data_ptr() for p in model.parameters()]
    initial = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy() + 1.0
    center = tether.CenterService(initial, strategy={"name": "averaging", "communication_window": 1}, workers=1)
    worker = tether.torch.Worker(model, center=center)
    assert np.allclose(torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy(), initial)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    assert worker.step(1) is True
    worker.finish()
    final = center.wait()
    assert [p.data_ptr() for p in model.parameters()] == pointers  # the model's own tensors, in place
    assert np.allclose(torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy(), final)
    assert not np.allclose(final, initial)  # the optimizer's step reached x~


@case
def a_torch_loop_on_worker_running_stops_at_the_budget_and_the_fast_worker_takes_more():
    """budget_samples: two ranks' loops `while worker.running:` end once the center has counted
    the budget, within a window per worker of it; the rank that sleeps 3 ms a step trains less."""
    torch.manual_seed(0)
    models = [torch.nn.Linear(3, 2) for _ in range(2)]
    center = tether.torch.CenterService(models[0], strategy={"name": "adag", "communication_window": 4}, workers=2,
                                        budget_samples=3000)
    samples = [0, 0]

    def train(i):
        model = models[i]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        worker = tether.torch.Worker(model, center=center.service)
        while worker.running:
            optimizer.zero_grad()
            model(torch.ones(8, 3)).sum().backward()
            optimizer.step()
            if i == 1:
                time.sleep(0.003)
            worker.step(8)
        samples[i] = worker.finish()["samples"]
        assert not worker.running
    run_threads(2, train)
    center.wait()
    stats = center.service.stats()
    assert 3000 <= sum(samples) <= 3000 + 2 * 4 * 8, samples
    assert samples[0] > 2 * samples[1], samples
    assert sorted(int(v) for v in stats["worker_samples"].values()) == sorted(samples), (stats["worker_samples"], samples)


@case
def a_dataloader_on_worker_batches_trains_each_row_once_and_the_fast_rank_takes_more():
    """Leases: two ranks' DataLoaders over worker.batches() train every row of the data set
    exactly once between them (epochs=2: each row twice, once a pass), the block a rank trains
    coming from the center as it asks; the rank that sleeps 3 ms a step trains far less."""
    torch.manual_seed(0)
    rows = 640
    data = torch.utils.data.TensorDataset(torch.randn(rows, 3), torch.arange(rows))
    models = [torch.nn.Linear(3, 2) for _ in range(2)]
    center = tether.torch.CenterService(models[0], strategy={"name": "adag", "communication_window": 4}, workers=2)
    seen = [[], []]

    def train(i):
        model = models[i]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        worker = tether.torch.Worker(model, center=center.service)
        for inputs, index in torch.utils.data.DataLoader(data, batch_sampler=worker.batches(rows, 8, epochs=2)):
            optimizer.zero_grad()
            model(inputs).sum().backward()
            optimizer.step()
            if i == 1:
                time.sleep(0.003)
            seen[i] += index.tolist()
            worker.step(len(index))
        worker.finish()
    run_threads(2, train)
    center.wait()
    assert sorted(seen[0] + seen[1]) == sorted(list(range(rows)) * 2), (len(seen[0]), len(seen[1]))
    assert len(seen[0]) > 2 * len(seen[1]), (len(seen[0]), len(seen[1]))
    assert center.service.stats()["leases"]["granted"] == 2 * rows


@case
def cuda_tensors_through_their_data_pointers():
    if not torch.cuda.is_available():
        print("     (skipped: PyTorch sees no GPU)")
        return
    center = tether.CenterService(np.zeros(6, np.float32), strategy={"name": "downpour", "communication_window": 1},
                                  workers=1)
    a, b = torch.zeros(2, device="cuda"), torch.zeros(4, device="cuda")
    worker = tether.WorkerClient(center, [a, b])
    for _ in range(3):
        a += 1
        b += 2
        worker.step(1)
    worker.finish()
    assert np.array_equal(center.wait(), np.array([3, 3, 6, 6, 6, 6], np.float32))


@case
def a_short_fashion_mnist_run_with_worker_processes():
    example = Path(os.environ["TETHER_SOURCE_DIR"]) / "examples/python/fashion_mnist.py"
    for strategy in ("adag", "aeasgd"):
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp) / "run"
            out = subprocess.run([sys.executable, str(example), "--strategy", strategy, "--workers", "2", "--epochs", "1",
                                  "--train-samples", "6000", "--min-accuracy", "0.55", "--run-dir", str(run_dir)],
                                 capture_output=True, text=True, timeout=240, env=os.environ)
            assert out.returncode == 0, out.stdout + out.stderr
            assert f"tether {strategy}, 2 worker processes" in out.stdout, out.stdout
            # --run-dir: each worker's epoch row, and the summary of a run that succeeded.
            rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            assert sorted(r["worker"] for r in rows if "test_accuracy" in r) == [0, 1], rows
            assert json.loads((run_dir / "summary.json").read_text())["run_failed"] is False


if __name__ == "__main__":
    sys.exit(main())
