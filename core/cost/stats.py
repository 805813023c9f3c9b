"""How sure a timing is: a median with its bootstrap confidence interval, a ratio of medians (the
speedup) with its own, and the number of decimals the interval supports.

Pure and torch-free. A figure needs `MIN_STEPS` steady steps; the interval is the percentile
bootstrap (the steps resampled `RESAMPLES` times with a fixed seed, so the same recording always
prints the same interval).
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


def median_estimate(values: list[float]) -> Estimate | None:
    """The median of `values` and the bootstrap interval of the median (None without values)."""
    if not values:
        return None
    rng = random.Random(SEED)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(RESAMPLES))
    low, high = _percentiles(medians)
    return Estimate(statistics.median(values), low, high, n, min(values), max(values))


def ratio_estimate(numerator: list[float], denominator: list[float]) -> Estimate | None:
    """median(numerator) / median(denominator) (eager / compiled: the speedup), each side resampled
    on its own."""
    if not numerator or not denominator or statistics.median(denominator) <= 0:
        return None
    rng = random.Random(SEED)
    ratios = []
    for _ in range(RESAMPLES):
        bottom = statistics.median(rng.choices(denominator, k=len(denominator)))
        if bottom > 0:
            ratios.append(statistics.median(rng.choices(numerator, k=len(numerator))) / bottom)
    if not ratios:
        return None
    ratios.sort()
    low, high = _percentiles(ratios)
    value = statistics.median(numerator) / statistics.median(denominator)
    count = min(len(numerator), len(denominator))
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
