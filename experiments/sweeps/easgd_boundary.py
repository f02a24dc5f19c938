#!/usr/bin/python3
"""EASGD's stability boundary: where synchronous EASGD starts to diverge as beta = N alpha grows.

    experiments/sweeps/easgd_boundary.py [--out sweeps/easgd_boundary] [--jobs J]
        [--seeds 5] [--set KEY=VALUE] [--tether build/tether]

1. Scan: synchronous EASGD for N in {2, 4, 8, 16} x local optimizer {sgd 0.1, adam 1e-3} x
   tau in {1, 10} over beta from 0.8 to 2.2 in steps of 0.1 (alpha = beta / N <= 1), one seed
   per run, the budget of experiments/sweeps/fashion_base.json (10 epochs in all). Each cell bisects
   its grid (both ends, then the middle of the bracket; instability assumed monotone in beta,
   which step 2 checks at the bracket), about 6 runs per cell instead of 15.
2. Confirm: for each (N, optimizer, tau), the largest beta below the first unstable one and
   that first unstable beta run with --seeds seeds, so the measured boundary is bracketed.
A run is unstable when it ends diverged (run_failed, a worker's loss not finite) or its final
validation accuracy is below 0.5 (the center oscillates without a non-finite loss).

Theory (docs/results.md#3): for the directions the gradient barely moves, a round of tether's
synchronous rule maps the workers' mean y and the center z by [[1 - alpha, alpha], [beta,
1 - beta]], whose eigenvalue 1 - alpha - beta leaves the unit circle at beta = 2N / (N + 1).

Both steps are `tether sweep` runs into OUT (resumable: complete runs are skipped). Writes
OUT/boundary.csv (per N, optimizer, tau: the theory, the last stable and first unstable beta
of the scan, and the confirming seeds' counts), OUT/boundary.md and OUT/boundary.png. Run from
the repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

from tetherlab.tether_sweep import run_id

WORKERS = [2, 4, 8, 16]
OPTIMIZERS = [("sgd", 0.1), ("adam", 0.001)]
WINDOWS = [1, 10]
BETAS = [round(0.8 + 0.1 * i, 1) for i in range(15)]  # 0.8 .. 2.2


def betas(workers):
    """The scan's betas for N workers: alpha = beta / N must stay <= 1 (a worker cannot move
    past the center), so N = 2 stops at beta = 2.0."""
    return [b for b in BETAS if b <= workers]


def alpha(beta, workers):
    return float(f"{beta / workers:.6g}")


def point(workers, optimizer, rate, window, beta):
    return {"cluster.workers": workers, "training.optimizer.name": optimizer,
            "training.optimizer.learning_rate": rate, "strategy.communication_window": window,
            "strategy.moving_rate": alpha(beta, workers)}


def outcome(run_dir):
    """(unstable, final validation accuracy, local step of divergence or None); None if not run."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    s = json.loads(path.read_text())
    accuracy = s.get("final_validation_accuracy")
    reason = s.get("failure_reason") or ""
    step = None
    if "diverged at step" in reason:
        step = int(reason.split("diverged at step")[1].split()[0].strip(",;:)"))
    diverged = bool(s.get("diverged_workers"))
    return diverged or accuracy is None or accuracy < 0.5, accuracy, step


def bracket(results):
    """(largest stable beta below the smallest unstable one, smallest unstable beta); None where none."""
    first = min((b for b, r in results.items() if r[0]), default=None)
    stable = max((b for b, r in results.items() if not r[0] and (first is None or b < first)), default=None)
    return stable, first


def next_betas(grid, results):
    """The betas to run next for one cell: both ends of its grid first; then the middle of the
    bracket; none when the bracket is adjacent on the grid (or an end decided it)."""
    if not results:
        return [grid[0], grid[-1]]
    stable, first = bracket(results)
    if first is None or stable is None:
        return []  # stable at the top of the grid, or unstable already at its bottom
    lo, hi = grid.index(stable), grid.index(first)
    return [grid[(lo + hi) // 2]] if hi - lo > 1 else []


def sweep(tether, name, points, repeats, out, jobs, assignments):
    base = str((Path(__file__).resolve().parent / "fashion_base.json"))
    document = {"name": name, "base": base, "points": points, "repeats": repeats}
    path = out / f"{name}_sweep.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    command = [tether, "sweep", str(path), "--out", str(out), "--jobs", str(jobs),
               "--set", "strategy.name=easgd", "--set", "strategy.allow_unstable=true"]
    for assignment in assignments:
        command += ["--set", assignment]
    print("easgd_boundary:", " ".join(command), flush=True)
    # A sweep whose runs diverge exits non-zero by design; the runs' summaries are what counts.
    subprocess.run(command, stdout=subprocess.DEVNULL)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("sweeps/easgd_boundary"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], dest="assignments", help="KEY=VALUE for every run")
    parser.add_argument("--tether", default=str(Path(__file__).resolve().parents[2] / "build" / "tether"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    cells = [(n, opt, rate, tau) for n in WORKERS for opt, rate in OPTIMIZERS for tau in WINDOWS]
    # Bisection on each cell's beta grid, all cells one sweep per step: the ends first, then the
    # middle of the bracket between the largest stable and the smallest unstable beta run so far.
    scans = {cell: {} for cell in cells}  # cell -> {beta: outcome}
    while True:
        wanted = {cell: next_betas(betas(cell[0]), results) for cell, results in scans.items()}
        if not any(wanted.values()):
            break
        points = [point(n, opt, rate, tau, b) for (n, opt, rate, tau), bs in wanted.items() for b in bs]
        sweep(args.tether, "scan", points, 1, args.out, args.jobs, args.assignments)
        for (n, opt, rate, tau), bs in wanted.items():
            for b in bs:
                result = outcome(args.out / run_id(list(point(n, opt, rate, tau, b).items()), 0))
                if result is None:
                    sys.exit(f"easgd_boundary: {args.out}: N={n} {opt} tau={tau} beta={b} left no summary.json")
                scans[(n, opt, rate, tau)][b] = result

    brackets = []
    for (n, opt, rate, tau), results in scans.items():
        stable, first = bracket(results)
        brackets.append((n, opt, rate, tau, sorted(results.items()), stable, first))
    confirm = [point(n, opt, rate, tau, b) for n, opt, rate, tau, _, stable, first in brackets
               for b in (stable, first) if b is not None]
    sweep(args.tether, "confirm", confirm, args.seeds, args.out, args.jobs, args.assignments)

    rows = []
    for n, opt, rate, tau, results, stable, first in brackets:
        def seeds(beta):
            if beta is None:
                return ""
            runs = [outcome(args.out / run_id(list(point(n, opt, rate, tau, beta).items()), r))
                    for r in range(args.seeds)]
            return f"{sum(1 for r in runs if r and r[0])}/{sum(1 for r in runs if r)}"

        steps = [r[2] for b, r in results if r[2] is not None and b == first]
        rows.append([n, opt, rate, tau, round(2 * n / (n + 1), 3), stable if stable is not None else "",
                     first if first is not None else f"> {betas(n)[-1]}", seeds(stable), seeds(first),
                     steps[0] if steps else "",
                     " ".join(f"{b}:{'U' if r[0] else 'S'}({r[1] if r[1] is not None else float('nan'):.3f})" for b, r in results)])
    head = ["workers", "optimizer", "learning_rate", "window", "theory_beta", "last_stable_beta",
            "first_unstable_beta", "unstable_seeds_at_last_stable", "unstable_seeds_at_first_unstable",
            "diverged_at_local_step", "scan"]
    with open(args.out / "boundary.csv", "w", newline="") as f:
        csv.writer(f).writerows([head] + rows)
    lines = ["| " + " | ".join(head[:-1]) + " |", "|" + "---|" * (len(head) - 1)]
    lines += ["| " + " | ".join(str(x) for x in row[:-1]) + " |" for row in rows]
    (args.out / "boundary.md").write_text("# EASGD's stability boundary\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    figure(brackets, args.out / "boundary.png")
    return 0


def figure(brackets, path):
    """The measured brackets (last stable to first unstable beta) beside 2N / (N + 1)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    ns = [2 ** (i / 20) * 2 for i in range(61)]
    ax.plot(ns, [2 * n / (n + 1) for n in ns], "k-", label="theory: 2N / (N + 1)")
    styles = {("sgd", 1): ("C0", -0.09), ("sgd", 10): ("C1", -0.03), ("adam", 1): ("C2", 0.03), ("adam", 10): ("C3", 0.09)}
    for n, opt, _, tau, _, stable, first in brackets:
        colour, shift = styles[(opt, tau)]
        x = n * 2 ** shift
        low = stable if stable is not None else 0.8
        high = first if first is not None else betas(n)[-1]
        ax.plot([x, x], [low, high], "-", color=colour, lw=4, alpha=0.7,
                label=f"{opt}, τ = {tau}" if n == WORKERS[0] else None)
    ax.set_xscale("log", base=2)
    ax.set_xticks(WORKERS, [str(n) for n in WORKERS])
    ax.set_xlabel("workers N")
    ax.set_ylabel("β = N α")
    ax.set_title("Synchronous EASGD: last stable to first unstable β")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
