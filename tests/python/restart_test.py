#!/usr/bin/python3
"""A launcher's restart, as torchrun --max-restarts does it: every rank of a job killed with
SIGKILL mid-run, and the same script started again with TORCHELASTIC_RESTART_COUNT=1. With
run_dir, rank 0's center resumes by itself from its checkpoint, and each rank gets back the
optimizer and scheduler it registered (Worker.from_env(state=...)) and the step it had reached;
killed before the first checkpoint, the next attempt starts from x~(0), saying so. Run by meson
test with PYTHONPATH=build/python."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import case, main
from launch_support import free_port, free_ports, torchrun_env

RANK_SCRIPT = str(Path(__file__).with_name("restart_rank.py"))
STRATEGY = json.dumps({"name": "adag", "communication_window": 5})
STEPS = 900  # about 6 s of training a rank


def start(run, port, attempt, placement="center", ranks=(0, 1), world=2, *more, steps=STEPS, strategy=STRATEGY):
    processes = []
    for r in ranks:
        env = torchrun_env(r, world, port, TORCHELASTIC_RUN_ID="restart-job", TORCHELASTIC_RESTART_COUNT=str(attempt),
                           TETHER_CONNECT_TIMEOUT_MS="30000")  # rank 0 may be slow to start on a busy host
        processes.append(subprocess.Popen([sys.executable, RANK_SCRIPT, run, str(steps), placement, *more] +
                                          ([strategy] if r == 0 else []),
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return processes


def kill_when(processes, ready, seconds=30):
    """SIGKILL every rank once ready() holds (or after `seconds`, failing)."""
    deadline = time.monotonic() + seconds
    while not ready() and time.monotonic() < deadline:
        assert all(p.poll() is None for p in processes), "a rank ended before it was killed"
        time.sleep(0.05)
    for p in processes:
        p.send_signal(signal.SIGKILL)
    for p in processes:
        p.communicate()
    assert ready(), f"not ready within {seconds} s"


def lines(stdout):
    return [json.loads(line) for line in stdout.strip().splitlines() if line.startswith("{")]


@case
def a_restarted_attempt_resumes_the_center_and_gives_each_rank_its_state_and_step_back():
    for placement in ("center", "ranks"):
        restart_both_ranks(placement)


def restart_both_ranks(placement):
    with tempfile.TemporaryDirectory() as run:
        port = free_ports(2) if placement == "ranks" else free_port()
        # The center's checkpoint (with a server on every rank, each rank's server's) and each rank's state.
        kept = ([Path(run, "checkpoint-server-0.bin"), Path(run, "server-1", "checkpoint-server-1.bin")]
                if placement == "ranks" else [Path(run, "checkpoint.bin")]) + [Path(run, "rank-0.pt"), Path(run, "rank-1.pt")]
        kill_when(start(run, port, 0, placement), lambda: all(p.exists() for p in kept))
        again = start(run, port, 1, placement)
        outputs = [p.communicate(timeout=120) + (p.returncode,) for p in again]
        for stdout, stderr, code in outputs:
            assert code == 0, (placement, stdout, stderr[-3000:])
        for r, (stdout, stderr, _) in enumerate(outputs):
            first, last = lines(stdout)[0], lines(stdout)[-1]
            # Where it had got to: its step, its optimizer's moments and its scheduler's count.
            assert 0 < first["start_step"] < STEPS, (r, first)
            assert first["adam_steps"] and all(s == first["start_step"] for s in first["adam_steps"]), (r, first)
            assert first["scheduler_epoch"] == first["start_step"], (r, first)
            assert last["steps"] == STEPS, (r, last)
        summary = json.loads(Path(run, "summary.json").read_text())
        assert summary["run_failed"] is False, summary
        assert summary["resumed_at_version"] > 0, summary  # the center went on from its checkpoint
        if placement == "ranks":  # and rank 1's server from its own
            assert json.loads(Path(run, "server-1", "summary.json").read_text())["resumed_at_version"] > 0
        stats = lines(outputs[0][0])[-1]["stats"]
        assert stats["workers_finished"] == 2 and stats["workers_lost"] == 0, stats


@case
def a_rank_restarted_alone_takes_its_place_and_its_state_back_and_a_center_restarted_without_resume_is_refused():
    with tempfile.TemporaryDirectory() as run:
        port = free_port()
        processes = start(run, port, 0)
        kept = Path(run, "rank-1.pt")
        # Rank 1 killed and started again by a supervisor (the same command, no restart count):
        # the center says its place has trained, and the rank goes on from its kept state.
        deadline = time.monotonic() + 30
        while not kept.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        processes[1].send_signal(signal.SIGKILL)
        processes[1].communicate()
        again = start(run, port, 0, ranks=(1,))[0]
        stdout, stderr = again.communicate(timeout=120)
        assert again.returncode == 0, (stdout, stderr[-3000:])
        assert 0 < lines(stdout)[0]["start_step"] < STEPS, stdout
        assert lines(stdout)[-1]["steps"] == STEPS, stdout
        stdout0, stderr0 = processes[0].communicate(timeout=120)
        assert processes[0].returncode == 0, (stdout0, stderr0[-3000:])
    with tempfile.TemporaryDirectory() as run:
        port = free_port()
        processes = start(run, port, 0)
        while not Path(run, "checkpoint.bin").exists() and time.monotonic() < deadline + 30:
            time.sleep(0.05)
        # Rank 0 killed and started again alone, without resume: its center starts from x~(0).
        # Rank 1 must not go on training from there as if nothing had happened.
        processes[0].send_signal(signal.SIGKILL)
        processes[0].communicate()
        rank0 = start(run, port, 0, ranks=(0,))[0]
        stdout, stderr = processes[1].communicate(timeout=120)
        rank0.kill()
        rank0.communicate()
        assert processes[1].returncode == 1, (stdout, stderr[-3000:])
        assert "came back at version 0, without the run's state" in stderr, stderr[-3000:]


@case
def rank_0_killed_with_a_standby_on_rank_1_the_others_fail_over_and_rank_1_ends_the_run():
    # Rank 1 takes over from the center's checkpoint in the run directory they share (newer
    # than its copy), or from its own copy where the center wrote none yet.
    for checkpoint, source in ((1, "checkpoint.bin at version"), (60, "from its copy at version")):
        fail_over_to_the_standby(checkpoint, source)


def fail_over_to_the_standby(checkpoint_seconds, source):
    with tempfile.TemporaryDirectory() as run:
        port, standby = free_ports(3), free_port()
        processes = start(run, port, 0, "center", (0, 1, 2), 3, f"standby=tcp://127.0.0.1:{standby}",
                          f"checkpoint={checkpoint_seconds}", steps=3 * STEPS)  # about 15 s: the kill lands mid-run
        deadline = time.monotonic() + 30
        while not Path(run, "config.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(6)  # training, and a second copy of x~ on rank 1 (every standby_seconds, 5)
        processes[0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        processes[0].communicate()
        outputs = [p.communicate(timeout=120) + (p.returncode,) for p in processes[1:]]
        for stdout, stderr, code in outputs:
            assert code == 0, (stdout, stderr[-3000:])
            assert "failing over to the standby at tcp://127.0.0.1:" in stderr, (stdout, stderr[-3000:])
            assert lines(stdout)[-1]["steps"] == 3 * STEPS, stdout
        # Rank 1 is the center now: its worker.center.wait() gave the final model (loaded
        # strictly), and summary.json is its verdict.
        rank1 = lines(outputs[0][0])[-1]
        assert rank1["has_center"] is True, rank1
        assert "taking over at tcp://*:" in outputs[0][1] and source in outputs[0][1], outputs[0][1][-3000:]
        assert rank1["stats"]["workers_finished"] == 2 and rank1["stats"]["resumed_at_version"] > 0, rank1
        summary = json.loads(Path(run, "summary.json").read_text())
        assert summary["run_failed"] is False and summary["workers_finished"] == 2, summary
        assert time.monotonic() - killed < 60, "the survivors took as long as a lost run"


@case
def a_rank_killed_with_servers_on_the_ranks_rank_0_serves_its_range_on_and_the_run_finishes():
    # Not restarted: its range of x~ goes on at rank 0 from what rank 0's worker last pulled
    # there, asynchronous and synchronous rules alike.
    for strategy in (STRATEGY, json.dumps({"name": "diloco", "communication_window": 10})):
        lose_a_rank_and_its_server(strategy)


@case
def a_rank_with_a_server_restarted_without_resume_waits_for_rank_0_to_take_its_range_and_rejoins_as_a_worker():
    # The same command again 1 s after the kill, as a supervisor restarts it, with no resume: its
    # server must not serve x~(0) at the address the others hold.
    lose_a_rank_and_its_server(json.dumps({"name": "diloco", "communication_window": 10}), restart_after=1)


@case
def a_rank_with_a_server_killed_after_rank_0_finished_rank_0_still_serves_its_range():
    # Rank 0's worker no longer exchanges: the others' asking where the range went has rank 0
    # take it over from what its worker last pulled before it finished.
    lose_a_rank_and_its_server(json.dumps({"name": "diloco", "communication_window": 10}), rank0_steps=300)


@case
def rank_0_killed_with_servers_on_the_ranks_rank_1_serves_range_0_and_ends_the_run():
    # Rank 0 hosts server 0 and the directory and would end the run: rank 1 stands in, from what
    # its worker last pulled of range 0, and its worker.center.wait() gives x~ (b~ too: the model
    # has a BatchNorm) and the verdict.
    for strategy in (STRATEGY, json.dumps({"name": "diloco", "communication_window": 10})):
        lose_rank_0(strategy)
    # Rank 1's worker done before the kill: the others' asking where range 0 went has rank 1
    # take it over from what its worker last pulled; they train over 10 s longer, beyond
    # join_timeout_ms, and its final fetch waits for them, as rank 0's would.
    lose_rank_0(json.dumps({"name": "diloco", "communication_window": 10}), f"steps1={STEPS // 2}", "join=8000")


def lose_rank_0(strategy, *more):
    with tempfile.TemporaryDirectory() as run:
        port = free_ports(3)
        processes = start(run, port, 0, "ranks", (0, 1, 2), 3, "buffers", *more, steps=3 * STEPS, strategy=strategy)
        deadline = time.monotonic() + 30
        while not Path(run, "config.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(4)
        processes[0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        processes[0].communicate()
        outputs = [p.communicate(timeout=120) + (p.returncode,) for p in processes[1:]]
        for r, (stdout, stderr, code) in enumerate(outputs, start=1):
            assert code == 0, (strategy, more, stdout, stderr[-3000:])
            assert lines(stdout)[-1]["steps"] == (STEPS // 2 if r == 1 and more else 3 * STEPS), stdout
        assert "server 0 (rank 0) is silent; serving its range here at tcp://127.0.0.1:" in outputs[0][1], outputs[0][1][-3000:]
        assert "failing over to rank 1, serving server 0's range at tcp://127.0.0.1:" in outputs[1][1], outputs[1][1][-3000:]
        rank1 = lines(outputs[0][0])[-1]
        assert rank1["has_center"], rank1  # the model loaded strictly from its worker.center.wait()
        assert rank1["stats"]["workers_finished"] == 2 and rank1["stats"]["workers_lost"] == 1, rank1
        assert not lines(outputs[1][0])[-1]["has_center"], outputs[1][0]
        summary = json.loads(Path(run, "server-1", "summary.json").read_text())
        assert summary["run_failed"] is False, summary
        # The run's own summary, where rank 0's would be, says who ended it and what moved.
        top = json.loads(Path(run, "summary.json").read_text())
        assert top["ended_by_rank"] == 1 and [m["server"] for m in top["ranges_taken_over"]] == [0], top
        for k in (0, 2):  # the final ranges it took, kept as rank 0 keeps them
            assert Path(run, "server-1", f"final-server-{k}.bin").exists(), k
        assert time.monotonic() - killed < 40, "the survivors took as long as a lost run"


def lose_a_rank_and_its_server(strategy, restart_after=None, rank0_steps=None):
    with tempfile.TemporaryDirectory() as run:
        port = free_ports(3)
        more = [f"steps0={rank0_steps}"] if rank0_steps else []  # restart_rank.py's stepsR=
        processes = start(run, port, 0, "ranks", (0, 1, 2), 3, *more, steps=3 * STEPS, strategy=strategy)
        deadline = time.monotonic() + 30
        while not Path(run, "config.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(4 if rank0_steps is None else 7)  # mid-run (rank 0 done by then, with steps0)
        processes[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        processes[1].communicate()
        survivors = [processes[0], processes[2]]
        if restart_after is not None:
            time.sleep(restart_after)
            survivors += start(run, port, 0, "ranks", (1,), 3, steps=3 * STEPS, strategy=strategy)
        outputs = [p.communicate(timeout=120) + (p.returncode,) for p in survivors]
        for stdout, stderr, code in outputs:
            assert code == 0, (strategy, stdout, stderr[-3000:])
            assert lines(stdout)[-1]["steps"] in (3 * STEPS, rank0_steps), stdout
        if restart_after is not None:  # it waited for the takeover, or found it done
            assert ("the run is under way and this rank's server starts afresh" in outputs[2][1] or
                    "this rank was lost and its range is served at tcp://127.0.0.1:" in outputs[2][1]), outputs[2][1][-3000:]
        assert "serving its range here at tcp://127.0.0.1:" in outputs[0][1], outputs[0][1][-3000:]
        assert "failing over to rank 0, serving server 1's range at tcp://127.0.0.1:" in outputs[1][1], outputs[1][1][-3000:]
        # Found lost by its closed connection (CURVE's monitor: the launcher's keys), not its silence.
        assert "closed its connection" in outputs[1][1] and "ago and is not listening again" in outputs[1][1], outputs[1][1][-3000:]
        # Rank 0's worker.center.wait() gave the whole model, its lost range from rank 0 itself,
        # and the run's verdict holds one lost worker and no failure.
        rank0 = lines(outputs[0][0])[-1]
        finished = 2 if restart_after is None else 3  # the restarted rank took its place back
        assert rank0["stats"]["workers_finished"] == finished and rank0["stats"]["workers_lost"] == 1, rank0
        summary = json.loads(Path(run, "summary.json").read_text())
        assert summary["run_failed"] is False, summary
        assert time.monotonic() - killed < 40, "the survivors took as long as a lost run"


@case
def a_worker_killed_while_a_synchronous_round_waits_is_lost_at_once_not_after_the_worker_timeout():
    # DiLoCo's round waits for every live member: a killed process's connection closes, and
    # the center, probing the members it waits on, counts it lost then (worker_timeout_ms 4 s
    # would otherwise stall the round that long at every kill).
    with tempfile.TemporaryDirectory() as run:
        processes = start(run, free_port(), 0, "center", (0, 1, 2), 3, steps=3 * STEPS,
                          strategy=json.dumps({"name": "diloco", "communication_window": 10}))
        deadline = time.monotonic() + 30
        while not Path(run, "config.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(4)
        processes[2].send_signal(signal.SIGKILL)
        processes[2].communicate()
        outputs = [p.communicate(timeout=120) + (p.returncode,) for p in processes[:2]]
        for stdout, stderr, code in outputs:
            assert code == 0, (stdout, stderr[-3000:])
        assert "lost: its connection closed while a synchronous round waited on it" in outputs[0][1], outputs[0][1][-3000:]


@case
def killed_before_its_first_checkpoint_the_next_attempt_starts_from_the_initial_state():
    with tempfile.TemporaryDirectory() as run:
        port = free_port()
        processes = start(run, port, 0)
        kill_when(processes, lambda: Path(run, "config.json").exists())
        assert not Path(run, "checkpoint.bin").exists()
        outputs = [p.communicate(timeout=120) + (p.returncode,) for p in start(run, port, 1)]
        for r, (stdout, stderr, code) in enumerate(outputs):
            assert code == 0, (stdout, stderr[-3000:])
            # The center started afresh: nothing of the killed attempt's kept state comes back.
            assert lines(stdout)[0]["start_step"] == 0 and lines(stdout)[0]["adam_steps"] == [], stdout
        assert "no checkpoint in " + run + " yet; starting from x~(0)" in outputs[0][1], outputs[0][1][-3000:]


if __name__ == "__main__":
    sys.exit(main())
