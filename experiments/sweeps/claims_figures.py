#!/usr/bin/python3
"""The figures of docs/results.md that plot.py's generic sweep figures cannot draw, because
the keys they compare vary together (tau = N and 2N, a learning rate tuned per method):

    experiments/sweeps/claims_figures.py [--sweeps sweeps] [--out docs/results]

adag_scaling      final test accuracy against N, one line per window rule (tau = 5, N, 2N),
                  solid without and dashed with warm-up
window_tolerance  final test accuracy against tau, ADAG and DOWNPOUR, each at its tuned rate
easgd_stability   final test accuracy against beta = N alpha, diverged seeds marked
Each point is the mean over seeds with a band of one sample standard deviation; a sweep that
is missing is skipped with a note. Needs Debian's python3-matplotlib.
"""
import argparse
import csv
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLE = "Fashion-MNIST · mlp 784-256-128-10 · 10 epochs"


def runs(sweep_dir):
    path = Path(sweep_dir) / "summary.csv"
    return list(csv.DictReader(path.open())) if path.is_file() else None


def mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def line(ax, xs, groups, **style):
    means = [mean_sd(groups[x])[0] * 100 for x in xs]
    sds = [mean_sd(groups[x])[1] * 100 for x in xs]
    ax.plot(xs, means, marker="o", **style)
    ax.fill_between(xs, [m - s for m, s in zip(means, sds)], [m + s for m, s in zip(means, sds)],
                    alpha=0.15, color=style.get("color"))


def finish(fig, ax, path, xlabel):
    ax.set_xlabel(xlabel)
    ax.set_ylabel("final test accuracy (%)\n(mean ± sd over seeds)")
    ax.set_title(TITLE, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(path)


def adag_scaling(rows, out):
    # (rule, warm-up) -> N -> accuracies; the rule is tau relative to N.
    series = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if not r["final_test_accuracy"]:
            continue
        n, tau = int(r["cluster.workers"]), int(r["strategy.communication_window"])
        rule = "τ = 5" if tau == 5 else "τ = N" if tau == n else "τ = 2N" if tau == 2 * n else None
        if rule:
            series[(rule, float(r["training.optimizer.warmup_epochs"]) > 0)][n].append(float(r["final_test_accuracy"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = {"τ = 5": "tab:red", "τ = N": "tab:orange", "τ = 2N": "tab:brown"}
    for (rule, warm), by_n in sorted(series.items()):
        xs = sorted(by_n)
        line(ax, xs, by_n, color=colours[rule], linestyle="--" if warm else "-",
             label=f"ADAG, {rule}" + (", warm-up 1 epoch" if warm else ""))
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 4, 8, 16], ["1", "4", "8", "16"])
    finish(fig, ax, out / "adag_scaling" / "final_test_accuracy_by_window_rule.png", "workers N (η tuned per N at τ = N)")


def window_tolerance(rows, out):
    # (strategy, learning rate) -> tau -> accuracies
    series = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["final_test_accuracy"]:
            key = (r["strategy.name"], float(r["training.optimizer.learning_rate"]))
            series[key][int(r["strategy.communication_window"])].append(float(r["final_test_accuracy"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = {"adag": ["tab:orange"], "downpour": ["tab:purple", "tab:pink"]}
    for (name, rate), by_tau in sorted(series.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        xs = sorted(by_tau)
        colour = colours.get(name, ["tab:gray"]).pop(0) if colours.get(name) else "tab:gray"
        line(ax, xs, by_tau, color=colour, label=f"{name}, η = {rate:g}")
    ax.set_xscale("log")
    ax.set_xticks([1, 2, 5, 10, 20, 50], ["1", "2", "5", "10", "20", "50"])
    finish(fig, ax, out / "window_tolerance" / "final_test_accuracy_vs_window.png", "communication window τ (N = 8)")


def easgd_stability(rows, out, workers=4):
    by_beta, diverged = defaultdict(list), defaultdict(int)
    for r in rows:
        beta = float(r["strategy.moving_rate"]) * workers
        if r["status"].startswith("failed"):
            diverged[beta] += 1
        if r["final_test_accuracy"]:
            by_beta[beta].append(float(r["final_test_accuracy"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = sorted(by_beta)
    line(ax, xs, by_beta, color="tab:purple", label=f"synchronous EASGD, N = {workers}")
    for beta, count in diverged.items():
        ax.annotate(f"diverged\n({count} of {len(by_beta[beta]) or count} seeds)", (beta, mean_sd(by_beta[beta])[0] * 100)
                    if by_beta[beta] else (beta, 50), textcoords="offset points", xytext=(0, 12), ha="center", fontsize=8)
    ax.axvline(2 * workers / (workers + 1), color="grey", linestyle=":", label="β = 2N / (N + 1)")
    ax.axvline(1.0, color="grey", linestyle="--", label="β = 1 (the paper's bound)")
    finish(fig, ax, out / "easgd_stability" / "final_test_accuracy_vs_beta.png", "β = N α")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweeps", type=Path, default=Path("sweeps"))
    p.add_argument("--out", type=Path, default=Path("docs/results"))
    args = p.parse_args()
    for name, draw in (("adag_scaling", adag_scaling), ("window_tolerance", window_tolerance),
                       ("easgd_stability", easgd_stability)):
        rows = runs(args.sweeps / name)
        if rows is None:
            print(f"{args.sweeps / name}: no summary.csv, skipped")
        else:
            draw(rows, args.out)


if __name__ == "__main__":
    main()
