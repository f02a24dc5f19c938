"""The roles a tether.torch.Worker is made of: a rank's tether worker (Client, or NoClient on a
rank that is none), a replica group's member (ReplicaMember) and a rank's server host
(RankServer). Each has ``step(samples)`` and ``finish()``; the Worker goes through one of them."""
import torch

import tether


class Client(tether.WorkerClient):
    """A rank's tether worker over a ModelState's tensors: tether.WorkerClient's ``step()``,
    ``finish()``, ``log()`` and ``id``, with the integer buffers' float32 shadow refreshed before
    each exchange and written back when b~ came into it (on joining, and on joining again).
    ``center`` (a tether.CenterService in this process; its strategy and options apply) or
    ``address`` with options as the center's."""

    def __init__(self, state, address=None, strategy=None, workers=None, center=None, **options):
        self.state = state
        buffers = state.buffer_tensors()
        state.refresh_shadow()
        if center is not None:
            super().__init__(center, state.parameters, buffers=buffers)
        elif address is not None:
            super().__init__(address, state.parameters, strategy=strategy, workers=workers, buffers=buffers, **options)
        else:
            raise ValueError("tether.torch.Worker: give the center's address, or center=CenterService(...)")
        state.take_shadow()  # joined: the counters of b~ too

    def step(self, samples=0):
        self.state.refresh_shadow()
        exchanged = super().step(samples)
        # Only joining again (the center had lost this worker) writes b~ into the buffers.
        if exchanged and self.state.shadow_changed():
            self.state.take_shadow()
        return exchanged

    def finish(self):
        self.state.refresh_shadow()
        return super().finish()


class NoClient:
    """The client of a rank that is no tether worker (rank 0 hosting the center only, a replica
    group's rank other than its leader): ``id`` -1, ``finish()`` reports nothing, and ``step()``
    and ``log()`` are refused, saying ``who`` the rank is and what to do ``instead``."""

    id = -1
    running = False  # it has nothing to train
    place_samples = 0

    def __init__(self, who, instead):
        self.who, self.instead = who, instead

    def step(self, samples=0):
        raise tether.TetherError(f"Worker.step: {self.who}; it has no worker to step: {self.instead}")

    def log(self, **scalars):
        raise tether.TetherError(f"Worker.log: {self.who}; it has no worker to log: {self.instead}")

    def finish(self):
        return None


class ReplicaMember:
    """This rank's place in a replica group: ``size`` ranks (``group``, a torch.distributed
    process group) that train one replica with the user's own data parallelism. Its ``leader``
    is the group's tether worker (``client``; the others hold a NoClient), and the leader's
    parameters and buffers go to the whole group after its welcome, after each of its exchanges
    and after ``finish()``."""

    def __init__(self, state, client, group, rank, leader, size):
        import torch.distributed as dist
        self.state, self.client, self.group, self.rank, self.leader, self.size = state, client, group, rank, leader, size
        # The per-step flag (exchanged), made once: NCCL broadcasts from the device.
        self._flag = torch.zeros(1, dtype=torch.int32,
                                 device=state.parameters[0].device if dist.get_backend(group) == "nccl" else "cpu")
        self.running = True  # the leader's word, as the last step's broadcast told it
        self._broadcast_state()  # the leader's welcome (x~, b~)

    def step(self, samples=0):
        # The group trains one replica: the leader counts its R ranks' samples.
        exchanged = self.rank == self.leader and self.client.step(samples * self.size)
        return self._group_exchanged(exchanged, self.rank != self.leader or self.client.running)

    def finish(self):
        report = self.client.finish()
        self._broadcast_state()
        return report

    def _broadcast_state(self):
        """The leader's parameters and buffers to every rank of its group, in place."""
        import torch.distributed as dist
        state = self.state
        floats = [t.data for t in state.parameters] + [t.data for t in state.float_buffers]
        flat = torch.cat([t.reshape(-1) for t in floats])  # float32 throughout (ModelState checks)
        dist.broadcast(flat, src=self.leader, group=self.group)
        for t in state.int_buffers:  # BatchNorm's counters, as they are
            dist.broadcast(t.data, src=self.leader, group=self.group)
        if self.rank != self.leader:
            offset = 0
            for t in floats:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view_as(t))
                offset += n

    def _group_exchanged(self, exchanged, running):
        """Whether the leader exchanged and whether it goes on (the run's budget), told to its
        whole group (one small broadcast a step); if it exchanged, its new state follows."""
        import torch.distributed as dist
        self._flag.fill_((1 if exchanged else 0) | (0 if running else 2))
        try:
            dist.broadcast(self._flag, src=self.leader, group=self.group)
            flag = int(self._flag.item())
            self.running = not flag & 2
            if flag & 1:
                self._broadcast_state()
                return True
            return False
        except RuntimeError as e:
            # A rank of the group is gone: the group cannot go on as one replica. This process
            # ends with the error; the leader's connection closes without a goodbye, so the
            # center counts the group's place lost (and a relaunched group may take it back).
            raise tether.TetherError(
                f"replica group of ranks {self.leader}..{self.leader + self.size - 1} (this is rank {self.rank}): "
                f"a rank of the group failed ({e}); the group gives up its place") from e


class RankServer:
    """A rank that hosts a server (server_placement="ranks"): ``server``, its
    tether.torch.CenterService of one range of x~ (rank 0's is also the run's center), and
    ``client``, the rank's worker of every server, training beside it."""

    def __init__(self, server, client, rank):
        self.server, self.client, self.rank = server, client, rank
        # Rank 1 after a lost rank 0: it took range 0 over and ended the run in rank 0's stead.
        self.ended_run = False

    @property
    def running(self):
        return self.client.running

    def step(self, samples=0):
        return self.client.step(samples)

    def finish(self):
        """The worker's final exchange and goodbye; then, on a rank other than 0, the server's
        end: it outlives its worker, since the others still exchange with it, and leaves once
        rank 0 confirmed that its final range arrived. (Rank 0's server is the center the user
        waits on; rank 1's, when rank 0 was lost and rank 1 took range 0 over: ``ended_run``.)"""
        report = self.client.finish()
        if self.rank != 0:
            try:
                self.server.service.wait()
            except tether.RunFailedError:
                # Rank 1 that ended the run: its worker.center.wait() gives the verdict, as rank 0's does.
                if not self.server.service.is_center:
                    raise
            self.ended_run = self.server.service.is_center
        return report
