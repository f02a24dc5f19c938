#!/usr/bin/python3
"""The Python package over the C++ core: buffers written in place (no copies), a worker over a
list of arrays and tensors, snapshot() while workers train, a pause longer than the worker
timeout, overlapped exchanges, clear errors, tether.torch over a model's own tensors and its
whole state (BatchNorm buffers averaged, a complete state_dict), and short Fashion-MNIST runs
of examples/python with worker processes over tcp://127.0.0.1. Run by
meson test with PYTHONPATH=build/python; the CUDA case runs where PyTorch sees a GPU."""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

import tether
import tether.torch

CASES = []


def case(f):
    CASES.append(f)
    return f


def run_threads(count, body):
    """body(i) on `count` threads; fails naming each thread's exception."""
    errors = []

    def work(i):
        try:
            body(i)
        except Exception as e:  # noqa: BLE001 (reported below, with its thread)
            errors.append(f"worker {i}: {e!r}")
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def run_workers(center, arrays, body):
    run_threads(len(arrays), lambda i: body(i, center.connect_worker(arrays[i])))


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
                               ("overlap_exchange", 1, "overlap_exchange: expected bool, got int 1"),
                               ("servers", True, "servers: expected int, got bool True")]:
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
                                  workers=2, worker_timeout_ms=1000)
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
    center = tether.CenterService(np.zeros(4, np.float32), strategy={"name": "downpour", "communication_window": 2},
                                  workers=2, overlap_exchange=True)
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
    for wrong, words in [(dict(options, servers=1), "servers is 1"), (dict(options, codec="int4"), "int4")]:
        try:
            tether.connect(center.address, np.zeros(10, np.float32), join_timeout_ms=500, **wrong)
        except (RuntimeError, ValueError) as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{wrong} accepted")


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


@case
def a_short_batchnorm_cnn_run_with_worker_processes():
    # The center's complete state_dict (x~ and the averaged running statistics) loads and evaluates.
    example = Path(os.environ["TETHER_SOURCE_DIR"]) / "examples/python/batchnorm_cnn.py"
    out = subprocess.run([sys.executable, str(example), "--mode", "tether", "--strategy", "adag", "--workers", "2",
                          "--train-samples", "4000", "--min-accuracy", "0.65"],
                         capture_output=True, text=True, timeout=240, env=os.environ)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tether adag, 2 processes" in out.stdout, out.stdout


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
