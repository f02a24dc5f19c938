"""torchft's DiLoCo as this repository's comparisons run it: every rank is a replica group of one
(its own store at MASTER_ADDR / MASTER_PORT, torchft's Manager over gloo with a synchronous
quorum that needs every rank), torchft.local_sgd.DiLoCo over the model or its fragments (the inner
optimizer every step; every sync_every steps the pseudo-gradient all-reduced in one bucketized
buffer, then the outer Nesterov SGD). Used by examples/python/language_model.py and
experiments/testbed/ddp_baseline.py; needs PyTorch 2.x and torchft (scripts/install-deps.sh
--peers) and a lighthouse (torchft_lighthouse; TORCHFT_LIGHTHOUSE names it)."""
import os
import shutil
import sys
from datetime import timedelta

import torch


def add_arguments(parser):
    parser.add_argument("--sync-every", type=int, default=50, help="torchft: local steps between synchronizations (H)")
    parser.add_argument("--fragments", type=int, default=1, help="torchft: streaming DiLoCo's fragments (1: DiLoCo)")
    parser.add_argument("--fragment-delay", type=int, default=0,
                        help="torchft: steps a fragment's all-reduce overlaps with training (tau)")
    parser.add_argument("--outer-lr", type=float, default=0.7, help="torchft: the outer Nesterov SGD's rate")
    parser.add_argument("--outer-momentum", type=float, default=0.9, help="torchft: the outer Nesterov SGD's momentum")
    parser.add_argument("--torchft-timeout-s", type=float, default=120.0,
                        help="torchft: the Manager's connect and operation timeouts (gloo's too)")
    parser.add_argument("--torchft-quorum-timeout-s", type=float, default=0,
                        help="torchft: the Manager's quorum timeout (0: --torchft-timeout-s); above the "
                             "lighthouse's join timeout, or a replica whose quorum waits on a straggler fails")
    parser.add_argument("--min-replicas", type=int, default=0,
                        help="torchft: the quorum's minimum replicas (0: every rank). Fewer: the run goes on "
                             "without a lost replica, and one that comes back heals from a peer over the process "
                             "group (PGTransport, as torchft's own DiLoCo example does)")


class TorchftDiLoCo:
    """Entered on construction; close(steps) leaves it and fails if a synchronization that was
    due did not commit (torchft drops a round whose all-reduce failed and goes on, so a run whose
    every round failed would otherwise end at its initial loss and exit 0)."""

    def __init__(self, model, fragments, inner, args, rank, world):
        from torch.distributed import TCPStore
        from torchft import Manager, ProcessGroupGloo
        from torchft.local_sgd import DiLoCo
        if args.sync_every % len(fragments):
            raise ValueError(f"--sync-every {args.sync_every} must be a multiple of --fragments {len(fragments)} "
                             "(torchft syncs one fragment every sync_every / fragments steps)")
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        # The replica group's store; torchrun would open it, a group of one opens its own.
        self.store = TCPStore(host, port, is_master=True, wait_for_workers=False)
        timeout = timedelta(seconds=args.torchft_timeout_s)
        self.elastic = 0 < args.min_replicas < world
        pg = ProcessGroupGloo(timeout=timeout)
        recovery = {}
        if self.elastic:
            from torchft.checkpointing.pg_transport import PGTransport
            # Live recovery over the replicas' own process group: the default HTTP transport
            # advertises socket.gethostname(), which another testbed host cannot reach.
            recovery["checkpoint_transport"] = PGTransport(pg, timeout=timeout, device=torch.device("cpu"))
        self.manager = Manager(
            pg=pg, min_replica_size=args.min_replicas if self.elastic else world, use_async_quorum=False,
            **recovery,
            load_state_dict=lambda state: (model.load_state_dict(state["model"]), inner.load_state_dict(state["inner"])),
            state_dict=lambda: {"model": model.state_dict(), "inner": inner.state_dict()},
            replica_id=f"replica{rank}", store_addr=host, store_port=port, rank=0, world_size=1, hostname=host,
            timeout=timeout, connect_timeout=timeout,
            quorum_timeout=timedelta(seconds=args.torchft_quorum_timeout_s) if args.torchft_quorum_timeout_s > 0 else timeout,
            # Every rank seeds the same initial model, so the first quorum need not copy it from
            # one replica (torchft's advice for seeded runs; that copy goes through an HTTP server
            # at socket.gethostname(), which a testbed host cannot reach).
            init_sync=False)
        outer = [torch.optim.SGD(f.parameters(), lr=args.outer_lr, momentum=args.outer_momentum, nesterov=True)
                 for f in fragments]
        self.period = args.sync_every // len(fragments)  # steps between two fragment synchronizations
        self.diloco = DiLoCo(self.manager, fragments, inner, outer, sync_every=args.sync_every, pin_memory=False,
                             use_bucketization=True, fragment_sync_delay=args.fragment_delay)
        # One quorum before training: every replica has joined and gloo is configured, as DDP's
        # constructor (its broadcast) and tether's welcome (server 0 waits for every worker) have
        # their ranks start together; otherwise rank 0's clock would count the slowest rank's
        # start-up into its first window.
        self.manager.start_quorum()
        self.manager.wait_quorum()
        self.diloco.__enter__()

    def synced(self, step):
        """Whether a synchronization ended at this step: rank 0's parameters (with several
        fragments, the last-synced fragment's) are then the global model."""
        return step % self.period == 0

    def close(self, steps):
        """Leaves DiLoCo after `steps` inner steps; returns the commits made."""
        self.diloco.__exit__(None, None, None)
        commits, due = self.manager.current_step(), steps // self.period
        self.manager.shutdown(wait=False)
        # Elastic: a round a lost replica broke is dropped and the run goes on, as it should.
        if commits < due and not self.elastic:
            raise SystemExit(f"torchft committed {commits} of the {due} synchronizations due; see the errors above")
        return commits


def version():
    import importlib.metadata
    return importlib.metadata.version("torchft")


def lighthouse_program():
    """torchft's lighthouse: beside this Python (a venv's bin), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "torchft_lighthouse")
    found = beside if os.access(beside, os.X_OK) else shutil.which("torchft_lighthouse")
    if not found:
        sys.exit("torchft needs torchft_lighthouse (pip install torchft; scripts/install-deps.sh --peers)")
    return found
