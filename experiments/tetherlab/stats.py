"""Means over seeds with 95% confidence intervals, and ratios of paired runs with their own."""
import math
import statistics

# Two-sided 95% quantiles of Student's t by degrees of freedom (1..30); beyond, 1.96.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def interval(values):
    """(mean, 95% half-width, sd) of a list of at least one value."""
    mean = statistics.mean(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    sd = statistics.stdev(values)
    t = T95[len(values) - 2] if len(values) - 1 <= len(T95) else 1.96
    return mean, t * sd / math.sqrt(len(values)), sd


def ratio_interval(pairs):
    """The ratio a / b over paired runs [(a, b)] (one pair per seed): (geometric mean, low, high,
    pairs) with the 95% interval of the mean log ratio, so a ratio's own interval rather than one
    of each side; low and high are nan for one pair, and None is returned for none."""
    logs = [math.log(a / b) for a, b in pairs]
    if not logs:
        return None
    mean, half, _ = interval(logs)
    if math.isnan(half):
        return math.exp(mean), float("nan"), float("nan"), 1
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs)
