#!/usr/bin/python3
"""The roles a tether.torch.Worker is made of, each on its own: a rank 0 that hosts the center
only has no client and refuses step() and log() saying so; a replica group's member without a
client takes its leader's state at the welcome, after each of the leader's exchanges (and only
then) and at finish(); a rank's server outlives its worker (finish() returns once the server is
done) except on rank 0, whose server is the center the user waits on. Run by meson test with
PYTHONPATH=build/python."""
import json
import subprocess
import sys
import threading

import torch

import tether
import tether.torch
from harness import case, main, run_threads
from launch_support import free_port, torchrun_env


@case
def a_rank_0_that_hosts_the_center_only_has_no_client_and_refuses_step_and_log():
    script = ("import json, os, sys, torch, tether, tether.torch\n"
              "worker = tether.torch.Worker.from_env(torch.nn.Linear(2, 1), strategy='adag', center_trains=False)\n"
              "out = {'client': type(worker.client).__name__, 'id': worker.id, 'trains': worker.trains,\n"
              "       'indices': list(worker.shard_indices(10)), 'center': worker.center is not None, 'errors': []}\n"
              "for call in (lambda: worker.step(1), lambda: worker.log(loss=1.0)):\n"
              "    try:\n"
              "        call()\n"
              "    except tether.TetherError as e:\n"
              "        out['errors'].append(str(e))\n"
              "out['finish'] = worker.finish()\n"
              "print(json.dumps(out), flush=True)\n"
              "os._exit(0)  # the center would wait for its worker\n")
    out = subprocess.run([sys.executable, "-c", script], env=torchrun_env(0, 2, free_port()), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["client"] == "NoClient" and result["id"] == -1 and result["center"], result
    assert result["trains"] is False and result["indices"] == [] and result["finish"] is None, result
    assert result["errors"] == [
        "Worker.step: rank 0 hosts the center only (from_env(center_trains=False)); it has no worker to step: wait "
        "on worker.center",
        "Worker.log: rank 0 hosts the center only (from_env(center_trains=False)); it has no worker to log: wait on "
        "worker.center"], result


class ScriptedClient:
    """A leader's client that exchanges on the steps given: an exchange writes 7 into every
    parameter (as x~ would come back), finish() writes 9. No run budget: it keeps running."""

    running = True

    def __init__(self, model, exchanges):
        self.model, self.exchanges, self.samples = model, list(exchanges), []

    def step(self, samples):
        self.samples.append(samples)
        exchanged = self.exchanges.pop(0)
        if exchanged:
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(7.0)
        return exchanged

    def finish(self):
        with torch.no_grad():
            for p in self.model.parameters():
                p.fill_(9.0)
        return {"finished": True}


def replica_member(rank, port):
    """One of two ranks of a replica group (leader: rank 0), without a center; prints one JSON line."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    group = dist.new_group([0, 1])
    torch.manual_seed(rank)  # each rank starts elsewhere: the welcome must make them equal
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    state = tether.torch.ModelState(model)
    client = (ScriptedClient(model, [False, True]) if rank == 0 else
              tether.torch.NoClient("rank 1 follows rank 0", "rank 0 is the group's tether worker"))
    member = tether.torch.ReplicaMember(state, client, group, rank, 0, 2)

    def whole():  # parameters, running statistics and counter
        return [v.double().reshape(-1).tolist() for v in model.state_dict().values()]
    seen = {"welcome": whole(), "steps": []}
    for _ in range(2):
        model(torch.randn(5, 3) * (rank + 1))  # each rank's own batch: its own running statistics
        with torch.no_grad():
            for p in model.parameters():
                p.add_(rank + 1)  # and its own step
        seen["steps"].append([member.step(5), whole()])
    seen["report"] = member.finish()
    seen["final"] = whole()
    seen["samples"] = client.samples if rank == 0 else None
    print(json.dumps(seen), flush=True)
    dist.destroy_process_group()


@case
def a_replica_member_without_a_client_takes_its_leaders_state_whenever_the_leader_exchanged():
    port = free_port()
    ranks = [subprocess.Popen([sys.executable, __file__, "replica-member", str(rank), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    out = []
    for p in ranks:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0 and stdout.strip(), stderr[-2000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    leader, follower = out
    assert leader["welcome"] == follower["welcome"], "the welcome did not make the group equal"
    # Step 1: the leader did not exchange; each rank keeps its own state.
    assert leader["steps"][0][0] is False and follower["steps"][0][0] is False, (leader["steps"][0][0],
                                                                               follower["steps"][0][0])
    assert leader["steps"][0][1] != follower["steps"][0][1], "the state went out without an exchange"
    # Step 2: the leader exchanged; the whole state (its counter too) came to the follower.
    assert leader["steps"][1][0] is True and follower["steps"][1][0] is True, (leader["steps"][1][0],
                                                                             follower["steps"][1][0])
    assert leader["steps"][1][1] == follower["steps"][1][1], "the leader's exchange did not reach the group"
    assert all(v == 7.0 for v in follower["steps"][1][1][0] + follower["steps"][1][1][1]), follower["steps"][1][1]
    assert leader["samples"] == [10, 10], leader["samples"]  # the leader counts its group's samples
    assert leader["report"] == {"finished": True} and follower["report"] is None, (leader["report"], follower["report"])
    assert leader["final"] == follower["final"] and follower["final"][0][0] == 9.0, "finish() did not reach the group"


def served_run(rank):
    """A server of 2 workers, one of them a RankServer's client on `rank`: whether finish()
    returned while the other still trained, and the workers finished when it returned."""
    def model():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)
    server = tether.torch.CenterService(model(), strategy={"name": "adag", "communication_window": 1}, workers=2)
    clients = [None, None]

    def join(i):
        clients[i] = tether.torch.Client(tether.torch.ModelState(model()), center=server.service)
    run_threads(2, join)  # the center welcomes its workers once both came
    host = tether.torch.RankServer(server, clients[0], rank)
    assert host.step(1) is True and clients[1].step(1) is True
    returned = {}

    def finish():
        returned["report"] = host.finish()
        returned["finished"] = server.stats()["workers_finished"]
    thread = threading.Thread(target=finish)
    thread.start()
    thread.join(1.0)
    alone = not thread.is_alive()
    clients[1].finish()
    thread.join(30)
    assert not thread.is_alive(), "finish() still waits after every worker finished"
    if rank == 0:
        server.wait()
    return alone, returned


@case
def a_ranks_server_outlives_its_worker_but_rank_0s_is_left_to_the_center():
    alone, returned = served_run(1)
    assert not alone, "rank 1's finish() returned while its server still served another worker"
    assert returned["finished"] == 2 and "rejoins" in returned["report"], returned
    alone, returned = served_run(0)
    assert alone and returned["finished"] < 2 and "rejoins" in returned["report"], returned


if __name__ == "__main__":
    if sys.argv[1:2] == ["replica-member"]:
        replica_member(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(main())
