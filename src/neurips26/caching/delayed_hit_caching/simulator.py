"""Delayed-hit cache simulator, shadow losses and the best static set in hindsight.

Latency model (Atre et al., "Caching with Delayed Hits", SIGCOMM 2020; the digest's model): one request per
slot ``t = 0..T-1``. A request for a cached item costs 0. A request for an item that is neither cached nor in
flight is a *miss*: it costs ``Z_i`` and starts a fetch that completes at ``t + Z_i``. A request at
``t' in (t, t + Z_i)`` while that fetch is in flight is a *delayed hit* and costs the remaining
``t + Z_i - t'``. Fetches completing at ``c`` are processed before the request of slot ``c``
(completion-time admission; in-flight items occupy no slot), so a request at ``t + Z_i`` finds the item
cached if the policy admitted it. Fetches completing in the same slot are processed by increasing item
id. A zero-latency fetch completes before the next slot, so with ``Z = 0`` the model is classic caching.

The *shadow loss* of a request is the latency it would cost if its item were never cached; it depends on
the trace alone. A static set ``S`` (preloaded, never changed) costs exactly the shadow losses of the
requests outside ``S``, so the best static set in hindsight is the top-K items by total shadow loss.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .policies import LAFTPL, LFU, LRU, LRUMAD, UCBDH, BestStatic, Marker, Policy, make_policy

__all__ = [
    "SimulationResult",
    "simulate",
    "shadow_losses",
    "best_static_set",
    "best_static_latency",
    "shadow_value",
    "static_regret",
]


@dataclass
class SimulationResult:
    """Outcome of :func:`simulate`.

    Attributes
    ----------
    latency : per-request latency (int64, length T).
    n_hits, n_delayed_hits, n_misses : request counts by outcome.
    n_admissions : fetched items inserted into the cache (cache changes).
    policy : the policy's display name.
    """

    latency: np.ndarray
    n_hits: int
    n_delayed_hits: int
    n_misses: int
    n_admissions: int
    policy: str

    @property
    def total_latency(self) -> int:
        return int(self.latency.sum())

    @property
    def cumulative_latency(self) -> np.ndarray:
        return np.cumsum(self.latency)

    @property
    def hit_ratio(self) -> float:
        return self.n_hits / max(len(self.latency), 1)


# --------------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------------
def _validate_trace(trace: object) -> np.ndarray:
    arr = np.asarray(trace)
    if arr.ndim != 1:
        raise ValueError(f"trace must be a 1-D sequence of item ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("trace must contain at least one request")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"trace must hold integer item ids, got dtype {arr.dtype}")
    if arr.min() < 0:
        raise ValueError("trace item ids must be non-negative integers")
    return arr.astype(np.int64, copy=False)


def _validate_capacity(capacity: object) -> int:
    if isinstance(capacity, (bool, np.bool_)) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
    return int(capacity)


def _validate_latency(fetch_latency: object, n_items: int) -> np.ndarray:
    z = np.asarray(fetch_latency)
    if z.dtype == bool or not (np.issubdtype(z.dtype, np.integer) or np.issubdtype(z.dtype, np.floating)):
        raise ValueError(
            f"fetch_latency must be a non-negative integer or an array of them, got {fetch_latency!r}"
        )
    if not np.all(np.isfinite(z)) or np.any(z < 0) or np.any(z != np.round(z)):
        raise ValueError("fetch_latency must be finite non-negative integers (slots)")
    if z.ndim == 0:
        return np.full(n_items, int(z), dtype=np.int64)
    if z.ndim != 1 or z.size < n_items:
        raise ValueError(
            f"fetch_latency must be a scalar or a 1-D array with one entry per item id (>= {n_items}), "
            f"got shape {z.shape}"
        )
    return z.astype(np.int64)


def _prepare(trace: object, capacity: object, fetch_latency: object) -> tuple[np.ndarray, int, np.ndarray]:
    tr = _validate_trace(trace)
    k = _validate_capacity(capacity)
    z = _validate_latency(fetch_latency, int(tr.max()) + 1)
    return tr, k, z


# --------------------------------------------------------------------------------------------------------
# shadow losses, best static set, shadow value
# --------------------------------------------------------------------------------------------------------
def _shadow_process(tr: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shadow loss per request and a mask of the requests in each item's first miss episode."""
    due = [-1] * len(z)
    first_due = [-1] * len(z)
    zl = z.tolist()
    out = [0] * len(tr)
    first = [False] * len(tr)
    for t, i in enumerate(tr.tolist()):
        d = due[i]
        if d > t:
            out[t] = d - t
            first[t] = first_due[i] == d
        else:
            zi = zl[i]
            out[t] = zi
            due[i] = t + zi
            if first_due[i] < 0:
                first_due[i] = t + zi
                first[t] = True
    return np.asarray(out, dtype=np.int64), np.asarray(first, dtype=bool)


def _shadow_losses(tr: np.ndarray, z: np.ndarray) -> np.ndarray:
    return _shadow_process(tr, z)[0]


def shadow_losses(trace: object, fetch_latency: object) -> np.ndarray:
    """Per-request shadow loss: the latency of request ``t`` if its item were never cached.

    For each item the never-cached process renews: a miss costs ``Z_i`` and opens a window of ``Z_i`` slots
    in which every further request is a delayed hit costing the remaining fetch time.
    """
    tr = _validate_trace(trace)
    z = _validate_latency(fetch_latency, int(tr.max()) + 1)
    return _shadow_losses(tr, z)


def _savings(tr: np.ndarray, sl: np.ndarray, first: np.ndarray, n_items: int, preloaded: bool) -> np.ndarray:
    """Latency that caching each item statically saves: all its shadow losses, less its first miss
    episode unless the static cache is preloaded."""
    w = sl if preloaded else np.where(first, 0, sl)
    return np.bincount(tr, weights=w, minlength=n_items)


def best_static_set(
    trace: object, capacity: int, fetch_latency: object, *, preloaded: bool = False
) -> np.ndarray:
    """The best static cache set in hindsight: the ``capacity`` items whose static caching saves most.

    Static sets decouple per item: an uncached item costs its shadow losses; a statically cached item costs
    nothing if the cache is ``preloaded`` and otherwise only its first miss episode (the static policy starts
    from the same empty cache as every other policy, fetches its items on first request and never evicts
    them). So the top-K items by savings are exactly optimal. Ties are broken towards the smaller id.
    """
    tr, k, z = _prepare(trace, capacity, fetch_latency)
    sl, first = _shadow_process(tr, z)
    sav = _savings(tr, sl, first, len(z), preloaded)
    order = np.lexsort((np.arange(len(sav)), -sav))
    return np.sort(order[: min(k, len(sav))])


def best_static_latency(
    trace: object,
    capacity: int,
    fetch_latency: object,
    horizons: object | None = None,
    *,
    preloaded: bool = False,
) -> np.ndarray | float:
    """Total latency of the best static set in hindsight, for the whole trace or for each prefix length.

    ``horizons``: optional increasing prefix lengths ``T``; the comparator is re-optimised for each prefix.
    ``preloaded``: see :func:`best_static_set` (default: the static cache starts empty, like the policies).
    """
    tr, k, z = _prepare(trace, capacity, fetch_latency)
    sl, first = _shadow_process(tr, z)
    hs = np.array([len(tr)]) if horizons is None else _validate_horizons(horizons, len(tr))
    out = np.empty(len(hs))
    for j, h in enumerate(hs):
        sav = _savings(tr[:h], sl[:h], first[:h], len(z), preloaded)
        out[j] = sl[:h].sum() - np.sort(sav)[::-1][:k].sum()
    return float(out[0]) if horizons is None else out


def _validate_horizons(horizons: object, n: int) -> np.ndarray:
    hs = np.asarray(horizons)
    if hs.ndim != 1 or hs.size == 0 or not np.issubdtype(hs.dtype, np.integer):
        raise ValueError("horizons must be a non-empty 1-D array of integer prefix lengths")
    if hs.min() < 1 or hs.max() > n:
        raise ValueError(f"horizons must lie in [1, len(trace)={n}]")
    return hs.astype(np.int64)


def static_regret(
    result: SimulationResult,
    trace: object,
    capacity: int,
    fetch_latency: object,
    horizons: object,
    *,
    preloaded: bool = False,
) -> np.ndarray:
    """Static regret ``R(T) = latency(policy, first T requests) - latency(best static set for them)``."""
    hs = _validate_horizons(horizons, len(result.latency))
    if len(np.asarray(trace)) != len(result.latency):
        raise ValueError("trace must be the trace that produced result (lengths differ)")
    cum = result.cumulative_latency
    return cum[hs - 1] - best_static_latency(trace, capacity, fetch_latency, horizons=hs, preloaded=preloaded)


def shadow_value(rate: object, fetch_latency: object, discrete: bool = True) -> np.ndarray:
    """Delayed-hit shadow value: long-run latency per slot of an item that is never cached. [R]

    Continuous time (Poisson requests of rate ``lambda``; renewal cycle "miss, window of Z, wait"):
    ``v = lambda Z (1 + lambda Z / 2) / (1 + lambda Z)``.
    Slotted Bernoulli requests (probability ``lambda`` per slot; this simulator's model): the cycle costs
    ``Z + lambda Z (Z - 1) / 2`` in expectation and lasts ``Z - 1 + 1 / lambda`` slots, so
    ``v = lambda Z (1 + lambda (Z - 1) / 2) / (1 + lambda (Z - 1))``.
    """
    lam = np.asarray(rate, dtype=float)
    z = np.asarray(fetch_latency, dtype=float)
    if not np.all(np.isfinite(lam)) or np.any(lam < 0) or np.any(lam > 1 if discrete else False):
        raise ValueError("rate must be finite and >= 0 (and <= 1 for discrete=True)")
    if not np.all(np.isfinite(z)) or np.any(z < 0):
        raise ValueError("fetch_latency must be finite and >= 0")
    w = z - 1.0 if discrete else z
    w = np.maximum(w, 0.0)
    return lam * z * (1.0 + lam * w / 2.0) / (1.0 + lam * w)


# --------------------------------------------------------------------------------------------------------
# the simulator
# --------------------------------------------------------------------------------------------------------
def simulate(
    trace: object,
    policy: Policy | str,
    capacity: int,
    fetch_latency: object,
    *,
    random_state: int | None = None,
) -> SimulationResult:
    """Simulate ``policy`` on ``trace`` under the delayed-hit latency model (see module docstring).

    Parameters
    ----------
    trace : 1-D array of non-negative integer item ids, one request per slot.
    policy : a :class:`Policy` (``LRU()``, ``UCBDH(c=1)``, ...) or its name.
    capacity : cache size ``K >= 1``.
    fetch_latency : ``Z`` in slots, a non-negative integer or one per item id.
    random_state : seed for randomized policies (Marker, LA-FTPL).

    Returns
    -------
    SimulationResult with the per-request latency and outcome counts.
    """
    tr, k, z = _prepare(trace, capacity, fetch_latency)
    pol = make_policy(policy)
    if random_state is not None and (
        isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or random_state < 0
    ):
        raise ValueError(f"random_state must be None or a non-negative integer, got {random_state!r}")
    if isinstance(pol, LRU):
        return _run_lru(tr, k, z)
    if isinstance(pol, Marker):
        return _run_marker(tr, k, z, np.random.default_rng(random_state))
    if isinstance(pol, BestStatic):
        if pol.items is None:
            items = best_static_set(tr, k, z, preloaded=pol.preloaded)
        else:
            items = np.asarray(pol.items, dtype=np.int64)
        if len(items) > k:
            raise ValueError(f"BestStatic.items holds {len(items)} ids, more than capacity={k}")
        return _run_static(tr, z, items, pol.preloaded)
    return _run_scored(tr, k, z, pol, np.random.default_rng(random_state))


def _finish(lat: list[int], hits: int, dhits: int, misses: int, adm: int, name: str) -> SimulationResult:
    return SimulationResult(np.asarray(lat, dtype=np.int64), hits, dhits, misses, adm, name)


def _run_lru(tr: np.ndarray, k: int, z: np.ndarray) -> SimulationResult:
    m = len(z)
    zl = z.tolist()
    due = [-1] * m
    cache: OrderedDict[int, None] = OrderedDict()
    heap: list[int] = []  # completion time * m + item
    nxt = math.inf
    lat = [0] * len(tr)
    hits = dhits = misses = adm = 0
    move = cache.move_to_end
    for t, i in enumerate(tr.tolist()):
        if t >= nxt:
            while heap and heap[0] // m <= t:
                j = heapq.heappop(heap) % m
                cache[j] = None
                adm += 1
                if len(cache) > k:
                    cache.popitem(last=False)
            nxt = heap[0] // m if heap else math.inf
        if i in cache:
            move(i)
            hits += 1
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            dhits += 1
        else:
            zi = zl[i]
            lat[t] = zi
            misses += 1
            due[i] = c = t + zi
            heapq.heappush(heap, c * m + i)
            if c < nxt:
                nxt = c
    return _finish(lat, hits, dhits, misses, adm, "LRU")


def _run_marker(tr: np.ndarray, k: int, z: np.ndarray, rng: np.random.Generator) -> SimulationResult:
    m = len(z)
    zl = z.tolist()
    rnd = random.Random(int(rng.integers(2**63)))
    due = [-1] * m
    incache = [False] * m
    marked = [False] * m
    cached: list[int] = []
    unmarked: list[int] = []  # cached and unmarked, with positions for O(1) removal
    upos = [-1] * m
    heap: list[int] = []
    nxt = math.inf
    lat = [0] * len(tr)
    hits = dhits = misses = adm = 0

    def unmark_remove(j: int) -> None:
        p = upos[j]
        last = unmarked.pop()
        if last != j:
            unmarked[p] = last
            upos[last] = p
        upos[j] = -1

    for t, i in enumerate(tr.tolist()):
        if t >= nxt:
            while heap and heap[0] // m <= t:
                j = heapq.heappop(heap) % m
                adm += 1
                if len(cached) >= k:
                    if not unmarked:  # new phase: unmark every cached item
                        for c in cached:
                            marked[c] = False
                            upos[c] = len(unmarked)
                            unmarked.append(c)
                    v = unmarked[rnd.randrange(len(unmarked))]
                    unmark_remove(v)
                    incache[v] = False
                    cached.remove(v)
                cached.append(j)
                incache[j] = True
                marked[j] = True
            nxt = heap[0] // m if heap else math.inf
        if incache[i]:
            hits += 1
            if not marked[i]:
                marked[i] = True
                unmark_remove(i)
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            dhits += 1
        else:
            zi = zl[i]
            lat[t] = zi
            misses += 1
            due[i] = c = t + zi
            heapq.heappush(heap, c * m + i)
            if c < nxt:
                nxt = c
    return _finish(lat, hits, dhits, misses, adm, "Marker")


def _run_static(tr: np.ndarray, z: np.ndarray, items: np.ndarray, preloaded: bool) -> SimulationResult:
    lat, first = _shadow_process(tr, z)
    inset = np.zeros(max(len(z), int(items.max(initial=-1)) + 1), dtype=bool)
    inset[items] = True
    member = inset[tr]
    cached = member if preloaded else member & ~first
    lat[cached] = 0
    dh = (~cached) & (lat < z[tr])  # a delayed hit costs less than a full fetch
    n_hits = int(cached.sum())
    n_dh = int(dh.sum())
    n_adm = 0 if preloaded else int(np.unique(tr[member]).size)
    return SimulationResult(lat, n_hits, n_dh, len(tr) - n_hits - n_dh, n_adm, "Static")


def _run_scored(
    tr: np.ndarray, k: int, z: np.ndarray, pol: Policy, rng: np.random.Generator
) -> SimulationResult:
    """Score-ranked policies: LFU, LRU-MAD (always admit) and UCB-DH, LA-FTPL (admit if better than worst).

    The cached item with the lowest index (the victim) is re-ranked over the whole cache after each
    admission and at least every ``k`` completions; in between, the stored victim's index is re-evaluated
    fresh at each decision, so a decision never uses a stale index value.
    """
    m = len(z)
    zl = z.tolist()
    is_lfu = isinstance(pol, LFU)
    is_mad = isinstance(pol, LRUMAD)
    is_ucb = isinstance(pol, UCBDH)
    is_ftpl = isinstance(pol, LAFTPL)
    always_admit = is_lfu or is_mad
    track_counts = is_lfu or is_ucb
    restart = getattr(pol, "restart_every", None) or 0
    cnt = [0] * m
    last = [0] * m
    agg_est = [float(x) for x in zl]
    agg_cur = [0] * m
    alpha = pol.ewma if is_mad else 0.0
    cum = [0.0] * m
    sdue = [-1] * m
    zmax = float(max(zl))
    n_items = m
    if is_ftpl:
        gamma = rng.standard_normal(m).tolist()
        eta_scale = pol.c * (zmax + math.sqrt(pol.burst * zmax)) / math.sqrt(k * math.log(max(n_items, 2)))
    ucb_c = pol.c if is_ucb else 0.0
    t0 = 0
    state = {"eta": 0.0}

    def score(j: int, t: int) -> float:
        if is_lfu:
            return cnt[j]
        if is_mad:
            return agg_est[j] / (t - last[j] + 1)
        if is_ucb:
            tt = t - t0 + 1
            lam = cnt[j] / tt
            lg = math.log(tt + 1)
            lam = min(1.0, lam + ucb_c * (math.sqrt(2.0 * lam * lg / tt) + lg / tt))
            zj = zl[j]
            w = zj - 1 if zj > 1 else 0
            return lam * zj * (1.0 + lam * w / 2.0) / (1.0 + lam * w)
        return cum[j] + state["eta"] * gamma[j]

    due = [-1] * m
    incache = [False] * m
    cached: list[int] = []
    victim = -1
    since_rank = 0
    heap: list[int] = []
    nxt = math.inf
    next_restart = restart if restart else math.inf
    lat = [0] * len(tr)
    hits = dhits = misses = adm = 0
    for t, i in enumerate(tr.tolist()):
        if t >= next_restart:
            t0 = t
            next_restart += restart
            for j in range(m):
                cnt[j] = 0
                cum[j] = 0.0
                sdue[j] = -1
            if is_ftpl:
                gamma = rng.standard_normal(m).tolist()
            victim = -1
        if t >= nxt:
            if is_ftpl:
                state["eta"] = eta_scale * math.sqrt(t - t0 + 1)
            while heap and heap[0] // m <= t:
                j = heapq.heappop(heap) % m
                if is_mad:
                    agg_est[j] = (1.0 - alpha) * agg_est[j] + alpha * agg_cur[j]
                if len(cached) < k:
                    cached.append(j)
                    incache[j] = True
                    adm += 1
                    victim = -1
                    continue
                since_rank += 1
                if victim < 0 or since_rank >= k:
                    victim = min(cached, key=cnt.__getitem__ if is_lfu else lambda c, t=t: score(c, t))
                    since_rank = 0
                if always_admit or score(j, t) > score(victim, t):
                    incache[victim] = False
                    cached[cached.index(victim)] = j
                    incache[j] = True
                    adm += 1
                    victim = min(cached, key=cnt.__getitem__ if is_lfu else lambda c, t=t: score(c, t))
                    since_rank = 0
            nxt = heap[0] // m if heap else math.inf
        if track_counts:
            cnt[i] += 1
        if is_mad:
            last[i] = t
        if is_ftpl:
            d = sdue[i]
            if d > t:
                cum[i] += d - t
            else:
                cum[i] += zl[i]
                sdue[i] = t + zl[i]
        if incache[i]:
            hits += 1
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            dhits += 1
            if is_mad:
                agg_cur[i] += d - t
        else:
            zi = zl[i]
            lat[t] = zi
            misses += 1
            if is_mad:
                agg_cur[i] = zi
            due[i] = c = t + zi
            heapq.heappush(heap, c * m + i)
            if c < nxt:
                nxt = c
    name = pol.name + ("-restart" if restart else "")
    return _finish(lat, hits, dhits, misses, adm, name)
