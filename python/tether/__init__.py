"""tether: asynchronous elastic-averaging distributed training, from Python.

A center (CenterService) holds the central variable x~; workers (WorkerClient) keep their
parameters in their own float32 buffers (NumPy arrays, PyTorch tensors), which tether reads
and writes in place: call ``step()`` after each local optimizer step and the strategy
exchanges with the center every communication window. ``tether.torch`` does this for a
PyTorch model. See docs/python.md.

Threads: a WorkerClient belongs to one training loop (its step() and finish() are not called
concurrently); tether touches its buffers only inside those calls and when connecting. A
CenterService may be used from any thread (snapshot() and stats() while it trains).
"""
import collections
import json
import numbers
import os

from . import _tether
from ._tether import (TetherError, RunFailedError, Launcher, keep_freed_memory_mapped, load_plugin,  # noqa: F401
                      read_launcher, set_flush_denormals, __version__)

__all__ = ["CenterService", "WorkerClient", "Snapshot", "connect", "connect_pointer", "load_checkpoint", "TetherError",
           "RunFailedError", "Launcher", "read_launcher", "load_plugin", "set_flush_denormals", "keep_freed_memory_mapped",
           "launcher_keys", "remove_launcher_secret"]

Snapshot = collections.namedtuple("Snapshot", ["x", "version", "buffers"])
Snapshot.__doc__ = ("x~ (a float32 NumPy array, a copy) and its version (updates applied), taken at one instant, "
                    "and b~, the averaged model buffers (empty without buffers).")


def launcher_keys(rank, job_id, directory="", join_timeout_ms=None):
    """The CURVE key options of a launcher job's rank (torchrun, srun, mpirun), to pass as
    ``**options`` to the center (rank 0) and to every worker: all ranks derive the same keys from
    the TETHER_SECRET environment variable, or else from a secret rank 0 writes to
    ``directory/run-<job_id>/secret`` (default ``~/.tether``, user-only; every rank must see it)
    and the others read within join_timeout_ms (None: the option's default). Raises TetherError (a
    config error) saying how to set TETHER_SECRET when neither can work. docs/python.md, "Security"."""
    return _tether.launcher_keys(int(rank), str(job_id), str(directory),
                                 None if join_timeout_ms is None else int(join_timeout_ms))


def remove_launcher_secret(rank, job_id, directory=""):
    """Rank 0, once its center is done: removes the secret launcher_keys wrote for ``job_id``
    (nothing on another rank, or when TETHER_SECRET gave the secret)."""
    _tether.remove_launcher_secret(int(rank), str(job_id), str(directory))


def strategy_text(strategy):
    """A strategy as the C++ side takes it: a JSON block (docs/config.md, `strategy`); None: ""
    (a worker then takes the center's)."""
    if strategy is None or strategy == "":
        return ""
    if isinstance(strategy, dict):
        return json.dumps(strategy)
    if isinstance(strategy, str):
        return strategy if strategy.lstrip().startswith("{") else json.dumps({"name": strategy})
    raise TypeError(f"strategy: expected a name such as 'adag' or a dict such as {{'name': 'adag'}}, got {strategy!r}")


def option(options, name):
    """The option `name` as `options` (a dict of keyword arguments) gives it, else its default:
    the C++ one, so that Python keeps no copy of it."""
    return options[name] if name in options else _tether.default_options()[name]


def _options(**overrides):
    if "overlap_exchange" in overrides:
        raise TypeError("overlap_exchange: replaced by the strategy's overlap_steps, the local steps after which an "
                        "exchange's reply lands (e.g. strategy={'name': 'adag', 'overlap_steps': 5}); "
                        "overlap_exchange=True was overlap_steps = communication_window")
    unknown = set(overrides) - set(_tether.default_options())
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(_tether.default_options())}")
    if isinstance(overrides.get("run_dir"), os.PathLike):  # a pathlib.Path, as users hold directories
        overrides["run_dir"] = os.fspath(overrides["run_dir"])
    options = _tether.default_options()
    options.update(overrides)
    return options


def _worker_options(workers, strategy, **overrides):
    """A worker's strategy, workers and options; strategy and workers None: the center's."""
    return dict(strategy=strategy_text(strategy), workers=0 if workers is None else int(workers),
                options=_options(**overrides))


def _scalar(name, value):
    """A logged value as a float: a real number, or a one-element array or tensor (``loss.item()``)."""
    if hasattr(value, "item") and not isinstance(value, (bool, str, bytes)):
        try:
            value = value.item()
        except (ValueError, RuntimeError) as e:
            raise TypeError(f"log(): {name} is {type(value).__name__} of more than one element; log a scalar") from e
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"log(): {name} is {type(value).__name__} {value!r}; a scalar is a number")
    return float(value)


def _span(index, buffer, what="parameter"):
    """(pointer, count, is_cuda) of one parameter (or model) buffer, which tether will write in place."""
    import numpy
    if isinstance(buffer, numpy.ndarray):
        if buffer.dtype != numpy.float32 or not buffer.flags.c_contiguous:
            raise TypeError(f"{what} {index}: tether needs a float32, C-contiguous array (got dtype {buffer.dtype}"
                            f"{'' if buffer.flags.c_contiguous else ', strided'}); "
                            "use numpy.ascontiguousarray(x, dtype=numpy.float32)")
        if not buffer.flags.writeable:
            raise ValueError(f"{what} {index}: tether writes the {what}s in place: the array must be writable")
        return buffer.ctypes.data, buffer.size, False
    if hasattr(buffer, "data_ptr") and hasattr(buffer, "is_cuda"):  # a torch.Tensor, without importing torch
        if str(buffer.dtype) != "torch.float32" or not buffer.is_contiguous():
            raise TypeError(f"{what} {index}: tether needs a float32, contiguous tensor (got {buffer.dtype}"
                            f"{'' if buffer.is_contiguous() else ', not contiguous'}, shape {tuple(buffer.shape)})")
        return buffer.data_ptr(), buffer.numel(), bool(buffer.is_cuda)
    raise TypeError(f"{what} {index}: expected a NumPy array or a PyTorch tensor, got {type(buffer).__name__}")


def _spans(parameters, buffers=None):
    """The buffers as (pointer, count) pairs, whether they are CUDA memory, and their owners;
    the model buffers' pairs too (one kind of memory for both)."""
    if not isinstance(parameters, (list, tuple)):
        parameters = [parameters]
    parameters = list(parameters)
    buffers = [] if buffers is None else list(buffers) if isinstance(buffers, (list, tuple)) else [buffers]
    spans, buffer_spans, cuda = [], [], set()
    for i, p in enumerate(parameters):
        pointer, count, is_cuda = _span(i, p)
        spans.append((pointer, count))
        cuda.add(is_cuda)
    for i, b in enumerate(buffers):
        pointer, count, is_cuda = _span(i, b, "buffer")
        buffer_spans.append((pointer, count))
        cuda.add(is_cuda)
    if len(cuda) > 1:
        raise ValueError("parameters and buffers: all in host memory or all on the GPU, not both")
    return spans, cuda == {True}, parameters + buffers, buffer_spans


class WorkerClient:
    """One worker over a list of float32 buffers (NumPy arrays, PyTorch CPU tensors, or CUDA
    tensors through their data pointers), written in place: no copies. The strategy sees them
    as one vector, in the order given.

    ``center`` is a CenterService in this process (its strategy and options apply) or the
    center's address, with options as the center was started with; ``strategy`` and
    ``workers`` left None are the center's (asked of it before joining), and given ones must
    match it (a different strategy is refused naming it first: "strategy.name: center adag,
    worker aeasgd"). Blocks until the center welcomed the worker (it waits for all
    ``workers``), then sets the buffers to x~. ``step()`` raises when the center is gone
    (silent for worker_timeout_ms, then not back within center_restart_ms) and after ``finish()``.
    With the strategy's ``overlap_steps`` d > 0 each exchange runs on tether's thread against a
    copy while training goes on, its reply landing d steps later (the d steps kept).

    ``buffers``: model buffers (float32, like the parameters), averaged rather than trained:
    sent with every exchange, set to the center's average b~ on joining (docs/python.md).
    """

    def __init__(self, center, parameters, strategy=None, workers=None, buffers=None, **options):
        spans, cuda, owners, buffer_spans = _spans(parameters, buffers)
        if isinstance(center, CenterService):
            if options or strategy is not None or workers is not None:
                raise TypeError("WorkerClient(center, ...): the strategy, workers and options are the center's; "
                                "give them to CenterService")
            self._client = center._service.connect_spans(spans, cuda, owners, buffer_spans)
        elif isinstance(center, str):
            self._client = _tether.connect_spans(center, spans, cuda, owners, buffers=buffer_spans,
                                                 **_worker_options(workers, strategy, **options))
        else:
            raise TypeError(f"WorkerClient: expected a CenterService or an address such as 'tcp://host:5555', "
                            f"got {type(center).__name__}")

    @property
    def id(self):
        return self._client.id

    @property
    def running(self):
        """Whether to go on training: False once a reply said the run's budget is trained
        (``budget_samples``; ``while worker.running:`` then ends within one window of it, fast
        workers having taken more of it), and after ``finish()``; without a budget, True until
        then."""
        return self._client.running

    @property
    def communication_window(self):
        """The strategy's window, in local steps between two exchanges."""
        return self._client.communication_window

    @property
    def place_samples(self):
        """The samples this worker's place (its id) had trained when the center welcomed it: 0
        for a new place, more for a restarted rank that took its place back."""
        return self._client.place_samples

    def lease(self, samples, total=0):
        """The next block of the data to train, ``(start, count)``
        positions of the run's stream (count at most ``samples``; 0: no work is left), from the
        center. ``total``: the positions your data give (size x passes), used when the center
        has no ``budget_samples``. tether.torch.Worker.batches maps them to a data set's rows."""
        return self._client.lease(int(samples), int(total))

    def ask_lease(self, samples, total=0):
        """Asks for the next block now, without waiting; the next ``lease()`` takes it."""
        self._client.ask_lease(int(samples), int(total))

    def step(self, samples=0):
        """After each local optimizer step; returns True when it exchanged with the center or a
        reply that landed late (the strategy's overlap_steps) changed the parameters."""
        return self._client.step(samples)

    def finish(self):
        """The final exchange (nothing trained is lost) and goodbye; returns the worker's counters:
        a dict of the fields of WorkerReport (<tether/tether.hpp>), rejoins among them."""
        return self._client.finish()

    def log(self, **scalars):
        """This worker's own scalars, e.g. ``log(loss=0.31, validation_accuracy=0.87)``, into the
        center's run directory (``run_dir``): one metrics.jsonl row tagged with this worker's id,
        the samples it trained and the center's time. Values are numbers (a NumPy or one-element
        PyTorch scalar too; NaN is written as null); names are 1 to 64 of ``[A-Za-z0-9_.-/]``,
        not wall_seconds, samples, worker or worker_samples. Never waits for the center."""
        if not scalars:
            raise TypeError("log(): give at least one scalar, e.g. log(loss=0.31)")
        return self._client.log([(name, _scalar(name, value)) for name, value in scalars.items()])


class CenterService:
    """The center on its own thread, with x~(0) = ``initial`` (a float32 vector).

    ``strategy`` and ``workers`` left None are ServiceOptions' defaults: "aeasgd", 1 worker.
    ``address=""`` keeps it private to this process (use ``connect_worker``); give
    ``"tcp://127.0.0.1:*"`` or ``"tcp://*:5555"`` for workers in other processes, then read
    ``.address``. Options, as ServiceOptions in C++ and the "cluster" keys of a config file
    (same defaults and checks; milliseconds): join_timeout_ms, worker_timeout_ms (10000), center_restart_ms (60000),
    heartbeat_ms (2000, at most half of worker_timeout_ms), reply_timeout_ms, round_timeout_ms; quorum;
    servers (x~ split into that many server ranges, each served on its own thread: ``address``
    then gives one per server, e.g. ``",".join(["tcp://127.0.0.1:*"] * 3)``, and ``.address``
    lists them, server 0 first, separated by ','); codec, reply_codec and
    topk_ratio (what crosses the wire: "float32", "fp16", "bf16", "int8", "int4", "topk"; "same");
    CURVE: center_public_key, center_secret_key, worker_public_key, worker_secret_key (each a
    key file or the Z85 key itself), authorized_workers (a file, or keys separated by ','),
    and insecure (True: a tcp:// address beyond loopback without keys; refused otherwise).
    max_failed_share (0.5: ``wait()`` raises RunFailedError when more workers than this share were lost).
    warmstart_samples (0; Dean et al.'s warmstart: the first worker trains alone until the center
    counted this many samples, the others' joins wait until then; asynchronous strategies only).
    flush_denormals (True: the center's thread flushes subnormal floats to zero; yours never change).
    server_placement ("center"; "ranks": this service is server ``rank`` of ``servers``, one per
    rank of a launcher's job, bound at ``address``, telling rank 0's server at ``server0_address``
    that the others reach it at ``rank_address``; Worker.from_env(server_placement="ranks") sets
    these four from the launcher, and gives the strategy "" on ranks other than 0: rank 0's).
    A worker in another process gives the same options and ``.address`` whole.
    ``buffers``: b~(0), the model buffers' initial values (a float32 vector), when the workers
    have buffers; their count is agreed like the parameter count.

    ``run_dir``: a run directory as ``tether run`` writes one (config.json, metrics.jsonl,
    exchanges.jsonl, checkpoint.bin, summary.json when the run ends; docs/python.md, "Run
    records"): the center's exchange statistics every ``metrics_seconds`` (10) and/or
    ``metrics_samples`` (0: off), the scalars workers ``log()``, a checkpoint every
    ``checkpoint_seconds`` (60) and at the end. ``resume=True`` goes on from its checkpoint
    (``initial`` and ``buffers`` then only give the sizes). These are the center's: a worker
    given them ignores them.
    """

    def __init__(self, initial, strategy=None, workers=None, address="", buffers=None, **options):
        import numpy
        initial = numpy.ascontiguousarray(initial, dtype=numpy.float32).reshape(-1)
        buffers = numpy.ascontiguousarray([] if buffers is None else buffers, dtype=numpy.float32).reshape(-1)
        self._service = _tether.start_center(initial, strategy=None if strategy is None else strategy_text(strategy),
                                             workers=None if workers is None else int(workers), address=address,
                                             options=_options(**options), initial_buffers=buffers)

    @classmethod
    def _taken_over(cls, standby):
        """The center a Standby (``_tether.start_standby``) started when it took over; the
        standby owns it and is kept with it."""
        center = cls.__new__(cls)
        center._service, center._standby = standby.center, standby
        return center

    @property
    def address(self):
        return self._service.address

    def connect_worker(self, parameters, buffers=None):
        """A worker in this process over ``parameters`` (one buffer or a list), set to x~ on join,
        and its model ``buffers``, set to b~."""
        return WorkerClient(self, parameters, buffers=buffers)

    def snapshot(self):
        """x~, its version and b~ now, while the workers train (or at the end, after ``wait()``:
        the final state): a Snapshot."""
        return Snapshot(*self._service.snapshot_with_buffers())

    def wait(self):
        """Blocks until every worker finished (or was lost); returns the final x~. Raises
        RunFailedError (a TetherError) when more than ``max_failed_share`` (0.5) of the workers
        were lost or no update reached x~, as ``tether run`` exits 1; ``snapshot()`` and
        ``stats()`` still give the final state and the counters then."""
        return self._service.wait()

    def stats(self):
        """The center's counters now: updates, staleness, bytes, rejected messages, lost workers."""
        return json.loads(self._service.stats_json())

    @property
    def is_center(self):
        """Whether wait() gives the run's x~ whole and its verdict: a center, rank 0's server,
        and with servers on the ranks rank 1's once it took a lost rank 0's range over."""
        return self._service.is_center


def load_checkpoint(path):
    """A run directory's checkpoint (or one checkpoint file) as a Snapshot: x~, its version and
    b~; a run of several servers is assembled from their checkpoints."""
    return Snapshot(*_tether.load_checkpoint(str(path)))


def connect(address, parameters, strategy=None, workers=None, **options):
    """A worker in any process: ``WorkerClient(address, parameters, ...)``; the center's strategy
    and workers unless given."""
    return WorkerClient(address, parameters, strategy=strategy, workers=workers, **options)


def connect_pointer(address, pointer, count, owner, cuda=False, strategy=None, workers=None, **options):
    """As ``connect``, over ``count`` floats at ``pointer`` (host or CUDA memory); ``owner``
    is kept alive as long as the worker (e.g. the tensor whose ``data_ptr()`` this is)."""
    client = WorkerClient.__new__(WorkerClient)
    client._client = _tether.connect_spans(address, [(int(pointer), int(count))], bool(cuda), [owner],
                                           **_worker_options(workers, strategy, **options))
    return client


# Learning-rate schedules, as training.optimizer.schedule: LearningRateSchedule(schedule,
# total_steps, steps_per_epoch=0, warmup_steps=0).scale(step); torch's LambdaLR takes it as it is.
from ._tether import LearningRateSchedule  # noqa: E402
__all__.append("LearningRateSchedule")
