"""How sure a timing is: a median with its bootstrap confidence interval, a ratio of medians (the
speedup) with its own, and the number of decimals the interval supports.

Pure and torch-free. A figure needs `MIN_STEPS` steady steps; the interval is the percentile
bootstrap (resampled `RESAMPLES` times with a fixed seed, so the same recording always prints the
same interval). Steps come in runs of the program: with several runs the bootstrap resamples the runs,
then the steps within each, so a machine that was busier during one run than another widens the
interval instead of passing for a speedup.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

MIN_STEPS = 8  # steady steps a time or a speedup needs before tcx prints it
CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 38


@dataclass(frozen=True)
class Estimate:
    """A median (ms, or a ratio) and its interval, from `count` values."""

    value: float
    low: float
    high: float
    count: int
    min: float
    max: float

    @property
    def decimals(self) -> int:
        return decimals(self.low, self.high)

    def covers(self, x: float) -> bool:
        return self.low <= x <= self.high

    def to_json(self) -> dict[str, Any]:
        return {
            "median": self.value,
            "low": self.low,
            "high": self.high,
            "confidence": CONFIDENCE,
            "count": self.count,
            "min": self.min,
            "max": self.max,
        }


Runs = list[list[float]]  # the values of each run of the program


def _resample(rng: random.Random, runs: Runs) -> list[float]:
    """One bootstrap sample: runs drawn with replacement (when there are several), then the values
    within each drawn run."""
    picked = rng.choices(runs, k=len(runs)) if len(runs) > 1 else runs
    return [v for run in picked for v in rng.choices(run, k=len(run))]


def _runs(values: list[float] | Runs) -> Runs:
    if values and isinstance(values[0], list):
        return [r for r in values if r]  # type: ignore[misc]
    return [list(values)] if values else []  # type: ignore[arg-type]


def median_estimate(values: list[float] | Runs) -> Estimate | None:
    """The median of `values` (one run's, or a list of runs') and the bootstrap interval of the
    median (None without values)."""
    runs = _runs(values)
    pooled = [v for r in runs for v in r]
    if not pooled:
        return None
    rng = random.Random(SEED)
    medians = sorted(statistics.median(_resample(rng, runs)) for _ in range(RESAMPLES))
    low, high = _percentiles(medians)
    return Estimate(statistics.median(pooled), low, high, len(pooled), min(pooled), max(pooled))


def ratio_estimate(numerator: list[float] | Runs, denominator: list[float] | Runs) -> Estimate | None:
    """median(numerator) / median(denominator) (eager / compiled: the speedup), each side resampled
    on its own (runs, then steps)."""
    top, bottom = _runs(numerator), _runs(denominator)
    top_all, bottom_all = [v for r in top for v in r], [v for r in bottom for v in r]
    if not top_all or not bottom_all or statistics.median(bottom_all) <= 0:
        return None
    rng = random.Random(SEED)
    ratios = []
    for _ in range(RESAMPLES):
        b = statistics.median(_resample(rng, bottom))
        if b > 0:
            ratios.append(statistics.median(_resample(rng, top)) / b)
    if not ratios:
        return None
    ratios.sort()
    low, high = _percentiles(ratios)
    value = statistics.median(top_all) / statistics.median(bottom_all)
    count = min(len(top_all), len(bottom_all))
    return Estimate(value, low, high, count, min(ratios), max(ratios))


def _percentiles(ordered: list[float]) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2
    last = len(ordered) - 1
    return ordered[round(tail * last)], ordered[round((1 - tail) * last)]


def decimals(low: float, high: float, most: int = 4) -> int:
    """Decimals a figure supports: down to the first significant digit of its interval's half-width
    (±0.37 ms: one decimal; ±4 ms: none)."""
    half = (high - low) / 2
    if not half > 0 or not math.isfinite(half):
        return most
    return max(0, min(most, -math.floor(math.log10(half))))


def shown(value: float, places: int) -> str:
    return f"{value:.{places}f}"


def seconds_text(seconds: float) -> str:
    """A compile time, noisy at the 10% level: two significant digits (0.65 s, 4.5 s, 12 s)."""
    if seconds <= 0:
        return "0 s"
    places = max(0, 1 - math.floor(math.log10(seconds)))
    return f"{seconds:.{places}f} s"
