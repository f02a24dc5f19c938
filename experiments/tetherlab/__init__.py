"""What the experiments' scripts share: statistics over seeds (stats), the run directories and
invocation of `tether sweep` (tether_sweep), and the figures' labels and colours (plot_style).

Imported as `tetherlab.*` with the repository's experiments/ on the module path:
`PYTHONPATH=experiments:examples/python`, from the repository root (experiments/README.md,
"Running"). experiments/plot.py, beside this package, finds it without."""
