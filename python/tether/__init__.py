"""tether: asynchronous elastic-averaging distributed training, from Python.

A center (CenterService) holds the central variable x~; workers (WorkerClient) keep their
parameters in their own float32 buffer, which tether reads and writes in place: call
``step()`` after each local optimizer step and the strategy exchanges with the center every
communication window. ``tether.torch`` does this for a PyTorch model. See docs/python.md.
"""
import json

from . import _tether
from ._tether import TetherError, set_flush_denormals, __version__  # noqa: F401

__all__ = ["CenterService", "WorkerClient", "connect", "TetherError", "set_flush_denormals"]

WorkerClient = _tether.WorkerClient


def strategy_text(strategy):
    """A strategy as the C++ side takes it: a JSON block (docs/config.md, `strategy`)."""
    if isinstance(strategy, dict):
        return json.dumps(strategy)
    if isinstance(strategy, str):
        return strategy if strategy.lstrip().startswith("{") else json.dumps({"name": strategy})
    raise TypeError(f"strategy: expected a name such as 'adag' or a dict such as {{'name': 'adag'}}, got {strategy!r}")


def _options(workers, strategy, **overrides):
    unknown = set(overrides) - set(_tether.default_options())
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(_tether.default_options())}")
    options = _tether.default_options()
    options.update(overrides)
    return dict(strategy=strategy_text(strategy), workers=int(workers), **options)


class CenterService:
    """The center on its own thread, with x~(0) = ``initial`` (a float32 vector).

    ``address=""`` keeps it private to this process (use ``connect_worker``); give
    ``"tcp://127.0.0.1:*"`` or ``"tcp://*:5555"`` for workers in other processes, then read
    ``.address``. Options (milliseconds): join_timeout_ms, worker_timeout_ms,
    reply_timeout_ms, round_timeout_ms, and quorum.
    """

    def __init__(self, initial, strategy="aeasgd", workers=1, address="", **options):
        import numpy
        initial = numpy.ascontiguousarray(initial, dtype=numpy.float32).reshape(-1)
        self._service = _tether.start_center(initial, address=address, **_options(workers, strategy, **options))

    @property
    def address(self):
        return self._service.address

    def connect_worker(self, array):
        """A worker in this process over ``array`` (float32, C-contiguous), set to x~ on join."""
        return self._service.connect_worker(array)

    def wait(self):
        """Blocks until every worker finished (or was lost); returns the final x~."""
        return self._service.wait()

    def stats(self):
        """The center's counters: updates, staleness, bytes, rejected messages, lost workers."""
        return json.loads(self._service.stats_json())


def connect(address, array, strategy="aeasgd", workers=1, **options):
    """A worker in any process, over ``array`` (float32, C-contiguous, written in place).

    Blocks until the center welcomed it (the center waits for all ``workers``), then sets
    ``array`` to x~. ``strategy`` and ``workers`` must be what the center was started with.
    """
    return _tether.connect_array(address, array, **_options(workers, strategy, **options))


def connect_pointer(address, pointer, count, owner, cuda=False, strategy="aeasgd", workers=1, **options):
    """As ``connect``, over ``count`` floats at ``pointer`` (host or CUDA memory); ``owner``
    is kept alive as long as the worker (e.g. the tensor whose ``data_ptr()`` this is)."""
    return _tether.connect_pointer(address, int(pointer), int(count), bool(cuda), owner,
                                   **_options(workers, strategy, **options))
