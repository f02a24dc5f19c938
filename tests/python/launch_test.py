#!/usr/bin/python3
"""Launchers and failures from Python: Worker.from_env under torchrun's variables (set by the
test: Debian's torchrun does not run on Python 3.11), rank 0 hosting the center and training,
shards following the rank, the ranks' CURVE keys from TETHER_SECRET or from the secret rank 0
writes for the job id (none of either: refused, saying how); a wrong world size and a missing center failing within seconds,
naming what was expected; CenterService.wait() raising on a failed run; step() after finish()
and against a center that is gone; a worker taking the center's strategy; a C++ strategy
plugin loaded with tether.load_plugin. Run by meson test with PYTHONPATH=build/python and
TETHER_PLUGIN (tests/packaging/damped_sum_plugin.cpp, built)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tether
from harness import case, main, run_threads
from launch_support import LAUNCHER_VARIABLES, SECRET, free_port, free_ports, results, torchrun_env

RANK_SCRIPT = str(Path(__file__).with_name("launch_rank.py"))
def start_ranks(envs, strategy="-", workers="-", *more):
    return [subprocess.Popen([sys.executable, RANK_SCRIPT, strategy if i == 0 else "-", workers, *more], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i, env in enumerate(envs)]


class Environment:
    """os.environ with `values` set and every launcher variable else unset, for this block."""

    def __init__(self, **values):
        self.values = values

    def __enter__(self):
        self.saved = dict(os.environ)
        for k in LAUNCHER_VARIABLES:
            os.environ.pop(k, None)
        os.environ.update(self.values)

    def __exit__(self, *_):
        os.environ.clear()
        os.environ.update(self.saved)


@case
def read_launcher_takes_torchrun_variables_and_the_port_after_master_port():
    with Environment(RANK="2", WORLD_SIZE="4", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2", MASTER_ADDR="10.0.0.7",
                     MASTER_PORT="29400"):
        launcher = tether.read_launcher()
    assert (launcher.name, launcher.rank, launcher.world_size, launcher.local_rank, launcher.local_world_size) == \
        ("torchrun", 2, 4, 0, 2), launcher
    assert launcher.center_address() == "tcp://10.0.0.7:29401", launcher.center_address()
    assert launcher.workers(center_trains=True) == 4 and launcher.workers(center_trains=False) == 3
    with Environment():
        assert tether.read_launcher() is None


@case
def three_ranks_under_torchrun_variables_rank_0_hosts_the_center_and_trains():
    port = free_port()
    ranks = results(start_ranks([torchrun_env(r, 3, port) for r in range(3)], strategy="adag"))
    for code, result, stderr in ranks:
        assert code == 0, (result, stderr[-2000:])
    by_rank = {result["rank"]: result for _, result, _ in ranks}
    assert sorted(by_rank) == [0, 1, 2], by_rank
    assert all(r["world_size"] == 3 and r["launcher"] == "torchrun" for r in by_rank.values())
    assert [r["has_center"] for _, r in sorted(by_rank.items())] == [True, False, False]
    # Every sample in exactly one rank's shard, rank r taking the r-th third.
    assert [by_rank[r]["indices"] for r in range(3)] == [list(range(0, 20)), list(range(20, 40)),
                                                         list(range(40, 60))], by_rank
    stats = by_rank[0]["stats"]
    assert stats["workers_finished"] == 3 and stats["workers_lost"] == 0, stats
    assert stats["updates_applied"] > 0, stats


@case
def worker_ids_are_the_ranks_whatever_order_they_join_in():
    # Rank 2 joins before rank 1: each still gets its rank as its worker id (the place it asks
    # for), so the center's messages ("worker 1 lost") name the rank; without rank 0 training,
    # rank r is worker r - 1.
    for more, ids in (((), [0, 1, 2]), (("center-only",), [-1, 0, 1])):
        port = free_port()
        envs = [torchrun_env(r, 3, port) for r in range(3)]
        processes = start_ranks(envs[:1], "adag", "-", *more)
        time.sleep(1)
        processes += start_ranks(envs[2:], "-", "-", *more)
        time.sleep(1.5)
        processes.insert(1, start_ranks(envs[1:2], "-", "-", *more)[0])
        ranks = results(processes)
        for code, result, stderr in ranks:
            assert code == 0, (more, result, stderr[-2000:])
        assert [result["id"] for _, result, _ in sorted(ranks, key=lambda r: r[1]["rank"])] == ids, (more, ranks)


@case
def rank_0_hosting_the_center_only_leaves_the_data_to_the_others():
    port = free_port()
    ranks = results(start_ranks([torchrun_env(r, 3, port) for r in range(3)], "adag", "-", "center-only"))
    for code, result, stderr in ranks:
        assert code == 0, (result, stderr[-2000:])
    by_rank = {result["rank"]: result for _, result, _ in ranks}
    assert [by_rank[r]["trains"] for r in range(3)] == [False, True, True], by_rank
    assert [by_rank[r]["indices"] for r in range(3)] == [[], list(range(0, 30)), list(range(30, 60))], by_rank
    stats = by_rank[0]["stats"]
    assert stats["workers_finished"] == 2 and stats["workers_lost"] == 0, stats


@case
def without_tether_secret_the_ranks_share_the_secret_rank_0_writes_for_torchruns_run_id_and_it_goes_after():
    home = tempfile.mkdtemp(prefix="tether-launch-")
    try:
        port = free_port()
        envs = [torchrun_env(r, 3, port, secret=None, TORCHELASTIC_RUN_ID=f"job-{port}", HOME=home) for r in range(3)]
        ranks = results(start_ranks(envs, strategy="adag"))
        for code, result, stderr in ranks:
            assert code == 0, (result, stderr[-2000:])
        stats = next(r for _, r, _ in ranks if r["rank"] == 0)["stats"]
        assert stats["workers_finished"] == 3 and stats["workers_lost"] == 0, stats
        # Rank 0's center.wait() removed the secret once the run was over.
        assert not Path(home, ".tether", f"run-job-{port}").exists(), list(Path(home, ".tether").iterdir())
    finally:
        shutil.rmtree(home, ignore_errors=True)


@case
def a_rank_with_neither_tether_secret_nor_a_job_id_fails_at_once_saying_how_to_set_it():
    home = tempfile.mkdtemp(prefix="tether-launch-")
    try:
        started = time.monotonic()
        code, result, stderr = results(start_ranks([torchrun_env(1, 2, free_port(), secret=None, HOME=home)]),
                                       timeout=30)[0]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert code == 1, (result, stderr[-2000:])
    assert time.monotonic() - started < 10, time.monotonic() - started
    assert "export TETHER_SECRET=$(tether keygen --secret)" in result["error"], result
    assert "insecure" in result["error"], result


@case
def a_world_size_that_disagrees_fails_within_seconds_naming_both_values():
    port = free_port()
    with Environment(**{k: v for k, v in torchrun_env(0, 3, port).items() if k in LAUNCHER_VARIABLES}):
        started = time.monotonic()
        try:
            import torch
            import tether.torch
            tether.torch.Worker.from_env(torch.nn.Linear(2, 1), strategy="adag", workers=2)
        except tether.TetherError as e:
            message = str(e)
        else:
            raise AssertionError("workers=2 accepted with WORLD_SIZE=3")
    assert time.monotonic() - started < 5, time.monotonic() - started
    for words in ("2", "3", "WORLD_SIZE"):
        assert words in message, message
    # Ranks that disagree among themselves: rank 0 says 2, rank 1 says 3; rank 1 is refused at
    # its hello, naming the setting, long before any join timeout.
    # (Timed from rank 1's from_env(), which also waits for rank 0 to start listening.)
    ranks = start_ranks([torchrun_env(0, 2, port), torchrun_env(1, 3, port)], strategy="adag")
    code, result, stderr = results(ranks[1:], timeout=30)[0]
    ranks[0].kill()
    ranks[0].communicate()
    assert code == 1, (result, stderr[-2000:])
    assert "cluster.workers: center 2, worker 3" in result["error"], result
    assert result["seconds"] < 5, result


@case
def a_missing_center_fails_within_seconds_naming_its_address():
    port = free_port()
    code, result, stderr = results(start_ranks([torchrun_env(1, 2, port)]), timeout=30)[0]
    assert code == 1, (result, stderr[-2000:])
    assert result["seconds"] < 5, result
    assert f"tcp://127.0.0.1:{port}" in result["error"] and "rank 0" in result["error"], result


@case
def wait_raises_when_a_run_lost_its_workers_or_trained_nothing():
    # No update reached x~: the worker joined and left without a step.
    center = tether.CenterService(np.zeros(3, np.float32), strategy="downpour", workers=1)
    center.connect_worker(np.zeros(3, np.float32)).finish()
    try:
        center.wait()
    except tether.RunFailedError as e:
        assert "no update reached x~" in str(e), e
    else:
        raise AssertionError("wait() returned for a run that trained nothing")
    # One of two workers lost (its process died without a goodbye), more than max_failed_share.
    center = tether.CenterService(np.zeros(3, np.float32), strategy={"name": "downpour", "communication_window": 1},
                                  workers=2, address="tcp://127.0.0.1:*", worker_timeout_ms=1000, heartbeat_ms=250,
                                  max_failed_share=0.25)
    crash = ("import os, sys, numpy as np, tether\n"
             "x = np.ones(3, np.float32)\n"
             "w = tether.connect(sys.argv[1], x, worker_timeout_ms=1000, heartbeat_ms=250)\n"
             "x += 1; w.step(1); os._exit(3)\n")
    dying = subprocess.Popen([sys.executable, "-c", crash, center.address])
    x = np.zeros(3, np.float32)
    worker = center.connect_worker(x)
    x += 1.0
    worker.step(1)
    assert dying.wait(timeout=60) == 3
    worker.finish()
    try:
        center.wait()
    except tether.RunFailedError as e:
        assert isinstance(e, tether.TetherError)
        assert "1 of 2 workers failed" in str(e) and "max_failed_share (0.25)" in str(e), e
    else:
        raise AssertionError("wait() returned for a run that lost half its workers")
    assert center.stats()["workers_lost"] == 1, center.stats()
    assert center.snapshot().version >= 2  # the final state is still there


@case
def step_after_finish_raises_naming_what_happened():
    center = tether.CenterService(np.zeros(3, np.float32), strategy="downpour", workers=1)
    worker = center.connect_worker(np.zeros(3, np.float32))
    worker.step(1)
    worker.finish()
    for call in (lambda: worker.step(1), worker.finish):
        try:
            call()
        except tether.TetherError as e:
            assert "has finished" in str(e), e
        else:
            raise AssertionError("a finished worker stepped")
    center.wait()


@case
def a_worker_whose_center_is_gone_raises_from_step_within_the_timeout():
    serve = ("import sys, numpy as np, tether\n"
             "c = tether.CenterService(np.zeros(3, np.float32), strategy={'name': 'downpour', 'communication_window': 1},"
             " workers=1, address='tcp://127.0.0.1:*', worker_timeout_ms=1000, heartbeat_ms=250)\n"
             "print(c.address, flush=True); sys.stdin.read()\n")
    center = subprocess.Popen([sys.executable, "-c", serve], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        address = center.stdout.readline().strip()
        x = np.zeros(3, np.float32)
        worker = tether.connect(address, x, worker_timeout_ms=1000, heartbeat_ms=250, center_restart_ms=0)
        x += 1.0
        assert worker.step(1)
    finally:
        center.kill()
        center.wait()
    started = time.monotonic()
    try:
        for _ in range(100000):
            x += 1.0
            worker.step(1)
    except tether.TetherError as e:
        message = str(e)
    else:
        raise AssertionError("steps went on against a dead center")
    elapsed = time.monotonic() - started
    assert elapsed < 5, (elapsed, message)
    assert address in message or "center" in message, message


@case
def a_worker_takes_the_centers_strategy_and_a_different_one_is_named_first():
    center = tether.CenterService(np.zeros(4, np.float32), strategy={"name": "adag", "communication_window": 2},
                                  workers=1, address="tcp://127.0.0.1:*")
    try:
        tether.connect(center.address, np.zeros(4, np.float32), strategy="aeasgd", workers=1)
    except tether.TetherError as e:
        assert 'settings differ: strategy.name: center "adag", worker "aeasgd"' in str(e), e
    else:
        raise AssertionError("an aeasgd worker joined an adag center")
    x = np.zeros(4, np.float32)
    worker = tether.connect(center.address, x)  # no strategy, no workers: the center's
    for _ in range(4):
        x += 1.0
        worker.step(1)
    assert worker.finish()["exchanges"] >= 2
    center.wait()
    assert center.stats()["workers_finished"] == 1


@case
def a_cpp_strategy_plugin_loads_from_python_and_runs_two_workers():
    plugin = os.environ["TETHER_PLUGIN"]
    try:
        tether.CenterService(np.zeros(2, np.float32), strategy="damped-sum", workers=2)
    except tether.TetherError as e:
        assert "damped-sum" in str(e), e
    else:
        raise AssertionError("damped-sum known before its plugin was loaded")
    tether.load_plugin(plugin)
    center = tether.CenterService(np.zeros(2, np.float32), strategy="damped-sum", workers=2)
    arrays = [np.zeros(2, np.float32), np.zeros(2, np.float32)]

    # Each worker adds 2 once; damped-sum scales each commit by 1 / workers: x~ = 2 (plain
    # downpour would give 4).
    def work(i):
        w = center.connect_worker(arrays[i])
        arrays[i] += 2.0
        w.step(1)
        w.finish()
    run_threads(2, work)
    assert np.allclose(center.wait(), [2.0, 2.0]), center.snapshot()
    try:
        tether.load_plugin("/nonexistent/plugin.so")
    except tether.TetherError as e:
        assert "/nonexistent/plugin.so" in str(e), e
    else:
        raise AssertionError("a missing plugin loaded")


REPLICA_SCRIPT = str(Path(__file__).with_name("replica_rank.py"))


def replica_group_job(world, size, strategy, slurm=False, dies=None, servers=1):
    """`world` ranks in groups of `size` (replica_rank.py): DDP inside a group, tether across.
    Under torchrun's variables, or srun's (no MASTER_ADDR / MASTER_PORT: torch.distributed's
    store then goes after the center's port)."""
    envs = []
    # Under srun the store takes the port after the center's: both must be free.
    store_port, center_port = free_port(), free_ports(2) if slurm else free_port()
    for rank in range(world):
        if slurm:
            env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
            env.update(SLURM_PROCID=str(rank), SLURM_NTASKS=str(world), SLURM_LOCALID=str(rank),
                       SLURM_NTASKS_PER_NODE=str(world), TETHER_CENTER=f"127.0.0.1:{center_port}", TETHER_SECRET=SECRET)
        else:
            env = torchrun_env(rank, world, center_port, TETHER_PORT=str(center_port))
            env["MASTER_PORT"] = str(store_port)  # torch.distributed's store; the center has TETHER_PORT
        env["REPLICA_SERVERS"] = str(servers)
        envs.append(env)
    processes = [subprocess.Popen([sys.executable, REPLICA_SCRIPT, strategy if rank == 0 else "-", str(size)] +
                                  ([dies] if dies else []), env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank, env in enumerate(envs)]
    outputs = [p.communicate(timeout=180) for p in processes]
    return [(p.returncode, stdout, stderr) for p, (stdout, stderr) in zip(processes, outputs)]


@case
def replica_groups_ddp_inside_tether_across_the_center_counts_groups_and_each_group_stays_equal():
    check_replica_groups(replica_group_job(4, 2, "adag"))


@case
def replica_groups_under_srun_put_torch_distributed_after_the_centers_port():
    check_replica_groups(replica_group_job(4, 2, "adag", slurm=True))


def check_replica_groups(job):
    out = {}
    for code, stdout, stderr in job:
        assert code == 0 and stdout.strip(), f"a rank exited {code}; stderr: {stderr[-2000:]}"
        result = json.loads(stdout.strip().splitlines()[-1])
        out[result["rank"]] = result
    # Ranks 0 and 2 lead groups {0, 1} and {2, 3}; only they are tether workers.
    assert [out[r]["leader"] for r in range(4)] == [0, 0, 2, 2], out
    assert [out[r]["id"] >= 0 for r in range(4)] == [True, False, True, False], out
    stats = out[0]["stats"]
    assert stats["workers_joined"] == 2 and stats["workers_finished"] == 2 and stats["workers_lost"] == 0, stats
    # Every sample in exactly one rank's part; a group's parts are one contiguous half.
    assert sorted(i for r in range(4) for i in out[r]["indices"]) == list(range(160)), out
    assert out[0]["indices"] + out[1]["indices"] == list(range(80)), out
    for leader, member in ((0, 1), (2, 3)):
        a, b = out[leader], out[member]
        # The welcome (x~, b~) reached the whole group although each rank started elsewhere;
        # both saw the leader's exchanges (adag, window 5: after steps 5 and 10 of 10) and were
        # equal after each, and ended equal, BatchNorm's running statistics and counter included.
        assert a["joined_equal"] and b["joined_equal"], (a, b)
        assert a["exchanges"] == b["exchanges"] == 2, (a, b)
        assert a["equal_after_exchanges"] == b["equal_after_exchanges"] == [True, True], (a, b)
        assert a["final"] == b["final"], (a, b)
    # The two groups trained different halves: they differ, and the center is neither.
    assert out[0]["final"] != out[2]["final"], out
    assert out[0]["center_final"] not in (out[0]["final"], out[2]["final"]), out


@case
def replica_groups_with_streaming_diloco_stay_equal_when_a_late_reply_lands():
    # 2 fragments on 2 servers, window 5, replies 1 step late: fragment 1 goes out after steps 2
    # and 7, fragment 0 after 5 and 10; the replies land after 3, 8 and 6. step() says so on
    # each of those steps, and the leader's broadcast keeps its group equal after every step.
    strategy = json.dumps({"name": "diloco", "communication_window": 5, "fragments": 2, "overlap_steps": 1,
                           "outer_learning_rate": 1.0, "outer_momentum": 0.0})
    out = {}
    for code, stdout, stderr in replica_group_job(4, 2, strategy, servers=2):
        assert code == 0 and stdout.strip(), f"a rank exited {code}; stderr: {stderr[-2000:]}"
        result = json.loads(stdout.strip().splitlines()[-1])
        out[result["rank"]] = result
    stats = out[0]["stats"]
    assert stats["workers_joined"] == 2 and stats["workers_finished"] == 2, stats
    for leader, member in ((0, 1), (2, 3)):
        a, b = out[leader], out[member]
        assert a["exchanges"] == b["exchanges"] == 7, (a, b)  # steps 2, 3, 5, 6, 7, 8, 10
        assert a["equal_after_exchanges"] == b["equal_after_exchanges"] == [True] * 7, (a, b)
        assert a["equal_every_step"] == b["equal_every_step"] == [True] * 10, (a, b)
        assert a["final"] == b["final"], (a, b)


@case
def a_rank_that_dies_costs_its_group_its_place_and_the_other_group_finishes():
    # Rank 3 (of group {2, 3}) dies after 7 of its 10 steps, after its leader's first exchange.
    job = replica_group_job(4, 2, "adag", dies="3:7")
    codes = [code for code, _, _ in job]
    assert codes[3] == 3 and codes[2] != 0, [(c, e[-600:]) for c, _, e in job]
    # The leader fails with the group's own error: torch's (DDP's collective) stays torch's
    # RuntimeError, not a TetherError; tether's says which group gave up its place.
    assert "TetherError: [" not in job[2][2] and ("RuntimeError" in job[2][2] or "gives up its place" in job[2][2]), \
        job[2][2][-2000:]
    out = {}
    for rank in (0, 1):
        code, stdout, stderr = job[rank]
        assert code == 0, stderr[-2000:]
        out[rank] = json.loads(stdout.strip().splitlines()[-1])
    stats = out[0]["stats"]
    # The leader of the broken group is lost (no goodbye); the other group finished, equal.
    assert stats["workers_lost"] == 1 and stats["workers_finished"] == 1, stats
    assert out[0]["final"] == out[1]["final"] and out[0]["equal_after_exchanges"] == [True, True], out


@case
def replica_groups_refuse_a_world_size_that_is_not_a_multiple_of_the_group_size():
    for code, stdout, stderr in replica_group_job(3, 2, "adag"):
        assert code != 0 and "the world size 3 is not a multiple of it" in stderr, stderr[-2000:]


if __name__ == "__main__":
    sys.exit(main())
