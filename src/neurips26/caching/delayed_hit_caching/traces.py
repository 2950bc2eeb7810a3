"""Synthetic request traces S1-S5 of the reproduction check (the paper's CDN/CAIDA traces are not public).

S1 stationary Zipf; S2 stationary Zipf with per-item fetch latencies in {5, 50} (frequency order differs from
shadow-value order); S3 piecewise-stationary Zipf whose popularity permutation changes ``n_segments`` times;
S4 adversarial cyclic bursts over ``K + 1`` hot items (defeats LRU and Marker); S5 bursty ON/OFF
(Markov-modulated) arrivals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trace", "zipf_probabilities", "make_trace"]


@dataclass
class Trace:
    """A generated workload: requests, per-item fetch latency, and (S3) the popularity change points."""

    name: str
    requests: np.ndarray
    fetch_latency: np.ndarray
    change_points: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def zipf_probabilities(n_items: int, alpha: float) -> np.ndarray:
    """``p_i proportional to (i + 1)^-alpha`` for ``i = 0..n_items-1``."""
    if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be an integer >= 1, got {n_items!r}")
    if not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be finite and >= 0, got {alpha!r}")
    w = np.arange(1, n_items + 1, dtype=float) ** (-float(alpha))
    return w / w.sum()


def _check_int(name: str, value: object, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


def make_trace(
    kind: str,
    n_requests: int,
    *,
    n_items: int = 1000,
    capacity: int = 50,
    fetch_latency: int = 20,
    alpha: float = 0.9,
    latency_choices: tuple[int, int] = (5, 50),
    n_segments: int = 8,
    block: int = 500,
    on_boost: float = 30.0,
    p_on: float = 0.05,
    random_state: int | None = None,
) -> Trace:
    """Generate one of the digest's traces ``"S1" .. "S5"`` with ``n_requests`` requests.

    S2 draws each item's latency uniformly from ``latency_choices``; S4 cycles over ``capacity + 1`` hot
    items (random ids among ``n_items``), each visited by a burst of ``fetch_latency`` consecutive requests;
    S5 switches each item ON (weight x ``on_boost``) with probability ``p_on`` per block of ``block`` slots
    (OFF otherwise) on top of the Zipf weights.
    """
    kind = str(kind).upper()
    if kind not in ("S1", "S2", "S3", "S4", "S5"):
        raise ValueError(f"kind must be one of S1..S5, got {kind!r}")
    t_len = _check_int("n_requests", n_requests, 1)
    n = _check_int("n_items", n_items, 2)
    k = _check_int("capacity", capacity, 1)
    z = _check_int("fetch_latency", fetch_latency, 0)
    nseg = _check_int("n_segments", n_segments, 1)
    blk = _check_int("block", block, 1)
    if kind == "S4" and k + 1 > n:
        raise ValueError(f"capacity + 1 must not exceed n_items for S4, got capacity={k}, n_items={n}")
    rng = np.random.default_rng(random_state)
    p = zipf_probabilities(n, alpha)
    lat = np.full(n, z, dtype=np.int64)
    cps = np.zeros(0, dtype=np.int64)
    if kind in ("S1", "S2"):
        ids = rng.permutation(n)  # popularity rank r is item ids[r]
        req = ids[rng.choice(n, size=t_len, p=p)]
        if kind == "S2":
            choices = np.asarray(latency_choices, dtype=np.int64)
            if choices.ndim != 1 or choices.size < 1 or np.any(choices < 0):
                raise ValueError("latency_choices must be non-negative integers")
            lat = rng.choice(choices, size=n)
    elif kind == "S3":
        bounds = np.linspace(0, t_len, nseg + 1).astype(np.int64)
        req = np.empty(t_len, dtype=np.int64)
        for a, b in zip(bounds[:-1], bounds[1:]):
            ids = rng.permutation(n)
            req[a:b] = ids[rng.choice(n, size=b - a, p=p)]
        cps = bounds[1:-1]
    elif kind == "S4":
        hot = rng.choice(n, size=k + 1, replace=False)
        burst = max(z, 1)
        cycle = np.repeat(hot, burst)
        req = np.resize(cycle, t_len)
    else:  # S5: Markov-modulated ON/OFF popularity, i.i.d. within blocks
        n_blocks = -(-t_len // blk)
        ids = rng.permutation(n)
        base = p[np.argsort(ids)]  # weight of item id
        on = rng.random(n) < p_on
        req = np.empty(t_len, dtype=np.int64)
        for b in range(n_blocks):
            flip = rng.random(n) < 0.2  # state persists ~5 blocks
            on = np.where(flip, rng.random(n) < p_on, on)
            w = base * np.where(on, on_boost, 1.0)
            a, e = b * blk, min((b + 1) * blk, t_len)
            req[a:e] = rng.choice(n, size=e - a, p=w / w.sum())
    return Trace(kind, np.asarray(req, dtype=np.int64), lat, cps)
