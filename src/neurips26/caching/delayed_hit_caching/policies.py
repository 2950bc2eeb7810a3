"""Cache policies for the delayed-hit simulator: the public :class:`Policy` interface and the built-ins.

Every policy follows *completion-time admission*: a miss starts a fetch, the item occupies no cache space
while in flight, and the admit/evict decision is taken when the fetch completes. A policy is an online object
with three hooks that :func:`~.simulator.simulate` calls:

- ``reset(n_items=, capacity=, fetch_latency=, sizes=, seed=)`` once before a run (items are dense codes
  ``0..n_items-1``; ``sizes`` are ones for unit-sized objects, and then ``capacity`` counts objects);
- ``on_complete(t, item, cache)`` when the fetch of ``item`` completes at slot ``t`` (before the request of
  slot ``t``): return the cached items to evict so that ``item`` fits (an empty list when it already fits),
  or ``None`` to leave the cache as it is. ``cache`` is a read-only :class:`CacheView`;
- ``on_request(t, item, outcome, latency)`` after every request (``outcome`` is ``HIT``, ``DELAYED_HIT`` or
  ``MISS``), which is where a policy keeps its statistics. An object larger than the whole cache is never
  offered.

Subclass :class:`Policy` and override the hooks to simulate your own policy. The built-in classes implement
the same hooks in plain Python (their reference implementation); when ``simulate`` gets an instance of a
built-in class itself (not of a subclass) it runs a compiled loop instead, and the tests check that both give
the same latencies. The classic policies (LRU, FIFO, LFU, Marker, LRU-MAD) always admit; the learning
policies (UCB-DH, LA-FTPL) admit a completed item only when its index beats the summed index of the cached
items it would displace (with unit sizes: the single cached item with the lowest index).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields

import numpy as np

from ._compiled import DELAYED_HIT, HIT, MISS, capacity_items, perturbations, ucb_index, uniform_index

__all__ = [
    "HIT",
    "DELAYED_HIT",
    "MISS",
    "CacheView",
    "Policy",
    "LRU",
    "FIFO",
    "LFU",
    "Marker",
    "LRUMAD",
    "UCBDH",
    "LAFTPL",
    "BestStatic",
    "make_policy",
]


class CacheView:
    """Read-only view of the cache at a decision: ``item in cache``, ``len(cache)``, iteration, ``free``."""

    __slots__ = ("_items", "capacity", "_used", "sizes")

    def __init__(self, items: set[int], capacity: int, sizes: np.ndarray) -> None:
        self._items = items
        self.capacity = capacity
        self.sizes = sizes
        self._used = 0

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[int]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def used(self) -> int:
        """Occupied capacity (objects, or bytes when objects have sizes)."""
        return self._used

    @property
    def free(self) -> int:
        return self.capacity - self._used


def _check_restart(restart_every: int | None) -> None:
    if restart_every is not None and (
        isinstance(restart_every, bool) or not isinstance(restart_every, int) or restart_every < 1
    ):
        raise ValueError(f"restart_every must be None or an integer >= 1, got {restart_every!r}")


def _check_positive(name: str, value: float, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        rng = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {rng}, got {value!r}")


class Policy:
    """Base class of cache policies (see the module docstring for the hook protocol).

    A subclass overrides :meth:`on_complete` (required) and usually :meth:`on_request`; per-run state is set
    up in :meth:`reset`, so one instance can be simulated many times.
    """

    name = "policy"

    def validate(self) -> None:
        """Raise ``ValueError`` on out-of-range parameters (called by ``simulate`` before a run)."""

    def reset(
        self, *, n_items: int, capacity: int, fetch_latency: np.ndarray, sizes: np.ndarray, seed: int
    ) -> None:
        """Prepare a run over items ``0..n_items-1`` (per-item ``fetch_latency`` and ``sizes`` arrays)."""
        self.n_items, self.capacity = n_items, capacity
        self.fetch_latency, self.sizes, self.seed = fetch_latency, sizes, seed

    def preload(self) -> Iterable[int]:
        """Items in the cache at slot 0 (default: none; the cache starts empty)."""
        return ()

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        """Observe the request of slot ``t`` (``outcome``: HIT, DELAYED_HIT or MISS; its ``latency``)."""

    def on_complete(self, t: int, item: int, cache: CacheView) -> Iterable[int] | None:
        """The fetch of ``item`` completed at slot ``t``: items to evict so that it fits, or None (bypass)."""
        raise NotImplementedError(f"{type(self).__name__} must implement on_complete(t, item, cache)")

    def __repr__(self) -> str:
        try:
            names = [f.name for f in fields(self)]  # type: ignore[arg-type]
        except TypeError:
            names = []
        params = ", ".join(f"{k}={getattr(self, k)!r}" for k in names)
        return f"{type(self).__name__}({params})"


def _evict_in_order(order: Iterable[int], need: int, cache: CacheView, sizes: np.ndarray) -> list[int]:
    """The first items of ``order`` whose eviction frees ``need`` capacity."""
    victims, free = [], cache.free
    it = iter(order)
    while free < need:
        v = next(it)
        victims.append(v)
        free += int(sizes[v])
    return victims


@dataclass(repr=False)
class LRU(Policy):
    """Least recently used: a completed fetch is inserted as most recent; the least recent is evicted."""

    name = "LRU"

    def reset(self, **kw) -> None:
        super().reset(**kw)
        self._order: OrderedDict[int, None] = OrderedDict()

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        if outcome == HIT:
            self._order.move_to_end(item)

    def on_complete(self, t: int, item: int, cache: CacheView) -> list[int]:
        victims = _evict_in_order(self._order, int(self.sizes[item]), cache, self.sizes)
        for v in victims:
            del self._order[v]
        self._order[item] = None
        return victims


@dataclass(repr=False)
class FIFO(LRU):
    """First in, first out: evict the item admitted longest ago; hits do not reorder."""

    name = "FIFO"

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        pass


class _Scored(Policy):
    """Shared victim search of the score-ranked policies: lowest key first, fresh at every decision."""

    always_admit = True

    def _key(self, v: int, t: int) -> tuple:
        raise NotImplementedError

    def _score(self, v: int, t: int) -> float:  # the index compared at admission (learning policies)
        raise NotImplementedError

    def _before_decision(self, t: int) -> None:
        pass

    def _admitted(self, item: int) -> None:
        pass

    def on_complete(self, t: int, item: int, cache: CacheView) -> list[int] | None:
        self._before_decision(t)
        sizes = self.sizes
        need = int(sizes[item])
        if cache.free >= need:
            self._admitted(item)
            return []
        keys = {v: self._key(v, t) for v in cache}
        victims, freed, vsum = [], 0, 0.0
        while cache.free + freed < need:
            v = min(keys, key=keys.__getitem__)
            victims.append(v)
            freed += int(sizes[v])
            if not self.always_admit:
                vsum += self._score(v, t)
            del keys[v]
        if not self.always_admit and not self._score(item, t) > vsum:
            return None
        self._admitted(item)
        return victims


@dataclass(repr=False)
class LFU(_Scored):
    """Least frequently used; always admits. Ties go to the item that reached its count first.

    ``in_cache=False`` (default, "perfect" LFU): every request counts, cached or not, and counts survive
    eviction. ``in_cache=True`` (libCacheSim's LFU): an item enters with count 1 and counts its hits while
    cached.
    """

    in_cache: bool = False
    name = "LFU"

    def validate(self) -> None:
        if not isinstance(self.in_cache, (bool, np.bool_)):
            raise ValueError(f"in_cache must be True or False, got {self.in_cache!r}")

    def reset(self, **kw) -> None:
        super().reset(**kw)
        self._cnt = np.zeros(self.n_items, dtype=np.int64)
        self._stamp = np.zeros(self.n_items, dtype=np.int64)
        self._clock = 0

    def _bump(self, item: int) -> None:
        self._cnt[item] += 1
        self._clock += 1
        self._stamp[item] = self._clock

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        if not self.in_cache or outcome == HIT:
            self._bump(item)

    def _admitted(self, item: int) -> None:
        if self.in_cache:
            self._cnt[item] = 0
            self._bump(item)

    def _key(self, v: int, t: int) -> tuple:
        return (float(self._cnt[v]), int(self._stamp[v]))


@dataclass(repr=False)
class Marker(Policy):
    """Randomized marking: requests mark items; evict a uniformly random unmarked one; new phase if none."""

    name = "Marker"

    def reset(self, **kw) -> None:
        super().reset(**kw)
        self._cached: list[int] = []  # swap-remove lists, as in the compiled loop, so draws coincide
        self._unmarked: list[int] = []
        self._marked: set[int] = set()
        self._draws = 0

    @staticmethod
    def _swap_remove(lst: list[int], v: int) -> None:
        p = lst.index(v)
        last = lst.pop()
        if last != v:
            lst[p] = last

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        if outcome == HIT and item not in self._marked:
            self._marked.add(item)
            self._swap_remove(self._unmarked, item)

    def on_complete(self, t: int, item: int, cache: CacheView) -> list[int]:
        victims, free = [], cache.free
        while free < self.sizes[item]:
            if not self._unmarked:  # new phase
                self._marked.clear()
                self._unmarked = list(self._cached)
            v = self._unmarked[int(uniform_index(self.seed, self._draws, len(self._unmarked)))]
            self._draws += 1
            self._swap_remove(self._unmarked, v)
            self._swap_remove(self._cached, v)
            victims.append(v)
            free += int(self.sizes[v])
        self._cached.append(item)
        self._marked.add(item)
        return victims


@dataclass(repr=False)
class LRUMAD(_Scored):
    """LRU-MAD (Atre et al., SIGCOMM 2020): evict the smallest estimated aggregate delay per unit recency.

    Rank of a cached item ``i`` at time ``t``: ``AggDelay_i / (t - last_request_i + 1)``, where ``AggDelay_i``
    is an exponentially weighted average (weight ``ewma``) of the total latency of its past miss episodes
    (the miss plus its delayed hits), initialised to its fetch latency. [R] reconstruction of the ranking.
    """

    ewma: float = 0.5
    name = "LRU-MAD"

    def validate(self) -> None:
        _check_positive("ewma", self.ewma)
        if self.ewma > 1:
            raise ValueError(f"ewma must lie in (0, 1], got {self.ewma!r}")

    def reset(self, **kw) -> None:
        super().reset(**kw)
        self._last = np.zeros(self.n_items, dtype=np.int64)
        self._agg_est = self.fetch_latency.astype(float)
        self._agg_cur = np.zeros(self.n_items)

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        self._last[item] = t
        if outcome == DELAYED_HIT:
            self._agg_cur[item] += latency
        elif outcome == MISS:
            self._agg_cur[item] = float(latency)

    def on_complete(self, t: int, item: int, cache: CacheView) -> list[int] | None:
        self._agg_est[item] = (1.0 - self.ewma) * self._agg_est[item] + self.ewma * self._agg_cur[item]
        return super().on_complete(t, item, cache)

    def _key(self, v: int, t: int) -> tuple:
        return (float(self._agg_est[v] / (t - self._last[v] + 1)), v)


class _Restarted(_Scored):
    always_admit = False
    restart_every: int | None

    def reset(self, **kw) -> None:
        super().reset(**kw)
        self._t0 = 0
        self._next_restart = self.restart_every or math.inf
        self._epoch = 0
        self._clear()

    def _clear(self) -> None:
        raise NotImplementedError

    def _maybe_restart(self, t: int) -> None:
        if t >= self._next_restart:
            self._t0 = t
            self._next_restart += self.restart_every  # type: ignore[operator]
            self._epoch += 1
            self._clear()

    def _key(self, v: int, t: int) -> tuple:
        return (self._score(v, t) / float(self.sizes[v]), v)


@dataclass(repr=False)
class UCBDH(_Restarted):
    """UCB-DH: keep the top-K items by an optimistic delayed-hit shadow value (reconstructed [R]).

    Every request is observed, so the rate estimate ``lambda_hat_i = n_i / t`` uses all requests; its upper
    confidence bound is ``lambda_hat + c (sqrt(2 lambda_hat log t / t) + log t / t)`` (Bernstein form) and the
    index is the discrete shadow value ``v(lambda_ucb, Z_i)`` of :func:`shadow_value` (per unit size when
    objects have sizes). ``restart_every`` resets the statistics every that many slots (restarted UCB-DH for
    piecewise-stationary workloads). The fetch latencies ``Z_i`` are taken as known.
    """

    c: float = 1.0
    restart_every: int | None = None
    name = "UCB-DH"

    def validate(self) -> None:
        _check_positive("c", self.c, allow_zero=True)
        _check_restart(self.restart_every)

    def _clear(self) -> None:
        self._cnt = np.zeros(self.n_items, dtype=np.int64)

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        self._maybe_restart(t)
        self._cnt[item] += 1

    def _before_decision(self, t: int) -> None:
        self._maybe_restart(t)
        tt = float(t - self._t0 + 1)
        self._inv_tt = 1.0 / tt
        self._lg_tt = math.log(tt + 1.0) * self._inv_tt

    def _score(self, v: int, t: int) -> float:
        return float(
            ucb_index(self._cnt[v], self._inv_tt, self._lg_tt, float(self.c), float(self.fetch_latency[v]))
        )


@dataclass(repr=False)
class LAFTPL(_Restarted):
    """LA-FTPL: follow the perturbed leader on cumulative shadow losses (reconstructed [R]).

    Item ``i``'s shadow loss is the latency its requests would incur were ``i`` never cached (known from the
    request sequence alone). Target set: top-K of ``L_i(t) + eta_t gamma_i``, ``gamma_i ~ N(0, 1)`` drawn once
    per (re)start, ``eta_t = c (Z + sqrt(C_B Z)) sqrt(t / (K log N))`` with ``Z`` the largest fetch latency
    (``K`` = capacity / mean size when objects have sizes) and ``C_B`` the burst constant: ``burst`` when
    given, else (``burst=None``) the largest number of requests in one shadow miss episode seen so far (a
    miss and its delayed hits), measured online from the request sequence. The cache moves towards the
    target only at fetch completions.
    """

    c: float = 1.0
    burst: float | None = None
    restart_every: int | None = None
    name = "LA-FTPL"

    def validate(self) -> None:
        _check_positive("c", self.c, allow_zero=True)
        if self.burst is not None:
            _check_positive("burst", self.burst, allow_zero=True)
        _check_restart(self.restart_every)

    def reset(self, **kw) -> None:
        Policy.reset(self, **kw)
        self._zmax = float(self.fetch_latency.max())
        k = capacity_items(self.sizes, self.capacity)
        self._eta_den = math.sqrt(k * math.log(max(self.n_items, 2)))
        self._cb = 1.0 if self.burst is None else float(self.burst)
        self._episode = np.zeros(self.n_items, dtype=np.int64)
        super().reset(**kw)

    def _clear(self) -> None:
        self._cum = np.zeros(self.n_items)
        self._sdue = np.full(self.n_items, -1, dtype=np.int64)
        self._gamma = perturbations(self.seed, self._epoch, self.n_items)

    def on_request(self, t: int, item: int, outcome: int, latency: int) -> None:
        self._maybe_restart(t)
        d = self._sdue[item]
        if d > t:
            self._cum[item] += d - t
            self._episode[item] += 1
            if self.burst is None and self._episode[item] > self._cb:
                self._cb = float(self._episode[item])
        else:
            self._cum[item] += float(self.fetch_latency[item])
            self._sdue[item] = t + self.fetch_latency[item]
            self._episode[item] = 1

    def _before_decision(self, t: int) -> None:
        self._maybe_restart(t)
        zmax = self._zmax
        self._eta = (
            self.c * (zmax + math.sqrt(self._cb * zmax)) / self._eta_den * math.sqrt(float(t - self._t0 + 1))
        )

    def _score(self, v: int, t: int) -> float:
        return float(self._cum[v] + self._eta * self._gamma[v])


@dataclass(repr=False)
class BestStatic(Policy):
    """A fixed cache set, never evicted. ``items=None`` takes the best static set in hindsight for the trace.

    ``items`` are item ids as they appear in the trace. ``preloaded=False`` (default): the cache starts empty
    like every other policy; each item of the set is fetched on its first request and then kept.
    ``preloaded=True``: the set is in the cache from slot 0.
    """

    items: tuple | None = None
    preloaded: bool = False
    name = "Static"

    def validate(self) -> None:
        if self.items is not None:
            items = tuple(self.items)
            if any(isinstance(i, bool) or i is None for i in items):
                raise ValueError(f"items must be item ids, got {self.items!r}")
            if len(set(items)) != len(items):
                raise ValueError("items must not repeat an id")

    def use_codes(self, codes: np.ndarray) -> None:
        """Set the resolved item codes of the static set (the simulator calls this before a run)."""
        self._codes = set(int(c) for c in codes)

    def preload(self) -> Iterable[int]:
        return sorted(self._codes) if self.preloaded else ()

    def on_complete(self, t: int, item: int, cache: CacheView) -> list[int] | None:
        return [] if item in self._codes else None


_BY_NAME = {
    "lru": LRU,
    "fifo": FIFO,
    "lfu": LFU,
    "marker": Marker,
    "lru-mad": LRUMAD,
    "lrumad": LRUMAD,
    "ucb-dh": UCBDH,
    "ucbdh": UCBDH,
    "la-ftpl": LAFTPL,
    "laftpl": LAFTPL,
    "static": BestStatic,
    "best-static": BestStatic,
}


def make_policy(policy: Policy | str) -> Policy:
    """A policy object from an instance or a name (``lru, fifo, lfu, marker, lru-mad, ucb-dh, la-ftpl,
    static``)."""
    if isinstance(policy, Policy):
        policy.validate()
        return policy
    if isinstance(policy, str) and policy.lower() in _BY_NAME:
        return _BY_NAME[policy.lower()]()
    raise ValueError(f"policy must be a Policy instance or one of {sorted(set(_BY_NAME))}, got {policy!r}")
