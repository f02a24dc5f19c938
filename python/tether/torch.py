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
import collections
import collections.abc

import numpy
import torch

import tether


class ModelState:
    """How a model's state_dict maps onto tether's two vectors: x (the parameters, for the
    strategy) and b (the floating buffers, then one float32 shadow of the integer buffers)."""

    def __init__(self, model):
        if isinstance(model, torch.nn.Module):
            self.entries = model.state_dict(keep_vars=True)
            parameters = list(model.named_parameters())
            buffers = list(model.named_buffers())
        elif isinstance(model, collections.abc.Mapping):
            self.entries = collections.OrderedDict(model)
            if not any(isinstance(v, torch.nn.Parameter) for v in self.entries.values()):
                raise TypeError("tether.torch: this state_dict does not say which entries are parameters; pass the "
                                "module itself, or model.state_dict(keep_vars=True)")
            parameters, buffers, seen = [], [], set()
            for name, t in self.entries.items():
                if torch.is_tensor(t) and id(t) not in seen:
                    seen.add(id(t))
                    (parameters if isinstance(t, torch.nn.Parameter) else buffers).append((name, t))
        else:
            raise TypeError(f"tether.torch: expected a torch.nn.Module or a state_dict, got {type(model).__name__}")
        if not parameters:
            raise ValueError("tether.torch: the model has no parameters")
        self.parameters = [_checked(name, p, "parameter") for name, p in parameters]
        self.float_buffers, self.int_buffers = [], []
        for name, b in buffers:
            if b.is_floating_point():
                self.float_buffers.append(_checked(name, b, "buffer"))
            elif b.is_complex():
                raise TypeError(f"tether.torch: buffer '{name}' is {b.dtype}; tether averages real buffers")
            else:
                self.int_buffers.append(_checked(name, b, "buffer", any_dtype=True))
        _refuse_overlaps(parameters + buffers)
        # Where each tensor's elements are: id -> (vector "x" or "b", offset, count); the shadow
        # of the integer buffers is the end of b.
        self.where, offset = {}, 0
        for p in self.parameters:
            self.where[id(p)] = ("x", offset, p.numel())
            offset += p.numel()
        offset = 0
        for b in self.float_buffers + self.int_buffers:
            self.where[id(b)] = ("b", offset, b.numel())
            offset += b.numel()
        self.buffer_count = offset
        device = self.parameters[0].device
        self.shadow = torch.zeros(sum(b.numel() for b in self.int_buffers), dtype=torch.float32, device=device)
        self._int_views = [b.reshape(-1) for b in self.int_buffers]  # views: they follow the buffers

    def parameter_vector(self):
        return torch.cat([p.detach().reshape(-1).cpu() for p in self.parameters]).numpy()

    def buffer_vector(self):
        self.refresh_shadow()
        parts = [b.detach().reshape(-1).cpu() for b in self.float_buffers] + [self.shadow.cpu()]
        return torch.cat(parts).numpy()

    def buffer_tensors(self):
        """What tether reads and writes in place: the floating buffers, then the shadow."""
        return self.float_buffers + ([self.shadow] if self.int_buffers else [])

    def refresh_shadow(self):
        if self.int_buffers:
            self.shadow.copy_(torch.cat(self._int_views))  # one cat and one cast for all of them

    def take_shadow(self):
        """The integer buffers <- the shadow, rounded (after tether wrote b~ into it)."""
        offset = 0
        with torch.no_grad():
            for view in self._int_views:
                view.copy_(self.shadow[offset:offset + view.numel()].round())
                offset += view.numel()

    def shadow_changed(self):
        return bool(self.int_buffers) and not torch.equal(self.shadow, torch.cat(self._int_views).to(torch.float32))

    def state_dict(self, x, b):
        """A complete state_dict with the model's keys, shapes, dtypes and devices, built from x
        (x~) and b (b~); entries that are no tensors of the model's state (extra state) as the
        model's own."""
        out = collections.OrderedDict()
        vectors = {"x": x, "b": b}
        for name, t in self.entries.items():
            if not torch.is_tensor(t) or id(t) not in self.where:
                out[name] = t
                continue
            vector, offset, count = self.where[id(t)]
            values = torch.from_numpy(numpy.array(vectors[vector][offset:offset + count], dtype=numpy.float32))
            if not t.is_floating_point():
                values = values.round()
            out[name] = values.reshape(t.shape).to(device=t.device, dtype=t.dtype)
        return out


def _checked(name, t, what, any_dtype=False):
    if not any_dtype and t.dtype != torch.float32:
        raise TypeError(f"tether.torch: {what} '{name}' is {t.dtype}; tether exchanges float32 (make the model "
                        "float32: model.float())")
    if not t.is_contiguous():
        raise TypeError(f"tether.torch: {what} '{name}' is not contiguous (shape {tuple(t.shape)}, strides "
                        f"{t.stride()}); tether reads and writes it in place; make it contiguous before, e.g. "
                        f"p.data = p.data.contiguous()")
    return t


def _refuse_overlaps(named):
    """Two entries sharing memory (a view of another parameter, a buffer aliasing one) would be
    exchanged twice and written twice; a tied parameter (the same tensor) comes once already."""
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(), name, t.device)
                   for name, t in named if t.numel() > 0)
    for (start_a, end_a, a, dev_a), (start_b, _, b, dev_b) in zip(spans, spans[1:]):
        if dev_a == dev_b and start_b < end_a:
            raise ValueError(f"tether.torch: '{a}' and '{b}' share memory; tether exchanges every parameter and "
                             "buffer once, so give the model tensors of their own (or tie them as one Parameter)")


class CenterService:
    """The center of a run over ``model``'s state (a module, or its state_dict(keep_vars=True)):
    x~(0) is its parameters and b~(0) its buffers. ``strategy``, ``workers``, ``address`` and
    options are tether.CenterService's (its ``service``). ``state_dict()`` is the center's state
    now, and ``wait()`` the final one: complete state_dicts that ``model.load_state_dict(sd,
    strict=True)`` takes (keys, shapes, dtypes and devices of the model's own)."""

    launcher_secret = None  # (rank, job id) of the secret Worker.from_env's rank 0 wrote, removed by wait()

    def __init__(self, model, strategy=None, workers=None, address="", **options):
        self.model_state = ModelState(model)
        self.service = tether.CenterService(self.model_state.parameter_vector(), strategy=strategy, workers=workers,
                                            address=address, buffers=self.model_state.buffer_vector(), **options)

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


def _with_launcher_keys(rank, launcher, options):
    """The options with the CURVE keys every rank derives the same (TETHER_SECRET, else a secret
    rank 0 writes for the launcher's job id): the center binds tcp://*. Unchanged where keys or
    insecure are given. Returns (options, whether the keys were derived)."""
    derived = not options.get("insecure") and not options.get("center_public_key")
    if derived:
        options = {**tether.launcher_keys(rank, launcher.job_id, join_timeout_ms=options.get("join_timeout_ms")),
                   **options}
    return options, derived


def _rank0_center(model, strategy, workers, address, options):
    if strategy is None:
        raise ValueError("Worker.from_env: rank 0 hosts the center and needs strategy= (e.g. \"adag\"); the other "
                         "ranks take the center's")
    return CenterService(model, strategy=strategy, workers=workers, address=address, **options)


class Worker(tether.WorkerClient):
    """One tether worker over a PyTorch model's state (a module, or its
    state_dict(keep_vars=True)); call ``step()`` after ``optimizer.step()``. ``center`` (a
    tether.torch.CenterService or tether.CenterService in this process) or ``address`` with
    options as the center's (``strategy`` and ``workers``: the center's unless given); the
    strategy's ``overlap_steps`` overlaps each exchange with the next steps. ``step``,
    ``finish`` and ``id`` are tether.WorkerClient's; ``parameters`` the tensors the strategy
    sees. Under a launcher, ``Worker.from_env`` makes one (and rank 0's center)."""

    # Set by from_env; a worker made by hand is rank 0 of 1 with no launcher.
    launcher = None
    center = None
    rank, world_size, local_rank, shard_index, shards, trains = 0, 1, 0, 0, 1, True

    def __init__(self, model, address=None, strategy=None, workers=None, center=None, **options):
        self.model_state = ModelState(model)
        self.parameters = self.model_state.parameters
        buffers = self.model_state.buffer_tensors()
        self.model_state.refresh_shadow()
        if center is not None:
            service = center.service if isinstance(center, CenterService) else center
            super().__init__(service, self.parameters, buffers=buffers)
        elif address is not None:
            super().__init__(address, self.parameters, strategy=strategy, workers=workers, buffers=buffers, **options)
        else:
            raise ValueError("tether.torch.Worker: give the center's address, or center=CenterService(...)")
        self.model_state.take_shadow()  # joined: the counters of b~ too

    @classmethod
    def from_env(cls, model, strategy=None, workers=None, center_trains=None, connect_timeout_ms=None, replica_size=1,
                 **options):
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
        ``worker.center`` rank 0's (docs/python.md, "A server on every rank")."""
        if center_trains is None:
            center_trains = tether._tether.default_center_trains
        if int(replica_size) > 1:
            if options.get("server_placement") == "ranks":
                raise ValueError(f"Worker.from_env(replica_size={replica_size}, server_placement=\"ranks\"): a server on "
                                 "every rank needs every rank to be a tether worker; replica groups make only their "
                                 "leaders workers. Use one or the other")
            return cls._replica_group_from_env(model, strategy, workers, center_trains, connect_timeout_ms,
                                               int(replica_size), options)
        launcher = tether.read_launcher()
        if launcher is not None and connect_timeout_ms is not None:
            launcher.connect_timeout_ms = int(connect_timeout_ms)
        rank, world = (launcher.rank, launcher.world_size) if launcher else (0, 1)
        if launcher is None:
            if not center_trains:
                raise ValueError("Worker.from_env(center_trains=False): outside a launcher this process is the only "
                                 "one, and must train")
            if workers not in (None, 1):
                raise ValueError(f"Worker.from_env(workers={workers}): outside a launcher (no RANK/WORLD_SIZE, "
                                 "SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK) this process is the only worker")
            count = 1
        else:
            count = launcher.check_workers(int(workers or 0), bool(center_trains), "Worker.from_env(workers=...)")
        self, center = cls._join_job(model, launcher, rank, strategy, count, options, center_trains)
        self.launcher, self.center, self.rank, self.world_size = launcher, center, rank, world
        self.local_rank = launcher.local_rank if launcher else 0
        self.trains = rank > 0 or bool(center_trains)
        self.shards = count
        self.shard_index = rank - (0 if center_trains else 1)
        return self

    @classmethod
    def _join_job(cls, model, launcher, rank, strategy, count, options, center_trains):
        """A job's worker of a center of ``count`` workers: on rank 0 the center (bound where the
        launcher says, or private without one) and, when it trains, its worker; on another rank
        the worker, once rank 0 listens. Returns (worker, center or None)."""
        derived_keys = False
        if launcher is not None:
            options, derived_keys = _with_launcher_keys(rank, launcher, options)
        if launcher is not None and options.get("server_placement") == "ranks":
            return cls._join_ranks(model, launcher, rank, strategy, count, options, center_trains, derived_keys)
        servers = int(tether.option(options, "servers"))
        if rank != 0:
            address = launcher.center_address(servers)
            launcher.wait_for_center(address)
            return cls(model, address, strategy=strategy, workers=count, **options), None
        center = _rank0_center(model, strategy, count, launcher.bind_address(servers) if launcher else "", options)
        if derived_keys:
            center.launcher_secret = (rank, launcher.job_id)
        return (cls(model, center=center) if center_trains else cls._without_client(center.model_state)), center

    # With a server on every rank (server_placement="ranks"): this rank's server, a
    # tether.torch.CenterService of one range of x~ (rank 0's is also ``center``).
    server = None

    @classmethod
    def _join_ranks(cls, model, launcher, rank, strategy, count, options, center_trains, derived_keys):
        """Rank k hosts server k of ``count`` (one per rank) at the center's port + k on its own
        host, tells rank 0's server where it is, and joins every server as a worker."""
        if not center_trains:
            raise ValueError("Worker.from_env(server_placement=\"ranks\", center_trains=False): every rank, rank 0 "
                             "too, trains beside its server")
        if rank == 0 and strategy is None:
            raise ValueError("Worker.from_env: rank 0 hosts server 0 and needs strategy= (e.g. \"diloco\"); the other "
                             "ranks take its")
        server0 = launcher.center_address(1)
        if rank != 0:
            launcher.wait_for_center(server0)
        options = {**options, "servers": count, "rank": rank, "server0_address": server0,
                   "rank_address": launcher.rank_server_address()}
        server = CenterService(model, strategy=strategy if strategy is not None else "", workers=count,
                               address=launcher.rank_server_bind_address(), **options)
        if derived_keys and rank == 0:
            server.launcher_secret = (rank, launcher.job_id)
        self = cls(model, center=server)
        self.server = server
        return self, (server if rank == 0 else None)

    # Replica groups (from_env(replica_size=R)): this rank's group, its leader's global rank, and
    # whether this rank is it. None / self.rank / True for a worker of its own.
    replica_group, replica_size, leader = None, 1, None

    @classmethod
    def _replica_group_from_env(cls, model, strategy, workers, center_trains, connect_timeout_ms, size, options):
        import torch.distributed as dist
        launcher = tether.read_launcher()
        if launcher is None:
            raise ValueError(f"Worker.from_env(replica_size={size}): replica groups need a launcher's ranks (RANK and "
                             "WORLD_SIZE, SLURM_PROCID, ...); none is set")
        rank, world = launcher.rank, launcher.world_size
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
        if not dist.is_initialized():
            # torch.distributed's store: torchrun's MASTER_ADDR / MASTER_PORT; under srun or
            # mpirun (which set neither) rank 0's host and the port after the center's.
            import os
            servers = int(tether.option(options, "servers"))
            host, port = launcher.center_address(servers).split(",")[0][len("tcp://"):].rsplit(":", 1)
            os.environ.setdefault("MASTER_ADDR", host.strip("[]"))
            os.environ.setdefault("MASTER_PORT", str(int(port) + servers))
            on_cuda = any(t.is_cuda for t in ModelState(model).parameters)
            dist.init_process_group("nccl" if on_cuda else "gloo", rank=rank, world_size=world)
        elif dist.get_world_size() != world or dist.get_rank() != rank:
            raise ValueError(f"Worker.from_env(replica_size={size}): torch.distributed has rank {dist.get_rank()} of "
                             f"{dist.get_world_size()}, the launcher {rank} of {world}")
        # Every rank makes every group, in the same order (torch.distributed requires it).
        replica_group = None
        for g in range(groups):
            members = list(range(g * size, (g + 1) * size))
            made = dist.new_group(members)
            if rank in members:
                replica_group = made
        leader = rank - rank % size
        if rank == leader:
            # A leader is a worker of a center of `groups` workers; the launcher's own check
            # (workers = world size) does not apply.
            if connect_timeout_ms is not None:
                launcher.connect_timeout_ms = int(connect_timeout_ms)
            self, self.center = cls._join_job(model, launcher, rank, strategy, groups, options, center_trains)
        else:
            self = cls._without_client(ModelState(model))
            self.center = None
        self.launcher, self.rank, self.world_size = launcher, rank, world
        self.local_rank = launcher.local_rank
        self.trains, self.shards, self.shard_index = True, world, rank  # group g: a contiguous 1/groups
        self.replica_group, self.replica_size, self.leader = replica_group, size, leader
        # The per-step flag (_group_exchanged), made once: NCCL broadcasts from the device.
        self._exchanged_flag = torch.zeros(1, dtype=torch.int32, device=self.parameters[0].device
                                           if dist.get_backend(replica_group) == "nccl" else "cpu")
        self._broadcast_state()  # the leader's welcome (x~, b~) to its group
        return self

    @classmethod
    def _without_client(cls, model_state):
        """A Worker over `model_state` that is no tether worker: rank 0 hosting the center only,
        or a replica group's rank other than its leader."""
        self = cls.__new__(cls)
        self._client = None
        self.model_state = model_state
        self.parameters = model_state.parameters
        return self

    def _broadcast_state(self):
        """The leader's parameters and buffers to every rank of its group, in place."""
        import torch.distributed as dist
        state = self.model_state
        floats = [t.data for t in state.parameters] + [t.data for t in state.float_buffers]
        flat = torch.cat([t.reshape(-1) for t in floats])  # float32 throughout (ModelState checks)
        dist.broadcast(flat, src=self.leader, group=self.replica_group)
        for t in state.int_buffers:  # BatchNorm's counters, as they are
            dist.broadcast(t.data, src=self.leader, group=self.replica_group)
        if self.rank != self.leader:
            offset = 0
            for t in floats:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view_as(t))
                offset += n

    def _group_exchanged(self, exchanged):
        """Whether the leader exchanged, told to its whole group (one small broadcast a step);
        if so, its new state follows."""
        import torch.distributed as dist
        flag = self._exchanged_flag
        flag.fill_(1 if exchanged else 0)
        try:
            dist.broadcast(flag, src=self.leader, group=self.replica_group)
            if int(flag.item()):
                self._broadcast_state()
                return True
            return False
        except RuntimeError as e:
            # A rank of the group is gone: the group cannot go on as one replica. This process
            # ends with the error; the leader's connection closes without a goodbye, so the
            # center counts the group's place lost (and a relaunched group may take it back).
            raise tether.TetherError(
                f"replica group of ranks {self.leader}..{self.leader + self.replica_size - 1} (this is rank {self.rank}): "
                f"a rank of the group failed ({e}); the group gives up its place") from e

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

    @property
    def id(self):
        return -1 if self._client is None else super().id

    def step(self, samples=0):
        if self.replica_group is not None:
            # The group trains one replica: the leader counts its R ranks' samples.
            exchanged = self._client is not None and self._worker_step(samples * self.replica_size)
            return self._group_exchanged(exchanged)
        return self._worker_step(samples)

    def _worker_step(self, samples):
        if self._client is None:
            raise tether.TetherError("Worker.step: rank 0 hosts the center only (from_env(center_trains=False)); it "
                                     "has no worker to step: wait on worker.center")
        self.model_state.refresh_shadow()
        exchanged = super().step(samples)
        # Only joining again (the center had lost this worker) writes b~ into the buffers.
        if exchanged and self.model_state.shadow_changed():
            self.model_state.take_shadow()
        return exchanged

    def finish(self):
        """The final exchange and goodbye (nothing on a rank 0 that only hosts the center). In a
        replica group the leader's final state then goes to the whole group."""
        report = None
        if self._client is not None:
            self.model_state.refresh_shadow()
            report = super().finish()
        if self.replica_group is not None:
            self._broadcast_state()
        if self.server is not None and self.center is None:
            # A rank's server outlives its worker: the others still exchange with it, and rank
            # 0 takes its final range before it may leave.
            self.server.service.wait()
        return report
