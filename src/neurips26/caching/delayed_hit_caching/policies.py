"""Cache policies for the delayed-hit simulator (configuration objects; the simulator runs them).

Every policy follows *completion-time admission*: a miss starts a fetch, the item occupies no cache slot
while in flight, and the admit/evict decision is taken when the fetch completes. The classic policies
(LRU, LFU, Marker, LRU-MAD) always admit; the learning policies (UCB-DH, LA-FTPL) admit the completed item
only when its index beats the cached item with the lowest index, which they then evict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "LRU",
    "LFU",
    "Marker",
    "LRUMAD",
    "UCBDH",
    "LAFTPL",
    "BestStatic",
    "Policy",
    "make_policy",
]


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
    """Base class of the policy configurations understood by :func:`simulate`."""

    name = "policy"

    def validate(self) -> None:
        """Raise ``ValueError`` on out-of-range parameters."""

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"


@dataclass(repr=False)
class LRU(Policy):
    """Least recently used; a completed fetch is inserted as most recent, the least recent is evicted."""

    name = "LRU"


@dataclass(repr=False)
class LFU(Policy):
    """Least frequently used by request count (every request counts, hits and misses alike); always admits."""

    name = "LFU"


@dataclass(repr=False)
class Marker(Policy):
    """Randomized marking: requests mark items; evict a uniformly random unmarked one; new phase if none."""

    name = "Marker"


@dataclass(repr=False)
class LRUMAD(Policy):
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


@dataclass(repr=False)
class UCBDH(Policy):
    """UCB-DH: keep the top-K items by an optimistic delayed-hit shadow value (reconstructed [R]).

    Every request is observed, so the rate estimate ``lambda_hat_i = n_i / t`` uses all requests; its upper
    confidence bound is ``lambda_hat + c (sqrt(2 lambda_hat log t / t) + log t / t)`` (Bernstein form) and the
    index is the discrete shadow value ``v(lambda_ucb, Z_i)`` of :func:`shadow_value`. ``restart_every``
    resets the statistics every that many slots (restarted UCB-DH for piecewise-stationary workloads).
    """

    c: float = 1.0
    restart_every: int | None = None
    name = "UCB-DH"

    def validate(self) -> None:
        _check_positive("c", self.c, allow_zero=True)
        _check_restart(self.restart_every)


@dataclass(repr=False)
class LAFTPL(Policy):
    """LA-FTPL: follow the perturbed leader on cumulative shadow losses (reconstructed [R]).

    Item ``i``'s shadow loss is the latency its requests would incur were ``i`` never cached (known from the
    request sequence alone). Target set: top-K of ``L_i(t) + eta_t gamma_i``, ``gamma_i ~ N(0, 1)`` drawn once
    per (re)start, ``eta_t = c (Z + sqrt(burst Z)) sqrt(t / (K log N))`` with ``Z`` the largest fetch latency.
    The cache moves towards the target only at fetch completions.
    """

    c: float = 1.0
    burst: float = 1.0
    restart_every: int | None = None
    name = "LA-FTPL"

    def validate(self) -> None:
        _check_positive("c", self.c, allow_zero=True)
        _check_positive("burst", self.burst, allow_zero=True)
        _check_restart(self.restart_every)


@dataclass(repr=False)
class BestStatic(Policy):
    """A fixed cache set, never evicted. ``items=None`` takes the best static set in hindsight for the trace.

    ``preloaded=False`` (default): the cache starts empty like every other policy; each item of the set is
    fetched on its first request and then kept. ``preloaded=True``: the set is in the cache from slot 0.
    """

    items: tuple[int, ...] | None = None
    preloaded: bool = False
    name = "Static"

    def validate(self) -> None:
        if self.items is not None:
            items = tuple(self.items)
            if any(isinstance(i, bool) or not isinstance(i, (int,)) or i < 0 for i in items):
                raise ValueError(f"items must be non-negative integer ids, got {self.items!r}")
            if len(set(items)) != len(items):
                raise ValueError("items must not repeat an id")


_BY_NAME = {
    "lru": LRU,
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
    """A policy object from an instance or a name (``lru, lfu, marker, lru-mad, ucb-dh, la-ftpl, static``)."""
    if isinstance(policy, Policy):
        policy.validate()
        return policy
    if isinstance(policy, str) and policy.lower() in _BY_NAME:
        return _BY_NAME[policy.lower()]()
    raise ValueError(f"policy must be a Policy instance or one of {sorted(set(_BY_NAME))}, got {policy!r}")
