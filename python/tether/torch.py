"""tether for PyTorch: a model's whole state as one worker of a tether run.

Under a launcher (torchrun, srun, mpirun), one line per process; rank 0 also hosts the center:

    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    worker = tether.torch.Worker.from_env(model, strategy="adag")
    for x, y in torch.utils.data.DataLoader(worker.shard(train_set), batch_size=64, shuffle=True):
        loss_fn(model(x), y).backward()
        optimizer.step(); optimizer.zero_grad()
        worker.step(len(x))
    worker.finish()
    if worker.center:                          # rank 0
        model.load_state_dict(worker.center.wait())   # a complete state_dict: parameters and buffers

By hand: ``center = tether.torch.CenterService(make_model(), strategy="adag", workers=4,
address="tcp://*:5555")`` in one process and ``tether.torch.Worker(model, "tcp://HOST:5555")``
in each worker (the center's strategy and workers unless given).

With ``run_dir="runs/mine"`` the center writes a run directory as ``tether run`` does, and
``worker.log(loss=..., validation_accuracy=...)`` adds the workers' own scalars to it;
``load_checkpoint(model, "runs/mine")`` is its checkpoint as the model's state_dict.

A model's state is its parameters and its buffers:

- Parameters (``model.parameters()``, in that order; a tied parameter once) go through the
  strategy. tether hands it the model's own tensors (a list of buffers: no flat copy), reads
  and writes them in place at each exchange; the optimizer may be made before or after.
- Floating buffers (``model.named_buffers()``: BatchNorm's running mean and variance) are
  averaged, not trained: each worker sends its own with every exchange, the center keeps b~,
  their mean over the workers (each worker's latest, each worker once), and a worker takes b~
  when it joins. Replies carry none: a worker's running statistics describe its own x_i.
  They are the model's tensors too, in place; they must be float32 (a float64 or float16
  buffer is refused: make the model float32).
- Integer buffers (BatchNorm's ``num_batches_tracked``) travel as a float32 shadow, refreshed
  before each ``step()``; the center's mean is rounded back to the buffer's dtype. Exact up
  to 2^24 (16.7 million); BatchNorm reads the counter only with ``momentum=None``.

The tensors must stay where they are while the worker lives (no ``model.to(...)`` or
reassigned buffers after ``Worker(...)``). A model may also be given as
``model.state_dict(keep_vars=True)`` (its parameters are the ``Parameter`` entries); a plain
``state_dict()`` does not say which entries are parameters and is refused.
"""
import dataclasses
import os
import sys

import torch

import tether
from tether._leases import LeasedBatches
from tether._model_state import ModelState
from tether._rank_state import RankState
from tether._roles import Client, NoClient, RankServer, ReplicaMember


class CenterService:
    """The center of a run over ``model``'s state (a module, or its state_dict(keep_vars=True)):
    x~(0) is its parameters and b~(0) its buffers. ``strategy``, ``workers``, ``address`` and
    options are tether.CenterService's (its ``service``). ``state_dict()`` is the center's state
    now, and ``wait()`` the final one: complete state_dicts that ``model.load_state_dict(sd,
    strict=True)`` takes (keys, shapes, dtypes and devices of the model's own)."""

    def __init__(self, model, strategy=None, workers=None, address="", **options):
        self.launcher_secret = None  # (rank, job id) of the secret from_env's rank 0 wrote, removed by wait()
        self.model_state = ModelState(model)
        self.service = tether.CenterService(self.model_state.parameter_vector(), strategy=strategy, workers=workers,
                                            address=address, buffers=self.model_state.buffer_vector(), **options)

    @classmethod
    def _around(cls, model_state, service):
        """The center of an existing tether.CenterService over ``model_state``'s model (the one
        a standby started when it took over)."""
        center = cls.__new__(cls)
        center.launcher_secret, center.model_state, center.service = None, model_state, service
        return center

    @property
    def address(self):
        return self.service.address

    def snapshot(self):
        """x~, its version and b~ as vectors (a tether.Snapshot)."""
        return self.service.snapshot()

    def stats(self):
        return self.service.stats()

    def state_dict(self):
        """The center's state now (while the workers train, or at the end) as the model's state_dict."""
        snapshot = self.service.snapshot()
        return self.model_state.state_dict(snapshot.x, snapshot.buffers)

    def wait(self):
        """Blocks until every worker finished (or was lost); returns the final state_dict. Raises
        tether.RunFailedError as tether.CenterService.wait() does; ``state_dict()`` is then
        still the final state."""
        try:
            self.service.wait()
        finally:
            if self.launcher_secret is not None:  # from_env's rank 0: the job's secret file has served
                tether.remove_launcher_secret(*self.launcher_secret)
                self.launcher_secret = None
        return self.state_dict()


class _Standby:
    """Rank 1's standby center (``standby_address``, docs/python.md "A standby center"): it
    copies x~ from rank 0's center every ``standby_seconds``, and when rank 0 has been silent
    for ``worker_timeout_ms`` it becomes the center at ``standby_address``, where every worker
    fails over. ``end()`` after the rank's finish(): the center it took over as (a
    tether.torch.CenterService), or None, standing down."""

    def __init__(self, state, center_address, options):
        import numpy
        address = options["standby_address"]
        bind = "tcp://*:" + address.rsplit(":", 1)[1]
        self.state = state
        self.standby = tether._tether.start_standby(
            numpy.asarray(state.parameter_vector(), dtype=numpy.float32), "", 0, bind, center_address,
            tether._options(**options), numpy.asarray(state.buffer_vector(), dtype=numpy.float32))

    def end(self):
        if not self.standby.stand_down():
            return None
        return CenterService._around(self.state, tether.CenterService._taken_over(self.standby))


def load_checkpoint(model, path):
    """The state in a run directory's checkpoint (``run_dir`` of a CenterService, or a ``tether
    run`` directory; or one checkpoint file) as ``model``'s complete state_dict: x~ as its
    parameters, b~ as its buffers, ready for ``model.load_state_dict(sd, strict=True)``."""
    state = ModelState(model)
    snapshot = tether.load_checkpoint(path)
    parameters = sum(p.numel() for p in state.parameters)
    if len(snapshot.x) != parameters or len(snapshot.buffers) != state.buffer_count:
        raise ValueError(f"tether.torch.load_checkpoint: {path} holds {len(snapshot.x)} parameters and "
                         f"{len(snapshot.buffers)} buffer elements; the model has {parameters} and {state.buffer_count}: "
                         "it is the checkpoint of another model")
    return state.state_dict(snapshot.x, snapshot.buffers)


@dataclasses.dataclass(frozen=True)
class _Job:
    """This process's place in a launcher's job (tether.read_launcher()); without a launcher,
    a process on its own: rank 0 of 1."""

    launcher: object = None
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def read(cls, connect_timeout_ms):
        """The launcher's job, its ranks waiting up to ``connect_timeout_ms`` (None: the
        launcher's TETHER_CONNECT_TIMEOUT_MS) for rank 0's center to listen."""
        launcher = tether.read_launcher()
        if launcher is None:
            return cls()
        if connect_timeout_ms is not None:
            launcher.connect_timeout_ms = int(connect_timeout_ms)
        return cls(launcher, launcher.rank, launcher.world_size, launcher.local_rank)

    def with_keys(self, options):
        """The options with the CURVE keys every rank derives the same (TETHER_SECRET, else a
        secret rank 0 writes for the launcher's job id): the center binds tcp://*. Unchanged
        outside a launcher, or where keys or insecure are given. Returns (options, whether the
        keys were derived)."""
        derived = self.launcher is not None and not options.get("insecure") and not options.get("center_public_key")
        if derived:
            options = {**tether.launcher_keys(self.rank, self.launcher.job_id,
                                              join_timeout_ms=options.get("join_timeout_ms")), **options}
        return options, derived


def _resume_restarted(job, options):
    """The options of this rank's center or server: on a launcher's restarted attempt
    (launcher.attempt > 0) with ``run_dir`` and no ``resume`` given, resume=True where run_dir
    holds the checkpoint it would resume from, else a fresh start from x~(0), said on stderr."""
    if "resume" in options or job.launcher is None or job.launcher.attempt == 0 or not options.get("run_dir"):
        return options
    options = {**options, "run_dir": str(options["run_dir"])}
    if tether._tether.has_checkpoint(**options):
        return {**options, "resume": True}
    print(f"tether: rank {job.rank}, attempt {job.launcher.attempt} of job {job.launcher.job_id}: no checkpoint in "
          f"{options['run_dir']} yet; starting from x~(0)", file=sys.stderr)
    return options


def _join_center(model, job, strategy, count, options, center_trains, place):
    """This rank's part in a job with one center of ``count`` workers: on rank 0 the center
    (bound where the launcher says, or private without one) and, when it trains, its worker; on
    another rank the worker, once rank 0 listens, asking for worker id ``place`` (its index
    among the workers: the center's messages then name it by it). Returns (the worker's
    ModelState, its client, the center or None)."""
    if job.rank == 0 and strategy is None:
        raise ValueError("Worker.from_env: rank 0 hosts the center and needs strategy= (e.g. \"adag\"); the other "
                         "ranks take the center's")
    options, derived = job.with_keys(options)
    servers = int(tether.option(options, "servers"))
    if job.rank != 0:
        address = job.launcher.center_address(servers)
        job.launcher.wait_for_center(address)
        state = ModelState(model)
        return state, Client(state, address, strategy=strategy, workers=count, rank=place, **options), None
    center = CenterService(model, strategy=strategy, workers=count,
                           address=job.launcher.bind_address(servers) if job.launcher else "",
                           **_resume_restarted(job, options))
    if derived:
        center.launcher_secret = (job.rank, job.launcher.job_id)
    if not center_trains:
        return center.model_state, NoClient("rank 0 hosts the center only (from_env(center_trains=False))",
                                            "wait on worker.center"), center
    state = ModelState(model)
    return state, Client(state, center=center.service), center


def _host_rank_server(model, job, strategy, count, options, center_trains):
    """Rank k hosts server k of ``count`` (one per rank) at the center's port + k on its own
    host, tells rank 0's server where it is, and joins every server as a worker. Returns (the
    worker's ModelState, the RankServer)."""
    if not center_trains:
        raise ValueError("Worker.from_env(server_placement=\"ranks\", center_trains=False): every rank, rank 0 "
                         "too, trains beside its server")
    if job.rank == 0 and strategy is None:
        raise ValueError("Worker.from_env: rank 0 hosts server 0 and needs strategy= (e.g. \"diloco\"); the other "
                         "ranks take its")
    options, derived = job.with_keys(options)
    launcher = job.launcher
    server0 = launcher.center_address(1)
    if job.rank != 0:
        launcher.wait_for_center(server0)
    options = {**options, "servers": count, "rank": job.rank, "server0_address": server0,
               "rank_address": launcher.rank_server_address()}
    server = CenterService(model, strategy=strategy if strategy is not None else "", workers=count,
                           address=launcher.rank_server_bind_address(), **_resume_restarted(job, options))
    if derived and job.rank == 0:
        server.launcher_secret = (job.rank, launcher.job_id)
    state = ModelState(model)
    return state, RankServer(server, Client(state, center=server.service), job.rank)


def _replica_process_group(model, job, size, options):
    """This rank's group of ``size`` ranks (ranks r with the same r // size), torch.distributed
    initialized first if it is not."""
    import torch.distributed as dist
    if not dist.is_initialized():
        # torch.distributed's store: torchrun's MASTER_ADDR / MASTER_PORT; under srun or
        # mpirun (which set neither) rank 0's host and the port after the center's.
        servers = int(tether.option(options, "servers"))
        host, port = job.launcher.center_address(servers).split(",")[0][len("tcp://"):].rsplit(":", 1)
        os.environ.setdefault("MASTER_ADDR", host.strip("[]"))
        os.environ.setdefault("MASTER_PORT", str(int(port) + servers))
        on_cuda = any(t.is_cuda for t in ModelState(model).parameters)
        dist.init_process_group("nccl" if on_cuda else "gloo", rank=job.rank, world_size=job.world_size)
    elif dist.get_world_size() != job.world_size or dist.get_rank() != job.rank:
        raise ValueError(f"Worker.from_env(replica_size={size}): torch.distributed has rank {dist.get_rank()} of "
                         f"{dist.get_world_size()}, the launcher {job.rank} of {job.world_size}")
    # Every rank makes every group, in the same order (torch.distributed requires it).
    mine = None
    for first in range(0, job.world_size, size):
        members = list(range(first, first + size))
        made = dist.new_group(members)
        if job.rank in members:
            mine = made
    return mine


class Worker:
    """One rank of a tether run over a PyTorch model's state (a module, or its
    state_dict(keep_vars=True)); call ``step()`` after ``optimizer.step()``. By hand, a tether
    worker of ``center`` (a tether.torch.CenterService or tether.CenterService in this process)
    or of ``address`` with options as the center's (``strategy`` and ``workers``: the center's
    unless given); the strategy's ``overlap_steps`` overlaps each exchange with the next steps.
    Under a launcher, ``Worker.from_env`` makes one (and rank 0's center).

    It is made of roles: ``client``, the rank's tether worker (a Client; a NoClient on a rank
    that is none), and under from_env the replica group's member (a ReplicaMember) or the
    rank's server host (a RankServer) around it, through which ``step()`` and ``finish()`` go.
    ``parameters`` are the tensors the strategy sees."""

    def __init__(self, model, address=None, strategy=None, workers=None, center=None, **options):
        state = ModelState(model)
        service = center.service if isinstance(center, CenterService) else center
        self._compose(_Job(), state, Client(state, address, strategy, workers, service, **options))

    def _compose(self, job, state, client, role=None, center=None, server=None, replica=None, shard=(0, 1),
                 trains=True):
        """Every attribute, from the rank's place in its job and its roles; ``role`` (the
        client unless given) is what step() and finish() go through."""
        self.launcher, self.rank, self.world_size, self.local_rank = job.launcher, job.rank, job.world_size, job.local_rank
        self.model_state, self.parameters = state, state.parameters
        self.client, self._role = client, role or client
        # rank 0's center; with a server on every rank, this rank's server (rank 0's: the center).
        self.center, self.server = center, server
        # A replica group's torch.distributed group, its size and its leader's global rank.
        self.replica_group, self.replica_size, self.leader = (
            (replica.group, replica.size, replica.leader) if replica else (None, 1, None))
        self.shard_index, self.shards = shard
        self.trains = trains
        # The rank's own state across restarts (from_env(state=...)), and its steps: start_step
        # is where a restarted rank goes on from (0 on a first attempt).
        self._kept, self.start_step, self.steps = None, 0, 0
        self._standby = None  # rank 1's, with standby_address (_Standby)
        return self

    def _keep(self, objects, job, options):
        """from_env(state=objects): kept in run_dir/rank-K.pt, given back when the center went on
        from its checkpoint and says this rank's place trained before (or with resume=True)."""
        run_dir = options.get("run_dir")
        if not run_dir:
            raise ValueError("Worker.from_env(state=...): give run_dir= too; each rank keeps its state in "
                             "run_dir/rank-K.pt (on its own host) for the rank's next attempt")
        seconds = float(tether.option(options, "checkpoint_seconds"))
        self._kept = RankState(objects, os.path.join(str(run_dir), f"rank-{job.rank}.pt"), seconds)
        # The center went on from its checkpoint (a launcher's next attempt, a resume, or a rank
        # restarted alone by a supervisor) and says this rank's place has trained before: the
        # rank goes on where it was kept. A center that started afresh gives no state back.
        if options.get("resume") or self.client.place_samples > 0:
            step = self._kept.restore()
            if step is not None:
                self.start_step = self.steps = step
            else:
                print(f"tether: rank {job.rank}: no kept state at {self._kept.path}; its state= starts afresh",
                      file=sys.stderr)
        return self

    @classmethod
    def from_env(cls, model, strategy=None, workers=None, center_trains=None, connect_timeout_ms=None, replica_size=1,
                 state=None, **options):
        """This process's worker in a launcher's job (torchrun, srun, mpirun: read by
        tether.read_launcher(), the C++ reader the ``tether`` command uses). Rank 0 hosts the
        center (``worker.center``, a tether.torch.CenterService on its own thread, bound to
        tcp://*:PORT, with the CURVE keys of tether.launcher_keys: TETHER_SECRET, else a secret rank
        0 writes for the job id into ~/.tether; or give keys, or insecure=True) and joins it as a
        worker too, unless ``center_trains=False`` (None: cluster.center_trains's default; False:
        ``worker.trains`` is False, no step(), wait on ``worker.center``); the others wait up to
        ``connect_timeout_ms`` (TETHER_CONNECT_TIMEOUT_MS, 3 s) for it to listen, and join.
        ``workers`` defaults to the world size (less one without center_trains); another value
        raises at once, naming both. ``strategy`` is needed on rank 0 (the others take the
        center's unless given). Options as CenterService's. Outside a launcher: one process, the
        center private to it and this its only worker. The worker has ``rank``,
        ``world_size``, ``local_rank``, ``launcher`` and ``shard(dataset)``: this rank's part.

        ``replica_size=R`` > 1: replica groups. Ranks r // R form a group of R processes that
        train one replica together with the user's own data parallelism (wrap the model in
        ``DistributedDataParallel(model, process_group=worker.replica_group)``); only the
        group's leader (rank r with r % R == 0) is a tether worker, the center counts groups
        (``workers`` = world size / R), and after each of the leader's exchanges (and after
        ``finish()``) it broadcasts the parameters and buffers to its group. torch.distributed is
        initialized here if it is not (gloo, or nccl for a CUDA model; its store at MASTER_ADDR /
        MASTER_PORT, else at rank 0's host and the port after the center's); every rank must
        call from_env with the same R.

        ``server_placement="ranks"``: rank k hosts server k of x~'s ranges (at the center's port
        + k on its own host) and trains beside it; ``worker.server`` is this rank's server,
        ``worker.center`` rank 0's (docs/python.md, "A server on every rank").

        Restarts (docs/python.md, "Restarts"): on a launcher's restarted attempt
        (``launcher.attempt`` > 0: TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT) with
        ``run_dir``, rank 0's center (each rank's server with servers on the ranks) resumes by
        itself from the checkpoint there, or starts from x~(0) where there is none yet (``resume``
        given decides instead). ``state={"optimizer": optimizer, ...}`` (objects with
        state_dict() and load_state_dict()) is the rank's own state, kept in
        ``run_dir/rank-K.pt`` right after an exchange at most every ``checkpoint_seconds`` and at
        finish(), and loaded back when the center went on from its checkpoint and says this
        rank's place trained before (or with ``resume=True``); ``worker.start_step`` is then the
        step the rank goes on from (``worker.steps`` counts on from it).

        ``standby_address="tcp://HOST:PORT"`` (center on rank 0): rank 1 is a standby center
        that takes over when rank 0 dies, every worker fails over to it, and after its
        finish() rank 1's ``worker.center`` is the run's center (docs/python.md, "A standby
        center")."""
        kept = state  # `state` below is the model's
        if center_trains is None:
            center_trains = tether._tether.default_center_trains
        size = int(replica_size)
        if size > 1 and options.get("server_placement") == "ranks":
            raise ValueError(f"Worker.from_env(replica_size={replica_size}, server_placement=\"ranks\"): a server on "
                             "every rank needs every rank to be a tether worker; replica groups make only their "
                             "leaders workers. Use one or the other")
        if options.get("standby_address") and (size > 1 or options.get("server_placement") == "ranks"):
            raise ValueError("Worker.from_env(standby_address=...): a standby stands in for one center on rank 0; with "
                             "replica groups or servers on the ranks there is none (give one or the other)")
        if options.get("standby_address") and not options.get("run_dir"):
            raise ValueError("Worker.from_env(standby_address=...): give run_dir= too; rank 1's standby takes over "
                             "from a checkpoint it keeps there")
        job = _Job.read(connect_timeout_ms)
        if size > 1:
            if kept is not None:
                raise ValueError(f"Worker.from_env(state=..., replica_size={size}): a replica group's ranks would "
                                 "have to agree on where they go on from; keep the state yourself there")
            return cls._replica_from_env(model, job, strategy, workers, center_trains, size, options)
        if job.launcher is None:
            if not center_trains:
                raise ValueError("Worker.from_env(center_trains=False): outside a launcher this process is the only "
                                 "one, and must train")
            if workers not in (None, 1):
                raise ValueError(f"Worker.from_env(workers={workers}): outside a launcher (no RANK/WORLD_SIZE, "
                                 "SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK) this process is the only worker")
            count = 1
        else:
            count = job.launcher.check_workers(int(workers or 0), bool(center_trains), "Worker.from_env(workers=...)")
        shard, trains = (job.rank - (0 if center_trains else 1), count), job.rank > 0 or bool(center_trains)
        if job.launcher is not None and options.get("server_placement") == "ranks":
            state, host = _host_rank_server(model, job, strategy, count, options, center_trains)
            worker = cls.__new__(cls)._compose(job, state, host.client, role=host, server=host.server,
                                               center=host.server if job.rank == 0 else None, shard=shard, trains=trains)
        else:
            state, client, center = _join_center(model, job, strategy, count, options, center_trains, shard[0])
            worker = cls.__new__(cls)._compose(job, state, client, center=center, shard=shard, trains=trains)
            if job.rank == 1 and options.get("standby_address"):
                worker._standby = _Standby(state, job.launcher.center_address(1), job.with_keys(options)[0])
        return worker._keep(kept, job, options) if kept is not None else worker

    @classmethod
    def _replica_from_env(cls, model, job, strategy, workers, center_trains, size, options):
        if job.launcher is None:
            raise ValueError(f"Worker.from_env(replica_size={size}): replica groups need a launcher's ranks (RANK and "
                             "WORLD_SIZE, SLURM_PROCID, ...); none is set")
        rank, world = job.rank, job.world_size
        if world % size:
            raise ValueError(f"Worker.from_env(replica_size={size}): the world size {world} is not a multiple of it; "
                             "every group needs R ranks")
        if not center_trains:
            raise ValueError(f"Worker.from_env(replica_size={size}, center_trains=False): rank 0 leads group 0; "
                             "replica groups need it to train")
        groups = world // size
        if workers not in (None, groups):
            raise ValueError(f"Worker.from_env(workers={workers}, replica_size={size}): the center counts groups, "
                             f"and {world} ranks make {groups}")
        group = _replica_process_group(model, job, size, options)
        leader = rank - rank % size
        if rank == leader:
            # A leader is a worker of a center of `groups` workers; the launcher's own check
            # (workers = world size) does not apply.
            state, client, center = _join_center(model, job, strategy, groups, options, center_trains, rank // size)
        else:
            state, client, center = ModelState(model), NoClient(
                f"rank {rank} is in the replica group that rank {leader} leads",
                f"rank {leader} is the group's tether worker"), None
        member = ReplicaMember(state, client, group, rank, leader, size)
        # Group g takes a contiguous 1/groups of the data: its ranks' parts, one after another.
        return cls.__new__(cls)._compose(job, state, client, role=member, center=center, replica=member,
                                         shard=(rank, world))

    def shard_indices(self, size):
        """The indices of this rank's part of a data set of ``size`` samples: a contiguous
        1/workers of it, as the ``tether`` command's workers take theirs (none for a rank 0
        that only hosts the center)."""
        if not self.trains:
            return range(0)
        return range(size * self.shard_index // self.shards, size * (self.shard_index + 1) // self.shards)

    def shard(self, dataset):
        """This rank's part of ``dataset`` (anything with len() and indexing) as a
        torch.utils.data.Subset: every sample in exactly one rank's part."""
        return torch.utils.data.Subset(dataset, list(self.shard_indices(len(dataset))))

    def batches(self, size, batch_size, epochs=1, seed=0, steps=None):
        """This rank's minibatches of a data set of ``size`` rows as the
        center leases them, for ``DataLoader(dataset, batch_sampler=worker.batches(len(dataset),
        64))``: one window's rows (``steps`` minibatches, the strategy's window by default) at a
        time from one shuffled stream over the data that no two ranks repeat within a pass, so
        a fast rank trains more of it, a rank that joins takes work at once, and what a lost
        rank leased and had not exchanged is trained by another. It ends when the budget
        (``budget_samples``), or without one ``epochs`` passes, is handed out, or the center says
        the budget is trained. Empty on a rank that trains nothing; replica groups take
        ``shard()`` instead."""
        if self.replica_group is not None:
            raise tether.TetherError("Worker.batches: a replica group's ranks train one replica together on the "
                                     "group's part of the data; leases are for ranks that are workers of their own. "
                                     "Use worker.shard(dataset)")
        if not self.trains or isinstance(self.client, NoClient):
            return iter(())
        return LeasedBatches(self.client, size, batch_size, epochs, seed, steps)

    @property
    def id(self):
        """The worker's id at the center (-1 on a rank that is no tether worker)."""
        return self.client.id

    @property
    def running(self):
        """Whether to go on training: False once the center said the run's budget
        (``budget_samples``) is trained, told in the reply to an exchange, so that
        ``while worker.running:`` ends within one window of it and fast ranks take more of the
        budget than slow ones; after ``finish()``; and on a rank that trains nothing. Without a
        budget, True until ``finish()``."""
        return self._role.running

    def step(self, samples=0):
        """After each optimizer step, with the samples it trained; returns True when the
        parameters may have changed: this rank's worker (or its replica group's leader)
        exchanged, or a reply that landed late (the strategy's overlap_steps) changed them."""
        exchanged = self._role.step(samples)
        self.steps += 1
        if exchanged and self._kept is not None:  # the parameters are x~'s: a moment to keep the rest
            self._kept.save_if_due(self.steps)
        return exchanged

    def finish(self):
        """The final exchange and goodbye; returns the worker's counters (tether.WorkerClient's
        finish(); None on a rank 0 that only hosts the center). In a replica group the leader's
        final state then goes to the whole group; a rank's server (other than rank 0's) is done
        when it returns. A rank that took over as center (a standby's rank 1, or with servers on
        the ranks rank 1 after rank 0 was lost) has ``worker.center`` set: waiting on it gives
        the final state and the verdict, as rank 0's would."""
        if self._kept is not None:
            self._kept.save(self.steps)
        report = self._role.finish()
        if self._standby is not None:  # the center now, if rank 0's was lost: this rank waits on it
            self.center = self._standby.end() or self.center
        if getattr(self._role, "ended_run", False):  # rank 1 ended a ranks run in a lost rank 0's stead
            self.center = self.server
        return report

    def log(self, **scalars):
        """This worker's own scalars into the center's run directory (tether.WorkerClient.log)."""
        return self.client.log(**scalars)
