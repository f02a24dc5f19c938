#!/usr/bin/python3
"""A server on every rank from Python (Worker.from_env(server_placement="ranks")):
three ranks as three processes under torchrun's variables (set here), CURVE keys from
TETHER_SECRET; rank k hosts server k at the center's port + k and trains beside it. Averaging
gives x~ in closed form after each round, on every rank and in rank 0's final state; a rank
whose model starts from another seed is refused naming both starting points; a placement whose
servers differ from the ranks is refused at once naming both; a run directory per rank (or one
shared) loads into the model whole from rank 0's alone. Run by meson test with
PYTHONPATH=build/python."""
import json
import math
import subprocess
import sys
from pathlib import Path

from harness import case, main
from launch_support import free_ports, results, torchrun_env

RANK_SCRIPT = str(Path(__file__).with_name("ranks_rank.py"))
AVERAGING = json.dumps({"name": "averaging", "communication_window": 1})


def start(envs, strategy, exchanges, *more):
    return [subprocess.Popen([sys.executable, RANK_SCRIPT, strategy if i == 0 else "-", str(exchanges), *more], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i, env in enumerate(envs)]


@case
def three_ranks_each_a_server_average_in_closed_form():
    port = free_ports(3)
    ranks = results(start([torchrun_env(r, 3, port) for r in range(3)], AVERAGING, 2))
    for code, result, stderr in ranks:
        assert code == 0, (result, stderr[-3000:])
    by_rank = {result["rank"]: result for _, result, _ in ranks}
    # Round e: ranks hold 1 + e, 2 + e, 3 + e; every range of x~ becomes their mean, 2 + e, and
    # every rank takes it back from all three servers.
    # (Each server's rule adds the mean difference to x~, so float32 rounds the closed form.)
    for r in range(3):
        after = by_rank[r]["after"]
        assert len(after) == 2 and all(math.isclose(v, 2.0 + e, rel_tol=1e-6) for e in range(2) for v in after[e]), after
    assert [by_rank[r]["has_center"] for r in range(3)] == [True, False, False], by_rank
    # Rank 0's worker.center.state_dict() before its finish(): the last round's mean in every
    # range, two of them fetched from ranks 1 and 2 while they still trained or waited.
    assert by_rank[0]["during"] == [3.0], by_rank[0]
    # Rank 0's final state: its own range and the two it fetched from ranks 1 and 2 (the final
    # exchange averaged 3, 3, 3).
    assert by_rank[0]["center"] == [3.0], by_rank[0]
    stats = by_rank[0]["stats"]
    assert stats["workers_finished"] == 3 and stats["workers_lost"] == 0, stats


@case
def a_ranks_run_directory_loads_into_the_model_whole_with_a_directory_per_rank_or_one_shared():
    import tempfile
    import tether
    for layout in ("rank{rank}", "shared"):  # hosts of their own, or one host (or a shared disk)
        with tempfile.TemporaryDirectory() as directory:
            port = free_ports(3)
            ranks = results(start([torchrun_env(r, 3, port) for r in range(3)], AVERAGING, 2,
                                  f"run={directory}/{layout}"))
            for code, result, stderr in ranks:
                assert code == 0, (layout, result, stderr[-3000:])
                assert "CURVE handshake(s) failed" not in stderr, (layout, stderr[-3000:])
            rank0 = next(result for _, result, _ in ranks if result["rank"] == 0)
            # tether.torch.load_checkpoint on rank 0's directory: every range of the final x~
            # (the last round's mean, 3), where rank 0 has only its own checkpoint.
            assert rank0["loaded"] == rank0["center"] == [3.0], (layout, rank0)
            run = f"{directory}/{layout.format(rank=0)}"
            assert len(tether.load_checkpoint(run).x) == 8, layout
            if layout == "shared":
                continue
            Path(run, "final-server-2.bin").unlink()
            try:
                tether.load_checkpoint(run)
                raise AssertionError("loaded without server 2's range")
            except Exception as e:  # names the range and where its rank wrote it
                assert "no checkpoint of server 2 of 3" in str(e) and "rank 2 writes" in str(e), e


@case
def an_asynchronous_rule_and_streaming_diloco_run_with_a_server_on_every_rank():
    # ADAG: each server applies each push as it comes (versions per server); streaming DiLoCo
    # with 3 fragments: fragment f is server f's range, exchanged on its own steps.
    for strategy in ({"name": "adag", "communication_window": 1},
                     {"name": "diloco", "communication_window": 3, "fragments": 3}):
        port = free_ports(3)
        ranks = results(start([torchrun_env(r, 3, port) for r in range(3)], json.dumps(strategy), 6))
        for code, result, stderr in ranks:
            assert code == 0, (strategy, result, stderr[-3000:])
        by_rank = {result["rank"]: result for _, result, _ in ranks}
        stats = by_rank[0]["stats"]
        assert stats["workers_finished"] == 3 and stats["workers_lost"] == 0, (strategy, stats)
        assert stats["updates_applied"] > 0, (strategy, stats)
        # Rank 0's final x~, gathered from the three servers: finite, and moved by the ranks'
        # pushes out of torch's init (|v| < 1/sqrt(3) for Linear(3, 2)). Not its sign: ADAG's
        # pushes are the ranks' moves from what they pulled, and a rank set to 1 after pulling 4 pushes -3.
        center = by_rank[0]["center"]
        assert all(math.isfinite(v) for v in center) and max(abs(v) for v in center) > 0.9, (strategy, by_rank[0])


@case
def a_rank_whose_model_starts_elsewhere_is_refused_naming_both_starting_points():
    port = free_ports(2)
    envs = [torchrun_env(r, 2, port) for r in range(2)]
    processes = [subprocess.Popen([sys.executable, RANK_SCRIPT, AVERAGING if r == 0 else "-", "1", f"seed={r}"],
                                  env=envs[r], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(2)]
    rank1 = results(processes[1:], timeout=60)[0]
    processes[0].kill()
    processes[0].communicate()
    code, result, stderr = rank1
    assert code == 1, (result, stderr[-2000:])
    assert "other initial parameters" in result["error"], result
    assert "starts its range of x~ from another model than rank 0" in result["error"], result


@case
def a_rank_whose_final_range_rank_0_never_took_fails_instead_of_exiting_0():
    # Rank 0 ends after its finish() without worker.center.wait(): nobody holds rank 1's range
    # of the final x~, so rank 1's finish() fails once join_timeout_ms passed, naming why.
    port = free_ports(2)
    processes = start([torchrun_env(r, 2, port) for r in range(2)], AVERAGING, 1, "join=3000", "no-wait")
    code, result, stderr = results(processes[1:], timeout=60)[0]
    assert processes[0].wait(timeout=30) == 0
    assert code == 1, (result, stderr[-2000:])
    assert result["rank"] == 1 and "lacks this server's range" in result["error"], result
    assert "rank 1's server" in result["error"], result


@case
def workers_other_than_the_ranks_a_rank_that_only_serves_or_replica_groups_are_refused_at_once():
    port = free_ports(2)
    env = torchrun_env(0, 2, port)
    script = ("import torch, tether, tether.torch\n"
              "for extra in ({'workers': 3}, {'center_trains': False}, {'replica_size': 2},\n"
              "              {'standby_address': 'tcp://127.0.0.1:9'}):\n"
              "    try:\n"
              "        tether.torch.Worker.from_env(torch.nn.Linear(2, 1), strategy='averaging', server_placement='ranks',"
              " **extra)\n"
              "    except (ValueError, tether.TetherError) as e:\n"
              "        print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert "3, but the world size is 2 (torchrun: RANK, WORLD_SIZE)" in out.stdout, (out.stdout, out.stderr)
    assert "server_placement=\"ranks\", center_trains=False" in out.stdout, (out.stdout, out.stderr)
    assert "replica_size=2, server_placement=\"ranks\"" in out.stdout, (out.stdout, out.stderr)
    assert "a standby stands in for one center on rank 0" in out.stdout, (out.stdout, out.stderr)


if __name__ == "__main__":
    sys.exit(main())
