"""Delayed-hit cache simulator, shadow losses and the best static set in hindsight.

Latency model (Atre et al., "Caching with Delayed Hits", SIGCOMM 2020; the digest's model): one request per
slot ``t = 0..T-1``. A request for a cached item costs 0. A request for an item that is neither cached nor in
flight is a *miss*: it costs ``Z_i`` and starts a fetch that completes at ``t + Z_i``. A request at
``t' in (t, t + Z_i)`` while that fetch is in flight is a *delayed hit* and costs the remaining
``t + Z_i - t'``. Fetches completing at ``c`` are processed before the request of slot ``c``
(completion-time admission; in-flight items occupy no slot), so a request at ``t + Z_i`` finds the item
cached if the policy admitted it. Fetches completing in the same slot are processed by increasing item
code (for integer ids: increasing id). A zero-latency fetch completes before the next slot, so with ``Z = 0``
the model is classic caching (the libCacheSim cross-checks in the tests run there).

Item ids may be any integers (64-bit hashes included) or hashable values; they are encoded once into dense
codes (:func:`~.traces.encode_ids`), so memory is O(distinct items), not O(largest id). Objects may have
byte sizes: the capacity is then in bytes, an admission evicts until the object fits, and an object larger
than the cache is never admitted.

The *shadow loss* of a request is the latency it would cost if its item were never cached; it depends on
the trace alone. A static set ``S`` (preloaded, never changed) costs exactly the shadow losses of the
requests outside ``S``, so the best static set in hindsight is the top-K items by total shadow loss (exact
for unit sizes; with byte sizes it is a knapsack, and the greedy set by saving per byte is used instead).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import _compiled as C
from .policies import (
    FIFO,
    LAFTPL,
    LFU,
    LRU,
    LRUMAD,
    UCBDH,
    BestStatic,
    CacheView,
    Marker,
    Policy,
    make_policy,
)
from .traces import Trace, check_integers, encode_ids, per_item

__all__ = [
    "SimulationResult",
    "simulate",
    "shadow_losses",
    "best_static_set",
    "best_static_latency",
    "shadow_value",
    "static_regret",
]

ENGINES = ("auto", "compiled", "python")


@dataclass
class SimulationResult:
    """Outcome of :func:`simulate`.

    Attributes
    ----------
    latency : per-request latency (int64, length T).
    outcome : per-request outcome (int8): ``HIT`` 0, ``DELAYED_HIT`` 1, ``MISS`` 2.
    n_hits, n_delayed_hits, n_misses : request counts by outcome.
    n_admissions : fetched items inserted into the cache (cache changes).
    policy : the policy's display name.
    bytes_requested, bytes_hit : total bytes requested and served from the cache (unit sizes: requests).
    """

    latency: np.ndarray
    n_hits: int
    n_delayed_hits: int
    n_misses: int
    n_admissions: int
    policy: str
    outcome: np.ndarray | None = None
    bytes_requested: int = 0
    bytes_hit: int = 0

    @property
    def total_latency(self) -> int:
        return int(self.latency.sum())

    @property
    def cumulative_latency(self) -> np.ndarray:
        return np.cumsum(self.latency)

    @property
    def hit_ratio(self) -> float:
        return self.n_hits / max(len(self.latency), 1)

    @property
    def byte_hit_ratio(self) -> float:
        return self.bytes_hit / max(self.bytes_requested, 1)


# --------------------------------------------------------------------------------------------------------
# input resolution: ids -> codes once, per-item latency and sizes per code
# --------------------------------------------------------------------------------------------------------
@dataclass
class _Resolved:
    codes: np.ndarray  # int64 item codes, one per slot
    items: np.ndarray  # the id of each code
    z: np.ndarray  # fetch latency per code (int64)
    sizes: np.ndarray  # size per code (int64, ones for unit-sized objects)
    unit: bool  # no sizes given: capacity counts objects


def _per_code(values: object, trace: Trace, items: np.ndarray, name: str, minimum: int) -> np.ndarray:
    """Per-code values for a Trace: a scalar, an ``{id: value}`` mapping, or an array per item code."""
    if isinstance(values, Mapping) or np.ndim(values) == 0:
        return per_item(values, items, name, minimum)
    arr = np.asarray(values)
    if arr.ndim != 1 or len(arr) != len(items):
        raise ValueError(
            f"{name} for a Trace must be a scalar, a mapping or one entry per item of trace.items "
            f"({len(items)}), got shape {arr.shape}"
        )
    check_integers(arr, name, minimum)
    return arr.astype(np.int64)


def _resolve(trace: object, fetch_latency: object, sizes: object) -> _Resolved:
    if isinstance(trace, Trace):
        codes = np.asarray(trace.requests)
        if codes.ndim != 1 or codes.size == 0 or not np.issubdtype(codes.dtype, np.integer):
            raise ValueError("trace.requests must be a non-empty 1-D array of integer item codes")
        n = trace.n_items
        if codes.min() < 0 or codes.max() >= n:
            raise ValueError(f"trace.requests must hold item codes in [0, {n})")
        items = trace.items if trace.items is not None else np.arange(n)
        if fetch_latency is None:
            if trace.fetch_latency is None:
                raise ValueError("fetch_latency must be given: the trace does not carry fetch latencies")
            fetch_latency = trace.fetch_latency
        z = _per_code(fetch_latency, trace, items, "fetch_latency", 0)
        if sizes is None and trace.sizes is not None:
            sizes = trace.sizes
        s = None if sizes is None else _per_code(sizes, trace, items, "sizes", 1)
        codes = codes.astype(np.int64, copy=False)
    else:
        codes, items = encode_ids(trace)
        if fetch_latency is None:
            raise ValueError("fetch_latency must be given (a non-negative integer, a mapping or an array)")
        z = per_item(fetch_latency, items, "fetch_latency", 0)
        s = None if sizes is None else per_item(sizes, items, "sizes", 1)
    unit = s is None
    if unit:
        s = np.ones(len(items), dtype=np.int64)
    m = len(items)
    if (len(codes) + int(z.max(initial=0)) + 1) * m >= 2**62:
        raise ValueError("trace too long for the event queue (T + max fetch_latency) * n_items >= 2**62")
    return _Resolved(np.ascontiguousarray(codes), items, z, s, unit)


def _validate_capacity(capacity: object) -> int:
    if isinstance(capacity, (bool, np.bool_)) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
    return int(capacity)


def _validate_horizons(horizons: object, n: int) -> np.ndarray:
    hs = np.asarray(horizons)
    if hs.ndim != 1 or hs.size == 0 or not np.issubdtype(hs.dtype, np.integer):
        raise ValueError("horizons must be a non-empty 1-D array of integer prefix lengths")
    if hs.min() < 1 or hs.max() > n:
        raise ValueError(f"horizons must lie in [1, len(trace)={n}]")
    return hs.astype(np.int64)


# --------------------------------------------------------------------------------------------------------
# shadow losses, best static set, shadow value
# --------------------------------------------------------------------------------------------------------
def shadow_losses(trace: object, fetch_latency: object | None = None) -> np.ndarray:
    """Per-request shadow loss: the latency of request ``t`` if its item were never cached.

    For each item the never-cached process renews: a miss costs ``Z_i`` and opens a window of ``Z_i`` slots
    in which every further request is a delayed hit costing the remaining fetch time.
    """
    r = _resolve(trace, fetch_latency, None)
    return C.shadow_process(r.codes, r.z)[0]


def _static_codes(sav: np.ndarray, k: int, sizes: np.ndarray, unit: bool) -> np.ndarray:
    """Top-k codes by saving (ties to the smaller code); with sizes, greedy by saving per byte."""
    codes = np.arange(len(sav))
    if unit:
        order = np.lexsort((codes, -sav))
        return np.sort(order[: min(k, len(sav))])
    order = np.lexsort((codes, -sav / sizes))
    room, chosen = k, []
    for c in order.tolist():
        if sav[c] <= 0:
            break
        if sizes[c] <= room:
            chosen.append(c)
            room -= int(sizes[c])
    return np.sort(np.asarray(chosen, dtype=np.int64))


def _savings(codes: np.ndarray, sl: np.ndarray, first: np.ndarray, m: int, preloaded: bool) -> np.ndarray:
    """Latency that caching each item statically saves: all its shadow losses, less its first miss
    episode unless the static cache is preloaded."""
    w = sl if preloaded else np.where(first, 0, sl)
    return np.bincount(codes, weights=w, minlength=m)


def best_static_set(
    trace: object,
    capacity: int,
    fetch_latency: object | None = None,
    *,
    sizes: object | None = None,
    preloaded: bool = False,
) -> np.ndarray:
    """The best static cache set in hindsight (item ids): the ``capacity`` items whose static caching saves
    most.

    Static sets decouple per item: an uncached item costs its shadow losses; a statically cached item costs
    nothing if the cache is ``preloaded`` and otherwise only its first miss episode (the static policy starts
    from the same empty cache as every other policy, fetches its items on first request and never evicts
    them). So the top-K items by savings are exactly optimal. Ties are broken towards the smaller code. With
    ``sizes`` (capacity in bytes) the greedy set by saving per byte is returned (a knapsack heuristic).
    """
    k = _validate_capacity(capacity)
    r = _resolve(trace, fetch_latency, sizes)
    sl, first = C.shadow_process(r.codes, r.z)
    sav = _savings(r.codes, sl, first, len(r.items), preloaded)
    return r.items[_static_codes(sav, k, r.sizes, r.unit)]


def best_static_latency(
    trace: object,
    capacity: int,
    fetch_latency: object | None = None,
    horizons: object | None = None,
    *,
    sizes: object | None = None,
    preloaded: bool = False,
) -> np.ndarray | float:
    """Total latency of the best static set in hindsight, for the whole trace or for each prefix length.

    ``horizons``: optional increasing prefix lengths ``T``; the comparator is re-optimised for each prefix.
    ``preloaded``: see :func:`best_static_set` (default: the static cache starts empty, like the policies).
    """
    k = _validate_capacity(capacity)
    r = _resolve(trace, fetch_latency, sizes)
    sl, first = C.shadow_process(r.codes, r.z)
    hs = np.array([len(r.codes)]) if horizons is None else _validate_horizons(horizons, len(r.codes))
    out = np.empty(len(hs))
    for j, h in enumerate(hs):
        sav = _savings(r.codes[:h], sl[:h], first[:h], len(r.items), preloaded)
        out[j] = sl[:h].sum() - sav[_static_codes(sav, k, r.sizes, r.unit)].sum()
    return float(out[0]) if horizons is None else out


def static_regret(
    result: SimulationResult,
    trace: object,
    capacity: int,
    fetch_latency: object | None = None,
    horizons: object = None,
    *,
    sizes: object | None = None,
    preloaded: bool = False,
) -> np.ndarray:
    """Static regret ``R(T) = latency(policy, first T requests) - latency(best static set for them)``."""
    if not isinstance(result, SimulationResult):
        raise TypeError(f"result must be a SimulationResult, got {type(result).__name__}")
    hs = _validate_horizons(horizons, len(result.latency))
    n = trace.n_requests if isinstance(trace, Trace) else len(np.asarray(trace, dtype=object))
    if n != len(result.latency):
        raise ValueError("trace must be the trace that produced result (lengths differ)")
    cum = result.cumulative_latency
    best = best_static_latency(trace, capacity, fetch_latency, horizons=hs, sizes=sizes, preloaded=preloaded)
    return cum[hs - 1] - best


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
_SCORED_KIND = {LRUMAD: C.LRU_MAD, UCBDH: C.UCB_DH, LAFTPL: C.LA_FTPL}


def simulate(
    trace: object,
    policy: Policy | str,
    capacity: int,
    fetch_latency: object | None = None,
    *,
    sizes: object | None = None,
    random_state: int | None = None,
    engine: str = "auto",
) -> SimulationResult:
    """Simulate ``policy`` on ``trace`` under the delayed-hit latency model (see module docstring).

    Parameters
    ----------
    trace : a :class:`Trace` (generated or read from a file), or a 1-D sequence of item ids, one request per
        slot: any integers (e.g. 64-bit hashes) or hashable values, encoded once.
    policy : a :class:`Policy` (``LRU()``, ``UCBDH(c=1)``, a subclass of your own, ...) or its name.
    capacity : cache size ``K >= 1``: objects, or bytes when objects have ``sizes``.
    fetch_latency : ``Z`` in slots: a non-negative integer, a ``{id: Z}`` mapping, or an array with one entry
        per item id (for a Trace: per item of ``trace.items``); default: the trace's own.
    sizes : object sizes in bytes, given like ``fetch_latency`` (default: the trace's, else unit-sized).
    random_state : seed for randomized policies (Marker, LA-FTPL); None draws a fresh one.
    engine : ``"auto"`` (compiled loops for the built-in policies, the Python hooks for subclasses),
        ``"python"`` (the hooks, for every policy) or ``"compiled"`` (built-ins only).

    Returns
    -------
    SimulationResult with the per-request latency and outcome, and outcome counts.
    """
    k = _validate_capacity(capacity)
    pol = make_policy(policy)
    if random_state is not None and (
        isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or random_state < 0
    ):
        raise ValueError(f"random_state must be None or a non-negative integer, got {random_state!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    r = _resolve(trace, fetch_latency, sizes)
    seed = int(np.random.SeedSequence(random_state).generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(pol, BestStatic):
        pol.use_codes(_static_resolve(pol, r, k))
    compiled = type(pol) in (LRU, FIFO, LFU, Marker, LRUMAD, UCBDH, LAFTPL, BestStatic)
    if engine == "compiled" and not compiled:
        raise ValueError(f"engine='compiled' runs the built-in policies only, not {type(pol).__name__}")
    if engine == "python" or not compiled:
        lat, out, adm = _run_hooks(r, k, pol, seed)
        name = pol.name
    else:
        lat, out, adm = _run_compiled(r, k, pol, seed)
        name = pol.name
    if isinstance(pol, (UCBDH, LAFTPL)) and pol.restart_every:
        name += "-restart"
    counts = np.bincount(out, minlength=3)
    if r.unit:  # unit sizes: bytes are counts (two passes over the trace saved)
        total_bytes, hit_bytes = len(r.codes), int(counts[C.HIT])
    else:
        req_bytes = r.sizes[r.codes]
        total_bytes, hit_bytes = int(req_bytes.sum()), int(req_bytes[out == C.HIT].sum())
    return SimulationResult(
        lat,
        int(counts[C.HIT]),
        int(counts[C.DELAYED_HIT]),
        int(counts[C.MISS]),
        int(adm),
        name,
        out,
        total_bytes,
        hit_bytes,
    )


def _static_resolve(pol: BestStatic, r: _Resolved, k: int) -> np.ndarray:
    """The static set as item codes (the best set in hindsight when ``items`` is None)."""
    if pol.items is None:
        sl, first = C.shadow_process(r.codes, r.z)
        sav = _savings(r.codes, sl, first, len(r.items), pol.preloaded)
        return _static_codes(sav, k, r.sizes, r.unit)
    lookup = {x: c for c, x in enumerate(r.items.tolist())}
    codes = np.asarray(
        [lookup[x] for x in pol.items if x in lookup], dtype=np.int64
    )  # others never requested
    if r.unit and len(pol.items) > k:
        raise ValueError(f"BestStatic.items holds {len(pol.items)} ids, more than capacity={k}")
    if not r.unit and int(r.sizes[codes].sum()) > k:
        raise ValueError(f"BestStatic.items holds {int(r.sizes[codes].sum())} bytes, more than capacity={k}")
    return codes


def _run_compiled(r: _Resolved, k: int, pol: Policy, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    if type(pol) in (LRU, FIFO):
        return C.run_list(r.codes, r.z, r.sizes, k, type(pol) is LRU)
    if type(pol) is Marker:
        return C.run_marker(r.codes, r.z, r.sizes, k, seed)
    if type(pol) is BestStatic:
        return _run_static(r, pol)
    if type(pol) is LFU:
        return C.run_lfu(r.codes, r.z, r.sizes, k, bool(pol.in_cache))
    kind = _SCORED_KIND[type(pol)]
    c = float(getattr(pol, "c", 0.0))
    burst = getattr(pol, "burst", 0.0)
    burst = -1.0 if burst is None else float(burst)  # -1: measured online
    ewma = float(getattr(pol, "ewma", 0.0))
    restart = int(getattr(pol, "restart_every", None) or 0)
    return C.run_scored(r.codes, r.z, r.sizes, k, kind, c, burst, ewma, restart, seed)


def _run_static(r: _Resolved, pol: BestStatic) -> tuple[np.ndarray, np.ndarray, int]:
    lat, first = C.shadow_process(r.codes, r.z)
    inset = np.zeros(len(r.items), dtype=bool)
    inset[np.asarray(sorted(pol._codes), dtype=np.int64)] = True
    member = inset[r.codes]
    cached = member if pol.preloaded else member & ~first
    lat[cached] = 0
    out = np.where(cached, C.HIT, np.where(lat < r.z[r.codes], C.DELAYED_HIT, C.MISS)).astype(np.int8)
    # an uncached request that pays the full Z is a miss (with Z = 0 every uncached request is a miss)
    if pol.preloaded:
        return lat, out, 0
    # a member is admitted when its first fetch completes within the trace
    T = len(r.codes)
    first_t = np.full(len(r.items), T, dtype=np.int64)
    np.minimum.at(first_t, r.codes, np.arange(T))
    members = np.flatnonzero(inset)
    return lat, out, int(np.sum(first_t[members] + r.z[members] <= T - 1))


def _run_hooks(r: _Resolved, k: int, pol: Policy, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The reference engine: the slot semantics of the module docstring, calling the policy's hooks."""
    codes, z, sizes = r.codes, r.z, r.sizes
    m = len(r.items)
    pol.reset(n_items=m, capacity=k, fetch_latency=z, sizes=sizes, seed=seed)
    contents: set[int] = set()
    view = CacheView(contents, k, sizes)
    for j in pol.preload():
        j = int(j)
        if not 0 <= j < m or j in contents:
            raise ValueError(f"{type(pol).__name__}.preload() returned an unknown or repeated item {j!r}")
        contents.add(j)
        view._used += int(sizes[j])
    if view._used > k:
        raise ValueError(f"{type(pol).__name__}.preload() holds {view._used} > capacity={k}")
    zl, sl = z.tolist(), sizes.tolist()
    due = [-1] * m
    heap: list[tuple[int, int]] = []
    T = len(codes)
    lat = np.zeros(T, dtype=np.int64)
    out = np.zeros(T, dtype=np.int8)
    adm = 0
    for t, i in enumerate(codes.tolist()):
        while heap and heap[0][0] <= t:
            _, j = heapq.heappop(heap)
            if sl[j] > k:
                continue  # larger than the whole cache: never admitted
            victims = pol.on_complete(t, j, view)
            if victims is None:
                continue
            victims = [int(v) for v in victims]
            if len(set(victims)) != len(victims) or any(v not in contents for v in victims):
                raise ValueError(
                    f"{type(pol).__name__}.on_complete must return distinct cached items to evict, got {victims}"
                )
            freed = sum(sl[v] for v in victims)
            if view._used - freed + sl[j] > k:
                raise ValueError(
                    f"{type(pol).__name__}.on_complete: evicting {victims} leaves no room for item {j} "
                    f"(size {sl[j]}, free {k - view._used + freed})"
                )
            for v in victims:
                contents.discard(v)
            contents.add(j)
            view._used += sl[j] - freed
            adm += 1
        if i in contents:
            outcome, cost = C.HIT, 0
        elif due[i] > t:
            outcome, cost = C.DELAYED_HIT, due[i] - t
        else:
            outcome, cost = C.MISS, zl[i]
            due[i] = t + zl[i]
            heapq.heappush(heap, (t + zl[i], i))
        lat[t] = cost
        out[t] = outcome
        pol.on_request(t, i, outcome, cost)
    return lat, out, adm
