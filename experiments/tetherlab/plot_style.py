"""How plot.py names and colours things: human labels for config keys, a colour family per
strategy, and figure titles from a run's config.json and summary.json."""
import json
from collections import defaultdict
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

# Human names for the keys a sweep varies; others fall back to their last component.
KEY_LABELS = {
    "strategy.name": "strategy",
    "strategy.communication_window": "communication window τ",
    "strategy.moving_rate": "moving rate α",
    "strategy.allow_unstable": "unstable allowed",
    "strategy.gamma": "staleness γ",
    "strategy.outer_learning_rate": "outer learning rate",
    "strategy.outer_momentum": "outer momentum",
    "cluster.workers": "workers N",
    "cluster.step_delay_ms": "step delays (ms)",
    "training.optimizer.name": "optimizer",
    "training.optimizer.learning_rate": "learning rate η",
    "training.optimizer.momentum": "momentum",
    "training.batch_size": "batch size B",
    "training.epochs": "epochs",
    "training.seed": "seed",
    "data.validation_samples": "validation samples",
}
# One colour map per strategy: lines of one strategy share a hue, shaded by the other keys.
STRATEGY_COLOURS = {
    "sequential": "Greys", "averaging": "Blues", "easgd": "Purples", "aeasgd": "Greens",
    "eamsgd": "YlGn", "downpour": "RdPu", "adag": "Oranges", "dynsgd": "Reds",
    "adag-staleness": "YlOrBr", "diloco": "GnBu",
}
# The same keys in a legend entry, where a symbol reads better: "adag, τ = 16".
KEY_SYMBOLS = {
    "strategy.communication_window": "τ", "strategy.moving_rate": "α", "strategy.gamma": "γ", "cluster.workers": "N",
    "training.optimizer.learning_rate": "η", "training.batch_size": "B",
}
DATA_SETS = {"fashion-mnist": "Fashion-MNIST", "mnist": "MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
             "synthetic": "synthetic data"}


def label(key):
    return KEY_LABELS.get(key, key.split(".")[-1].replace("_", " "))


def read_json(path):
    return json.loads(path.read_text()) if path.is_file() else {}


def context(run_dir):
    """'Fashion-MNIST · mlp 784-256-128-10 · 10 epochs' from a run's config.json and summary.json."""
    config, summary = read_json(Path(run_dir) / "config.json"), read_json(Path(run_dir) / "summary.json")
    data = config.get("data", {})
    source = data.get("source", "")
    name = Path(data.get("dir", "")).name if source == "idx" else source
    parts = [DATA_SETS.get(name.lower(), name)] if name else []
    if summary.get("model"):
        parts.append(summary["model"])
    epochs = config.get("training", {}).get("epochs")
    if epochs:
        parts.append(f"{epochs} epoch{'s' if epochs != 1 else ''}")
    return " · ".join(parts)


def common_title(run_dirs):
    """The context shared by all runs, part by part (a part that differs is left out)."""
    contexts = [context(d).split(" · ") for d in run_dirs]
    return " · ".join(p for p in contexts[0] if p and all(p in c for c in contexts))


def set_name(accuracy_key):
    return "validation" if accuracy_key.startswith("validation") else "test"


def shades(strategy, count):
    cmap = plt.get_cmap(STRATEGY_COLOURS.get(strategy, "viridis"))
    return [cmap(x) for x in np.linspace(0.45, 0.95, count)] if count > 1 else [cmap(0.75)]


def colour_lines(lines):
    """lines: {line label: strategy}; a colour per line, one hue per strategy."""
    by_strategy = defaultdict(list)
    for line, strategy in lines.items():
        by_strategy[strategy].append(line)
    colours = {}
    for strategy, members in by_strategy.items():
        for line, colour in zip(members, shades(strategy, len(members))):
            colours[line] = colour
    return colours


def point_label(row, keys):
    if keys == ["strategy.name"]:
        return row["strategy.name"]
    def part(k):
        if k == "strategy.name":
            return row[k]
        return f"{KEY_SYMBOLS[k]} = {row[k]}" if k in KEY_SYMBOLS else f"{label(k)} {row[k]}"
    return ", ".join(part(k) for k in keys) or "all runs"
