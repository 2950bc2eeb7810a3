"""Request traces: the :class:`Trace` container, id encoding, and the synthetic traces S1-S5 of the reproduction
check (the paper's CDN/CAIDA traces are not public; :mod:`.trace_io` reads the formats users have).

S1 stationary Zipf; S2 stationary Zipf with per-item fetch latencies in {5, 50} (frequency order differs from
shadow-value order); S3 piecewise-stationary Zipf whose popularity permutation changes ``n_segments`` times;
S4 adversarial cyclic bursts over ``K + 1`` hot items (defeats LRU and Marker); S5 bursty ON/OFF
(Markov-modulated) arrivals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import _compiled

__all__ = ["Trace", "encode_ids", "zipf_probabilities", "make_trace"]


@dataclass
class Trace:
    """A request trace: one request per slot, as dense item codes, with what is known about each item.

    Attributes
    ----------
    name : a label.
    requests : int64 item codes ``0..n_items-1``, one per slot (for generated traces the codes are the ids).
    fetch_latency : per item code, in slots (int64), or None when the trace does not say (give it to
        :func:`simulate`).
    change_points : slots where the popularity changes (S3), else empty.
    items : the original id of each item code (None: the codes are the ids). ``items[requests]`` gives back
        the trace's ids.
    sizes : per item code, in bytes (None: unit-sized objects; the capacity then counts objects).
    timestamps : per request, as read from a file (the slotted model does not use them).
    """

    name: str
    requests: np.ndarray
    fetch_latency: np.ndarray | None = None
    change_points: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    items: np.ndarray | None = None
    sizes: np.ndarray | None = None
    timestamps: np.ndarray | None = None

    @property
    def n_requests(self) -> int:
        return int(len(self.requests))

    @property
    def n_items(self) -> int:
        if self.items is not None:
            return int(len(self.items))
        if self.fetch_latency is not None and np.ndim(self.fetch_latency) == 1:
            return int(len(self.fetch_latency))
        return int(self.requests.max()) + 1 if len(self.requests) else 0

    def ids(self) -> np.ndarray:
        """The item id of every request (``items[requests]``)."""
        return self.requests if self.items is None else self.items[self.requests]

    @classmethod
    def from_requests(
        cls,
        ids: object,
        *,
        fetch_latency: object | None = None,
        sizes: object | None = None,
        timestamps: object | None = None,
        name: str = "trace",
    ) -> Trace:
        """Encode a sequence of item ids (any integers, or hashable values such as strings) once.

        ``fetch_latency`` / ``sizes``: a scalar, a mapping ``{id: value}``, or (for non-negative integer ids) an
        array indexed by id. See :func:`encode_ids` for the order of the codes.
        """
        codes, items = encode_ids(ids)
        z = None if fetch_latency is None else per_item(fetch_latency, items, "fetch_latency", minimum=0)
        s = None if sizes is None else per_item(sizes, items, "sizes", minimum=1)
        ts = None if timestamps is None else np.asarray(timestamps)
        if ts is not None and ts.shape != codes.shape:
            raise ValueError(
                f"timestamps must have one entry per request ({len(codes)}), got shape {ts.shape}"
            )
        return cls(name, codes, z, items=items, sizes=s, timestamps=ts)


def encode_ids(ids: object) -> tuple[np.ndarray, np.ndarray]:
    """Map item ids to dense codes once: ``codes`` (int64, one per request) and ``items`` (the id of each code).

    Integer ids (any int64/uint64 values, e.g. 64-bit hashes) keep their sorted order, so codes order like
    ids; other hashable ids (strings, tuples) are coded by first appearance. Floats and booleans are refused:
    they are not ids.
    """
    arr = _as_id_array(ids)
    if arr.size == 0:
        raise ValueError("trace must contain at least one request")
    if np.issubdtype(arr.dtype, np.integer):
        lo, hi = int(arr.min()), int(arr.max())
        if hi - lo <= 4 * arr.size + 1024:
            # ids in a narrow range (dense ids, the usual case): a lookup table over the range, O(n) instead of
            # the O(n log n) sort, which cost more than simulating the requests; the same codes and items
            shifted = (arr - arr.dtype.type(lo)).astype(np.intp, copy=False)
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[shifted] = True
            items = np.flatnonzero(present).astype(arr.dtype) + arr.dtype.type(lo)
            return (np.cumsum(present, dtype=np.int64) - 1)[shifted], items
        if _compiled.HAVE_NUMBA:
            # wide ranges (sparse 64-bit ids): hash by first appearance, then sort only the distinct ids;
            # the same codes and items as np.unique, without sorting the n requests
            wide = np.int64 if arr.dtype.kind == "i" else np.uint64  # native 64-bit: the bits are the value
            bits = np.ascontiguousarray(arr.astype(wide, copy=False)).view(np.uint64)
            first, distinct = _compiled.factorize_u64(bits)
            distinct = distinct.view(wide).astype(arr.dtype)
            order = np.argsort(distinct, kind="stable")
            rank = np.empty(order.size, dtype=np.int64)
            rank[order] = np.arange(order.size)
            return rank[first], distinct[order]
        items, codes = np.unique(arr, return_inverse=True)
        return codes.astype(np.int64).ravel(), items
    if arr.dtype.kind in "US":
        items, codes = np.unique(arr, return_inverse=True)
        return codes.astype(np.int64).ravel(), items
    index: dict = {}
    codes = np.empty(arr.size, dtype=np.int64)
    for t, x in enumerate(arr.tolist()):
        if isinstance(x, (bool, np.bool_, float, np.floating)):
            raise ValueError(f"trace item ids must be integers or hashable values, got {x!r} at position {t}")
        try:
            codes[t] = index.setdefault(x, len(index))
        except TypeError:
            raise ValueError(f"trace item ids must be hashable, got {x!r} at position {t}") from None
    items = np.empty(len(index), dtype=object)
    items[:] = list(index)
    return codes, items


def _as_id_array(ids: object) -> np.ndarray:
    if isinstance(ids, np.ndarray):
        arr = ids
    elif isinstance(ids, (list, tuple)) and ids and all(isinstance(x, tuple) for x in ids):
        arr = np.empty(len(ids), dtype=object)
        arr[:] = list(ids)
    else:
        try:
            arr = np.asarray(ids)
        except ValueError:
            arr = np.empty(len(ids), dtype=object)  # type: ignore[arg-type]
            arr[:] = list(ids)  # type: ignore[call-overload]
    if arr.ndim != 1:
        raise ValueError(f"trace must be a 1-D sequence of item ids, got shape {arr.shape}")
    if (
        arr.dtype == bool
        or np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.complexfloating)
    ):
        raise ValueError(f"trace must hold integer or hashable item ids, got dtype {arr.dtype}")
    return arr


def per_item(values: object, items: np.ndarray, name: str, minimum: int) -> np.ndarray:
    """Per-code int64 values from a scalar, a ``{id: value}`` mapping, or an array indexed by integer id."""
    if isinstance(values, Mapping):
        try:
            raw = [values[x] for x in items.tolist()]
        except KeyError as err:
            raise ValueError(f"{name} mapping has no entry for item id {err.args[0]!r}") from None
        out = np.asarray(raw)
    else:
        out = np.asarray(values)
        if out.ndim == 1:
            if not np.issubdtype(items.dtype, np.integer) or (items.size and items.min() < 0):
                raise ValueError(
                    f"{name} as an array is indexed by item id, which needs non-negative integer ids; "
                    "give a {id: value} mapping instead"
                )
            if items.size and out.size <= int(items.max()):
                raise ValueError(
                    f"{name} must be a scalar, a {{id: value}} mapping, or a 1-D array with one entry per item id "
                    f"(>= {int(items.max()) + 1}), got shape {out.shape}"
                )
        elif out.ndim != 0:
            raise ValueError(f"{name} must be a scalar, a mapping or a 1-D array, got shape {out.shape}")
    check_integers(out, name, minimum)
    if out.ndim == 0:
        return np.full(len(items), int(out), dtype=np.int64)
    return (out if isinstance(values, Mapping) else out[items.astype(np.int64)]).astype(np.int64)


def check_integers(values: np.ndarray, name: str, minimum: int) -> None:
    """Refuse anything but finite integers >= ``minimum`` (naming ``name``)."""
    what = "non-negative" if minimum == 0 else f">= {minimum}"
    if values.dtype == bool or not (
        np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)
    ):
        raise ValueError(f"{name} must be {what} integers, got dtype {values.dtype}")
    if values.size and (
        not np.all(np.isfinite(values)) or np.any(values < minimum) or np.any(values != np.round(values))
    ):
        raise ValueError(f"{name} must be finite {what} integers")


def zipf_probabilities(n_items: int, alpha: float) -> np.ndarray:
    """``p_i proportional to (i + 1)^-alpha`` for ``i = 0..n_items-1``."""
    if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be an integer >= 1, got {n_items!r}")
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float, np.number))
        or not np.isfinite(alpha)
        or alpha < 0
    ):
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
    return Trace(kind, np.asarray(req, dtype=np.int64), lat, cps, items=np.arange(n))
