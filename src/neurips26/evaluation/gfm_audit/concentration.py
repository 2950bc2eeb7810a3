"""Benchmark concentration: Gini, Herfindahl-Hirschman index, top-k share, bootstrap intervals over papers.

For usage counts :math:`c_1..c_K` of K benchmarks with shares :math:`s_k = c_k / \\sum_j c_j`:

- Gini (mean absolute difference form): :math:`G = \\sum_{i,j} |c_i - c_j| / (2 K^2 \\bar c)`; 0 when every
  benchmark is used equally, :math:`(K-1)/K` when one benchmark takes every evaluation of K;
- HHI: :math:`H = \\sum_k s_k^2` (1/K uniform, 1 for one benchmark);
- top-k share: the summed share of the k most used benchmarks.

Intervals resample PAPERS (the unit that chooses benchmarks) and recompute the counts and the index (the
official analysis resamples the count vector itself; resampling papers keeps the dependence between one
paper's benchmarks). The default interval is the basic (bias-reflected) bootstrap [2 t - q_hi, 2 t - q_lo]:
the plug-in Gini of sampled counts is biased upwards (sampling noise adds inequality), so the percentile
interval sits above the population value; ``method="percentile"`` gives the percentile interval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .audit import DEFAULT_BENCHMARK_ALIASES, AliasTable, fold_spellings


def _counts(values: Iterable[float], name: str = "counts") -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    if arr.sum() <= 0:
        raise ValueError(f"{name} must have a positive total")
    return arr


def gini(counts: Iterable[float]) -> float:
    """Gini coefficient of non-negative counts (zeros count as unused categories), in [0, (K-1)/K]."""
    c = np.sort(_counts(counts))
    k = c.size
    # sorted form of the mean absolute difference: sum_i (2i - k - 1) c_(i) / (k * sum c)
    ranks = np.arange(1, k + 1)
    return float(np.sum((2 * ranks - k - 1) * c) / (k * c.sum()))


def hhi(counts: Iterable[float]) -> float:
    """Herfindahl-Hirschman index sum_k s_k^2 of the shares, in [1/K, 1]."""
    c = _counts(counts)
    s = c / c.sum()
    return float(np.sum(s * s))


def top_k_share(counts: Iterable[float], k: int = 3) -> float:
    """Share of all uses taken by the ``k`` most used categories."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    c = np.sort(_counts(counts))[::-1]
    return float(c[:k].sum() / c.sum())


def bootstrap_ci(
    units: Sequence[Any],
    statistic: Callable[[Sequence[Any]], float],
    n_boot: int = 1000,
    level: float = 0.95,
    random_state: int | np.random.Generator | None = 0,
    method: str = "basic",
) -> tuple[float, float]:
    """Bootstrap interval of ``statistic`` over resamples (with replacement) of ``units``.

    ``method="percentile"``: the (alpha/2, 1 - alpha/2) quantiles of the resampled statistic;
    ``method="basic"``: those quantiles reflected about the estimate, which removes first-order bias.
    """
    if len(units) == 0:
        raise ValueError("units must be non-empty")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    if not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    _check_method(method)
    rng = (
        random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    )
    n = len(units)
    idx = rng.integers(0, n, size=(int(n_boot), n))
    boots = np.array([statistic([units[i] for i in row]) for row in idx], dtype=float)
    return bootstrap_interval(float(statistic(list(units))), boots, level, method)


def _check_method(method: str) -> None:
    if method not in ("basic", "percentile"):
        raise ValueError(f"method must be 'basic' or 'percentile', got {method!r}")


def bootstrap_interval(
    estimate: float, boots: np.ndarray, level: float = 0.95, method: str = "basic"
) -> tuple[float, float]:
    """Interval from bootstrap replicates: percentile (alpha/2, 1 - alpha/2) quantiles, or basic (reflected)."""
    _check_method(method)
    alpha = (1.0 - float(level)) / 2.0
    lo, hi = float(np.quantile(boots, alpha)), float(np.quantile(boots, 1.0 - alpha))
    return (lo, hi) if method == "percentile" else (2 * estimate - hi, 2 * estimate - lo)


def _gini_rows(C: np.ndarray) -> np.ndarray:
    C = np.sort(C, axis=-1)
    k = C.shape[-1]
    r = np.arange(1, k + 1)
    return ((2 * r - k - 1) * C).sum(-1) / (k * C.sum(-1))


def _hhi_rows(C: np.ndarray) -> np.ndarray:
    S = C / C.sum(-1, keepdims=True)
    return (S * S).sum(-1)


def _top3_rows(C: np.ndarray) -> np.ndarray:
    return np.sort(C, axis=-1)[..., -3:].sum(-1) / C.sum(-1)


ROW_STATISTICS = {"gini": _gini_rows, "hhi": _hhi_rows, "top3_share": _top3_rows}


def concentration_bootstrap(
    incidence: np.ndarray, n_boot: int = 1000, random_state: int | np.random.Generator | None = 0
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Estimates and paper-bootstrap replicates of Gini, HHI and top-3 share from a papers x benchmarks 0/1
    incidence matrix. Vectorised: a resample of papers is a count vector w over papers, its benchmark counts
    are w @ incidence."""
    M = np.asarray(incidence, dtype=float)
    if M.ndim != 2 or M.shape[0] < 1 or M.shape[1] < 1:
        raise ValueError("incidence must be a non-empty 2-D papers x benchmarks matrix")
    if M.sum() <= 0:
        raise ValueError("incidence must hold at least one evaluation")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    rng = (
        random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    )
    n, B = M.shape[0], int(n_boot)
    idx = rng.integers(0, n, size=(B, n)) + n * np.arange(B)[:, None]
    W = np.bincount(idx.ravel(), minlength=B * n).reshape(B, n).astype(float)
    boot_counts = W @ M
    boot_counts = boot_counts[boot_counts.sum(1) > 0]
    counts = M.sum(0)[None]
    estimates = {name: float(fn(counts)[0]) for name, fn in ROW_STATISTICS.items()}
    return estimates, {name: fn(boot_counts) for name, fn in ROW_STATISTICS.items()}


def concentration_intervals(
    incidence: np.ndarray,
    n_boot: int = 1000,
    level: float = 0.95,
    random_state: int | np.random.Generator | None = 0,
    method: str = "basic",
) -> dict[str, tuple[float, float]]:
    """Paper-bootstrap intervals of Gini, HHI and top-3 share (see :func:`concentration_bootstrap`)."""
    _check_method(method)
    if not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    est, boots = concentration_bootstrap(incidence, n_boot, random_state)
    return {name: bootstrap_interval(est[name], boots[name], level, method) for name in ROW_STATISTICS}


@dataclass
class Concentration:
    """Benchmark-usage concentration of a corpus (``benchmark_concentration``)."""

    counts: dict[str, int]
    n_papers: int
    n_benchmarks: int
    n_evaluations: int
    gini: float
    hhi: float
    top3_share: float
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    top10: list[str] = field(default_factory=list)
    overlap_with_top10: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_papers": self.n_papers,
            "n_benchmarks": self.n_benchmarks,
            "n_evaluations": self.n_evaluations,
            "gini": self.gini,
            "hhi": self.hhi,
            "top3_share": self.top3_share,
            **{f"{k}_ci": list(v) for k, v in self.ci.items()},
        }


def benchmark_concentration(
    benchmarks_per_paper: Mapping[str, Iterable[str]],
    canonical: Callable[[str], str | None] | None = None,
    categories: Iterable[str] | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    random_state: int | None = 0,
    method: str = "basic",
    fold_unlisted: bool = True,
) -> Concentration:
    """Concentration of benchmark usage over papers.

    Parameters
    ----------
    benchmarks_per_paper : paper id -> the downstream benchmarks it evaluates on (raw names; each canonical
        benchmark counts once per paper).
    canonical : name -> canonical name (None drops the entry), e.g. ``AliasTable(...).canonical``; default
        ``DEFAULT_BENCHMARK_ALIASES.canonical`` (the common geospatial aliases, unlisted names stripped).
    categories : the full benchmark universe, when known; unused ones enter the Gini as zeros.
    n_boot, level, random_state, method : the paper-level bootstrap (``n_boot=0`` skips the intervals;
        ``method`` "basic" (default, bias-reflected) or "percentile").
    fold_unlisted : after ``canonical``, names that differ only in case, spaces, punctuation or a trailing
        "dataset" are one benchmark (``categories`` and the canonical names of an :class:`AliasTable` passed as
        ``canonical=table.canonical`` are the preferred spellings); ``False`` counts them as typed.
    """
    if not isinstance(benchmarks_per_paper, Mapping) or len(benchmarks_per_paper) == 0:
        raise ValueError("benchmarks_per_paper must be a non-empty mapping paper -> benchmarks")
    if canonical is None:
        canonical = DEFAULT_BENCHMARK_ALIASES.canonical
    if not callable(canonical):
        raise TypeError(
            f"canonical must be a callable name -> canonical name, got {type(canonical).__name__}"
        )
    canon = canonical
    if isinstance(categories, str):
        raise TypeError("categories must be an iterable of benchmark names, not one string")
    categories = [c for c in (categories or ()) if isinstance(c, str)]
    raw: list[tuple[str, list[str]]] = []
    for paper, bms in benchmarks_per_paper.items():
        if isinstance(bms, str):
            raise TypeError(f"benchmarks of paper {paper!r} must be a list of names, not a string")
        raw.append((str(paper), [c for b in bms if isinstance(b, str) and (c := canon(b))]))
    fold: dict[str, str] = {}
    if fold_unlisted:
        table = getattr(canonical, "__self__", None)
        preferred = list(categories) + (table.canonical_names if isinstance(table, AliasTable) else [])
        fold = fold_spellings([c for _, v in raw for c in v] + list(categories), preferred=preferred)
    per_paper: list[frozenset[str]] = []
    names: list[str] = []
    for paper, v in raw:
        s = frozenset(fold.get(c, c) for c in v)
        if s:
            per_paper.append(s)
            names.append(paper)
    if not per_paper:
        raise ValueError("benchmarks_per_paper holds no benchmark name")
    universe = sorted(set().union(*per_paper) | {fold.get(c, c) for c in categories})
    index = {b: i for i, b in enumerate(universe)}

    incidence = np.zeros((len(per_paper), len(universe)))
    for i, s in enumerate(per_paper):
        incidence[i, [index[b] for b in s]] = 1.0
    counts = incidence.sum(0)
    used = counts[counts > 0]
    result = Concentration(
        counts={b: int(counts[i]) for i, b in enumerate(universe)},
        n_papers=len(per_paper),
        n_benchmarks=int(used.size),
        n_evaluations=int(counts.sum()),
        gini=gini(counts),
        hhi=hhi(counts),
        top3_share=top_k_share(counts, 3),
    )
    _check_method(method)
    if n_boot:
        if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
            raise ValueError(f"n_boot must be 0 or an integer >= 2, got {n_boot!r}")
        if not (0.0 < float(level) < 1.0):
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        result.ci = concentration_intervals(incidence, n_boot, level, random_state, method)
    top = Counter({b: c for b, c in result.counts.items() if c > 0}).most_common()
    result.top10 = sorted(b for b, _ in top[:10])
    top10 = set(result.top10)
    result.overlap_with_top10 = {p: len(s & top10) / len(s) for p, s in zip(names, per_paper, strict=True)}
    return result
