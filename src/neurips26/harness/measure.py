"""Measurement helpers shared by experiments and benchmarks: power-law slopes and repeatable timings."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .run import CLOCKS, Timer

__all__ = ["Slope", "Timer", "line_fit", "loglog_slope", "time_repeats"]


@dataclass(frozen=True)
class Slope:
    """A least-squares line fit ``y = intercept + slope * x`` with a confidence interval on the slope."""

    slope: float
    intercept: float
    lo: float  # confidence interval on the slope (t-distribution, n - 2 degrees of freedom)
    hi: float
    r2: float
    n: int

    def as_dict(self, prefix: str = "slope") -> dict[str, float]:
        return {prefix: self.slope, f"{prefix}_lo": self.lo, f"{prefix}_hi": self.hi, f"{prefix}_r2": self.r2}


def line_fit(x: Sequence[float], y: Sequence[float], level: float = 0.95) -> Slope:
    """Ordinary least squares with a ``level`` confidence interval on the slope (NaN interval for n = 2)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of the same length, got {x.shape} and {y.shape}")
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("a line fit needs at least two distinct x values")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    from scipy import stats  # imported here: the harness package stays cheap to import

    fit = stats.linregress(x, y)
    if x.size > 2:
        half = stats.t.ppf(0.5 + level / 2, x.size - 2) * fit.stderr
    else:
        half = math.nan
    return Slope(
        float(fit.slope),
        float(fit.intercept),
        float(fit.slope - half),
        float(fit.slope + half),
        float(fit.rvalue**2),
        int(x.size),
    )


def loglog_slope(
    x: Sequence[float], y: Sequence[float], level: float = 0.95, *, nonpositive: str = "raise"
) -> Slope:
    """The exponent b of ``y ~ x^b``: a line fit of log y on log x, with a confidence interval.

    ``nonpositive`` says what to do with y <= 0, which has no logarithm: ``"raise"`` (the default: a
    quantity that does not grow is not a power law, and a floor would invent one), or ``"drop"`` those points.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.any(x <= 0):
        raise ValueError("x must be positive for a log-log fit")
    bad = y <= 0
    if bad.any():
        if nonpositive == "drop":
            x, y = x[~bad], y[~bad]
        elif nonpositive == "raise":
            raise ValueError(f"y must be positive for a log-log fit ({int(bad.sum())} value(s) <= 0)")
        else:
            raise ValueError(f"nonpositive must be 'raise' or 'drop', got {nonpositive!r}")
    return line_fit(np.log(x), np.log(y), level)


def time_repeats(
    fn: Callable[[], Any], repeat: int = 5, warmup: int = 1, clock: str = "wall"
) -> dict[str, float]:
    """Run ``fn`` ``warmup`` + ``repeat`` times; min, median and max seconds of the timed repeats.

    The minimum is the most repeatable estimate on a shared machine (noise only adds time); the median says
    what a user typically waits. ``clock="cpu"`` times this process's CPU instead of elapsed time.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(f"repeat must be >= 1 and warmup >= 0, got {repeat}, {warmup}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    now = CLOCKS[clock]
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = now()
        fn()
        times.append(now() - t0)
    return {"min": min(times), "median": statistics.median(times), "max": max(times), "repeat": repeat}
