"""Kontoyiannis match-length entropy-rate estimator H_K.

Kontoyiannis, Algoet, Suhov and Wyner (1998), "Nonparametric entropy estimation for stationary processes and
random fields, with applications to English text", IEEE Trans. Inf. Theory 44(3) (KASW).

For a token sequence x_1..x_n the match length at position i is

    Lambda_i = 1 + max{ L : 0 <= L <= m_i,  x_i..x_{i+L-1} = x_j..x_{j+L-1}  for some j in the past }

i.e. the length of the shortest substring starting at i that has not appeared starting anywhere in the past.
The match may run past position i (it may overlap itself, as in LZ77), but its length is capped by the length
of the past: m_i = i - 1 for the increasing window (x_1..x_{i-1}) and m_i = w for the sliding window
(x_{i-w}..x_{i-1}). The cap is our reading of KASW's "match within the past"; it binds only where a match
is longer than the past itself (a self-overlapping match, such as a long run of one symbol near the start). Three estimators are exposed (``variant``):

- ``"increasing"`` (KASW 1998, Thm. 2):  H = [ (1/n) sum_{i=2..n} Lambda_i / log2(i) ]^(-1)   bits/token;
- ``"bagrow"`` (Bagrow et al. style ``LZ_entropy``):  H = n log2(n) / sum_{i=1..n} Lambda_i;
- ``"window"`` (KASW sliding window w):  H = [ mean_{i > w} Lambda_i^(w) / log2(w) ]^(-1), the mean taken
  over the positions that have a full window of w past tokens.

All match lengths of the increasing window are obtained in O(n log n) from the suffix array: the longest match
of position i with a suffix starting earlier is the "longest previous factor" (LPF), attained at the nearest
rank (in suffix-array order) above or below i among suffixes that start before i (the previous/next smaller
value of the suffix array). Both neighbours are found for all ranks at once by binary lifting over a sparse
table of range minima, and the LCP with each neighbour is a range minimum of the LCP array; everything is a
handful of numpy passes per power of two (the suffix array by prefix doubling, the LCP array by lifting over
the doubling ranks). When ``pydivsufsort`` is installed (``backend="auto"``) its C suffix array is used instead,
and the longest previous factor follows from it in one compiled pass without an LCP array (Crochemore and Ilie
2008; numba, else pydivsufsort's own ``longest_previous_factor``): the whole estimate then costs about what a
pydivsufsort suffix array + LCP array does. The numpy path stays the fallback and the reference the tests hold
it to. The sliding window uses the O(n w) diagonal method: for each lag d <= w the run
lengths of ``x[i] == x[i-d]``. :func:`naive_match_lengths` is the obvious O(n^2) scan.

Reconstructed [R]: which variant and token unit the paper used are unknown; the default is the increasing
window over lower-cased words (``\\w+`` runs; punctuation and whitespace separate words). The increasing
variant is biased low on short sequences (log2(i) converges slowly); that bias is documented, not corrected.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

try:  # optional fast suffix array (C); the numpy fallback below is exact too
    import pydivsufsort as _pds
except ImportError:  # pragma: no cover - exercised only without the optional dependency
    _pds = None

__all__ = [
    "BACKENDS",
    "VARIANTS",
    "UNITS",
    "tokenize",
    "match_lengths",
    "naive_match_lengths",
    "entropy_rate",
    "entropy_from_match_lengths",
]

VARIANTS = ("increasing", "bagrow", "window")
UNITS = ("word", "char")
BACKENDS = ("auto", "pydivsufsort", "numpy")
_WORD_RE = re.compile(r"\w+")


def tokenize(text: str, unit: str = "word") -> list[str]:
    """Split ``text`` into lower-cased ``\\w+`` words (``unit="word"``) or raw characters (``"char"``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if unit == "word":
        return _WORD_RE.findall(text.lower())
    if unit == "char":
        return list(text)
    raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")


def _as_ids(x: Any, unit: str = "word") -> np.ndarray:
    """Token ids 0..V-1 (int64) of a string, a sequence of hashable tokens or a 1-D integer array."""
    if isinstance(x, str):
        tokens: Any = tokenize(x, unit)
    elif isinstance(x, np.ndarray):
        tokens = x
    elif isinstance(x, Sequence):
        tokens = x
    else:
        raise TypeError(
            f"x must be a str, a sequence of hashable tokens or a 1-D integer array, got {type(x).__name__}"
        )
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1:
            raise ValueError(f"x must be 1-D, got an array of shape {tokens.shape}")
        if tokens.dtype.kind not in "iub":
            raise TypeError(f"x as an array must hold integer token ids, got dtype {tokens.dtype}")
        arr = tokens
    else:
        if len(tokens) == 0:
            raise ValueError("x is empty: the entropy rate needs at least 2 tokens")
        first = tokens[0]
        if all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in tokens):
            arr = np.asarray(tokens, dtype=np.int64)
        else:
            mapping: dict[Any, int] = {}
            try:
                arr = np.fromiter(
                    (mapping.setdefault(t, len(mapping)) for t in tokens), np.int64, len(tokens)
                )
            except TypeError as err:
                raise TypeError(f"x must hold hashable tokens; {type(first).__name__}: {err}") from None
    if arr.size < 2:
        raise ValueError(f"x must hold at least 2 tokens, got {arr.size}")
    return _dense_ids(arr)


def _dense_ids(arr: np.ndarray) -> np.ndarray:
    """Ids 0..V-1 in the order of the values (what ``np.unique(arr, return_inverse=True)`` gives): a lookup
    table over the value range when it is at most a few times the length (O(n), 8x faster than the sort at
    1e6 tokens), else the sort."""
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    lo, hi = int(arr.min()), int(arr.max())
    if hi - lo <= 4 * arr.size + 1024:
        shifted = (arr - arr.dtype.type(lo)).astype(np.intp, copy=False)
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[shifted] = True
        return (np.cumsum(present, dtype=np.int64) - 1)[shifted]
    _, ids = np.unique(arr, return_inverse=True)
    return ids.astype(np.int64, copy=False).ravel()


# --- suffix array and LCP -----------------------------------------------------------------------------------
def _suffix_array_doubling(ids: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Suffix array by prefix doubling; also returns the rank arrays of prefixes of length 1, 2, 4, ..."""
    n = ids.size
    rank = ids.astype(np.int64)
    ranks = [rank]
    k = 1
    while True:
        second = np.full(n, -1, dtype=np.int64)
        second[: n - k] = rank[k:]
        sa = np.lexsort((second, rank))
        r1, r2 = rank[sa], second[sa]
        new_rank = np.empty(n, dtype=np.int64)
        new_rank[sa] = np.concatenate(([0], np.cumsum((r1[1:] != r1[:-1]) | (r2[1:] != r2[:-1]))))
        rank = new_rank
        ranks.append(rank)
        if rank[sa[-1]] == n - 1 or k >= n:
            return sa, ranks
        k *= 2


def _lcp_from_ranks(sa: np.ndarray, ranks: list[np.ndarray]) -> np.ndarray:
    """lcp[r] = LCP(suffix sa[r], suffix sa[r+1]) by lifting over the doubling ranks (exact)."""
    n = sa.size
    a, b = sa[:-1].copy(), sa[1:].copy()
    lcp = np.zeros(n - 1, dtype=np.int64)
    for level in range(len(ranks) - 1, -1, -1):
        rk = ranks[level]
        ok = (a < n) & (b < n)
        ok[ok] = rk[a[ok]] == rk[b[ok]]
        step = 1 << level
        a += ok * step
        b += ok * step
        lcp += ok * step
    return lcp


def _suffix_array_lcp(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Suffix array and LCP array (lcp[r] = LCP of ranks r and r + 1), by numpy prefix doubling."""
    sa, ranks = _suffix_array_doubling(ids)
    return sa.astype(np.int64), _lcp_from_ranks(sa, ranks)


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "pydivsufsort" if _pds is not None else "numpy"
    if backend == "pydivsufsort" and _pds is None:
        raise ImportError("backend='pydivsufsort' needs pydivsufsort: pip install 'neurips26[streams]'")
    return backend


def _longest_previous_factor(ids: np.ndarray, backend: str = "auto") -> np.ndarray:
    """LPF[i] = max_{j < i} LCP(x[i:], x[j:]) (overlaps allowed).

    ``"pydivsufsort"``: its suffix array (C) and, with numba, our compiled pass :func:`_lpf_from_suffix_array`
    (no LCP array needed); without numba pydivsufsort's own ``longest_previous_factor`` (suffix array + Kasai
    LCP + LPF, about 1.3x slower). ``"numpy"``: our prefix-doubling code."""
    if _check_backend(backend) == "pydivsufsort":
        kernel = _compiled_lpf_kernel()
        if kernel is None:
            return np.asarray(
                _pds.longest_previous_factor(np.ascontiguousarray(ids, dtype=np.int64)), dtype=np.int64
            )
        # the narrowest unsigned dtype: divsufsort sorts bytes (1 byte a token when V <= 256), and the
        # pass's random reads of the text stay in cache
        top = int(ids.max())
        text = ids.astype(np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32)
        return kernel(text, _pds.divsufsort(text))
    return _longest_previous_factor_numpy(ids)


def _lpf_from_suffix_array(text: np.ndarray, sa: np.ndarray) -> np.ndarray:
    """LPF from the suffix array alone (Crochemore and Ilie 2008, the variant without an LCP array).

    The longest previous factor of i is attained at prev[i] or next[i], the nearest suffixes in suffix-array
    order that start before i; one stack pass over the suffix array gives both. The two LCPs are then found
    by direct comparison in text order with Kasai's amortisation: if i's match with p = prev[i] has length l,
    then p + 1 < i + 1 sorts below i + 1 and shares l - 1 symbols with it, so LCP(i + 1, prev[i + 1]) >= l - 1
    (the same for next), and the comparisons cost O(n) in all.
    """
    n = sa.size
    link = np.empty((n, 2), dtype=sa.dtype)  # link[i] = (prev[i], next[i]), -1 where there is none
    stack = np.empty(n + 1, dtype=sa.dtype)
    top = 0
    for r in range(n):
        v = sa[r]
        while top > 0 and stack[top - 1] > v:
            top -= 1
            link[stack[top], 1] = v
        link[v, 0] = stack[top - 1] if top > 0 else -1
        link[v, 1] = -1
        stack[top] = v
        top += 1
    lpf = np.empty(n, dtype=np.int64)
    lp = 0  # LCP(i, prev[i]) carried over from i - 1, minus one (a lower bound)
    ln = 0
    for i in range(n):
        p = link[i, 0]
        q = link[i, 1]
        if p >= 0:
            while i + lp < n and text[p + lp] == text[i + lp]:
                lp += 1
        else:
            lp = 0
        if q >= 0:
            while i + ln < n and text[q + ln] == text[i + ln]:
                ln += 1
        else:
            ln = 0
        lpf[i] = max(lp, ln)
        if lp > 0:
            lp -= 1
        if ln > 0:
            ln -= 1
    return lpf


@functools.cache
def _compiled_lpf_kernel() -> Any:
    """:func:`_lpf_from_suffix_array` compiled by numba (on first use: importing numba costs about a
    second), or None where numba is not installed."""
    try:
        import numba
    except ImportError:  # pragma: no cover - exercised only without numba
        return None
    return numba.njit(cache=True, nogil=True)(_lpf_from_suffix_array)


def _sparse_min(values: np.ndarray, levels: int) -> list[np.ndarray]:
    """table[k][t] = min(values[t : t + 2**k]) for t <= len(values) - 2**k."""
    table = [values]
    for k in range(1, levels):
        prev, half = table[-1], 1 << (k - 1)
        if prev.size <= half:
            break
        table.append(np.minimum(prev[:-half], prev[half:]))
    return table


def _longest_previous_factor_numpy(ids: np.ndarray) -> np.ndarray:
    """LPF[i] = max_{j < i} LCP(x[i:], x[j:]) for all i, in O(n log n) numpy passes (overlaps allowed)."""
    n = ids.size
    sa, lcp = _suffix_array_lcp(ids)
    levels = max(1, int(n).bit_length())
    sa_min = _sparse_min(sa, levels)
    lcp_min = _sparse_min(lcp, levels) if n > 1 else [lcp]
    ranks_all = np.arange(n, dtype=np.int64)
    big = np.iinfo(np.int64).max
    # previous smaller value: smallest p with sa[p:r] > sa[r]; PSV = p - 1; lcp = min(lcp[p-1 : r])
    p = ranks_all.copy()
    acc = np.full(n, big, dtype=np.int64)
    for k in range(len(sa_min) - 1, -1, -1):
        t = p - (1 << k)
        ok = t >= 0
        idx = np.flatnonzero(ok)
        ok[idx] = sa_min[k][t[idx]] > sa[idx]
        idx = np.flatnonzero(ok)
        p[idx] = t[idx]
        if idx.size and k < len(lcp_min):
            acc[idx] = np.minimum(acc[idx], lcp_min[k][t[idx]])
    has = p > 0
    left = np.zeros(n, dtype=np.int64)
    left[has] = np.minimum(acc[has], lcp[p[has] - 1])
    # next smaller value: largest q with sa[r+1:q] > sa[r]; NSV = q; lcp = min(lcp[r : q])
    q = ranks_all + 1
    acc = np.full(n, big, dtype=np.int64)
    for k in range(len(sa_min) - 1, -1, -1):
        ok = q + (1 << k) <= n
        idx = np.flatnonzero(ok)
        ok[idx] = sa_min[k][q[idx]] > sa[idx]
        idx = np.flatnonzero(ok)
        if idx.size and k < len(lcp_min):
            acc[idx] = np.minimum(acc[idx], lcp_min[k][q[idx] - 1])
        q[idx] += 1 << k
    has = q < n
    right = np.zeros(n, dtype=np.int64)
    right[has] = np.minimum(acc[has], lcp[q[has] - 1])
    lpf = np.empty(n, dtype=np.int64)
    lpf[sa] = np.maximum(left, right)
    return lpf


def _window_matches(ids: np.ndarray, window: int) -> np.ndarray:
    """Longest match (capped at ``window``) starting at some j in [i - window, i - 1], by diagonals."""
    n = ids.size
    best = np.zeros(n, dtype=np.int64)
    for d in range(1, min(window, n - 1) + 1):
        eq = ids[d:] == ids[:-d]  # eq[t]: x[t + d] == x[t]
        m = eq.size
        pos = np.arange(m)
        nxt = np.where(eq, m, pos)
        nxt = np.minimum.accumulate(nxt[::-1])[::-1]  # first mismatch at or after t
        np.maximum(best[d:], np.minimum(nxt - pos, window), out=best[d:])
    return best


def _batch_diagonal_matches(docs: list[np.ndarray], window: int | None) -> list[np.ndarray]:
    """Match lengths (Lambda - 1) of many short documents at once: diagonal run lengths on a padded matrix.

    O(D L^2) vectorized work for D documents of length <= L; exact (the same values as the suffix path).
    """
    lengths = np.array([d.size for d in docs])
    width = int(lengths.max())
    cols = np.arange(width)
    x = np.broadcast_to(-1 - cols, (len(docs), width)).copy()  # padding never equals anything else
    mask = cols[None, :] < lengths[:, None]
    x[mask] = np.concatenate(docs)
    best = np.zeros(x.shape, dtype=np.int64)
    max_lag = width - 1 if window is None else min(window, width - 1)
    for d in range(1, max_lag + 1):
        eq = x[:, d:] == x[:, :-d]
        m = eq.shape[1]
        nxt = np.where(eq, m, np.arange(m))
        nxt = np.minimum.accumulate(nxt[:, ::-1], axis=1)[:, ::-1]
        np.maximum(best[:, d:], nxt - np.arange(m), out=best[:, d:])
    cap = cols if window is None else np.full(width, window)
    best = np.minimum(best, cap[None, :])
    return [best[k, : lengths[k]] for k in range(len(docs))]


def _many_match_lengths(docs: list[np.ndarray], window: int | None, short: int = 384) -> list[np.ndarray]:
    """Lambda for each id array: batched diagonals for short documents, suffix arrays for long ones."""
    out: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(docs)
    small = [k for k, d in enumerate(docs) if d.size <= short]
    for start in range(0, len(small), 256):  # bounded memory per batch
        part = small[start : start + 256]
        for k, lam in zip(part, _batch_diagonal_matches([docs[k] for k in part], window)):
            out[k] = lam + 1
    for k, d in enumerate(docs):
        if d.size > short:
            out[k] = match_lengths(d, window=window)
    return out


# --- public API ---------------------------------------------------------------------------------------------
def _check_window(variant: str, window: int | None) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if variant == "window":
        if window is None or isinstance(window, bool) or not isinstance(window, (int, np.integer)):
            raise ValueError(f"window must be an integer >= 2 for variant='window', got {window!r}")
        if window < 2:
            raise ValueError(f"window must be an integer >= 2, got {window}")
    elif window is not None:
        raise ValueError(f"window is only used by variant='window', got window={window!r} with {variant!r}")


def match_lengths(
    x: Any, *, window: int | None = None, unit: str = "word", backend: str = "auto"
) -> np.ndarray:
    """Match lengths Lambda_1..Lambda_n (KASW) of ``x``; ``window=None`` is the increasing window.

    Parameters
    ----------
    x : str (tokenized by ``unit``), sequence of hashable tokens, or 1-D integer array of token ids.
    window : None for the increasing window (the whole past), or the sliding-window length w >= 2.
    unit : ``"word"`` or ``"char"``; only used when ``x`` is a str.
    backend : increasing window only: ``"auto"`` (pydivsufsort when installed, else numpy), ``"pydivsufsort"``
        or ``"numpy"`` (our O(n log n) suffix-array code). All give identical lengths.

    Returns
    -------
    int64 array of length n; ``Lambda[0] == 1`` (nothing in the past).
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if window is not None:
        _check_window("window", window)
    backend = _check_backend(backend)
    ids = _as_ids(x, unit)
    n = ids.size
    if window is None:
        matched = _longest_previous_factor(ids, backend)  # a fresh array: capped in place
        np.minimum(matched, np.arange(n), out=matched)  # cap: the length of the past
    else:
        matched = _window_matches(ids, int(window))
    matched += 1
    return matched


def naive_match_lengths(x: Any, *, window: int | None = None, unit: str = "word") -> np.ndarray:
    """Reference O(n^2 L) scan of the same match lengths as :func:`match_lengths` (for tests, small n)."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if window is not None:
        _check_window("window", window)
    s = _as_ids(x, unit).tolist()
    n = len(s)
    out = np.ones(n, dtype=np.int64)
    for i in range(n):
        lo = 0 if window is None else max(0, i - window)
        cap = i if window is None else window
        best = 0
        for j in range(lo, i):
            length = 0
            while i + length < n and length < cap and s[j + length] == s[i + length]:
                length += 1
            best = max(best, length)
        out[i] = best + 1
    return out


_INVERSE_LOG2 = np.empty(0)
_INVERSE_LOG2_CACHED = 1 << 22  # longest weight table kept between calls (32 MB)


def _inverse_log2(n: int) -> np.ndarray:
    """The weights 1 / log2(i) for i = 2..n of the increasing-window estimator (a table kept between calls:
    recomputing the logarithms was a third of the formula's time at 1e6 tokens)."""
    global _INVERSE_LOG2
    if n - 1 <= _INVERSE_LOG2.size:
        return _INVERSE_LOG2[: n - 1]
    weights = 1.0 / np.log2(np.arange(2, n + 1, dtype=np.float64))
    if n - 1 <= _INVERSE_LOG2_CACHED:
        _INVERSE_LOG2 = weights
        _INVERSE_LOG2.flags.writeable = False
    return weights


def entropy_from_match_lengths(
    lam: np.ndarray, variant: str = "increasing", window: int | None = None
) -> float:
    """H_K (bits/token) from match lengths, by the formula of ``variant`` (see the module docstring)."""
    _check_window(variant, window)
    lam = np.asarray(lam)
    if lam.ndim != 1 or lam.size < 2:
        raise ValueError(f"lam must be a 1-D array of at least 2 match lengths, got shape {lam.shape}")
    if lam.dtype.kind not in "iu" or np.any(lam < 1):
        raise ValueError("lam must hold integer match lengths >= 1")
    n = lam.size
    if variant == "increasing":
        return float(n / np.dot(lam[1:], _inverse_log2(n)))
    if variant == "bagrow":
        return float(n * np.log2(n) / np.sum(lam))
    if n <= window:  # type: ignore[operator]
        raise ValueError(f"window must be smaller than the number of tokens ({n}), got {window}")
    return float(np.log2(window) / np.mean(lam[window:]))


def entropy_rate(
    x: Any,
    *,
    variant: str = "increasing",
    window: int | None = None,
    unit: str = "word",
    method: str = "fast",
) -> float:
    """Kontoyiannis match-length estimate H_K of the entropy rate of ``x``, in bits per token.

    Parameters
    ----------
    x : str (tokenized by ``unit``), sequence of hashable tokens, or 1-D integer array of token ids
        (at least 2 tokens).
    variant : ``"increasing"`` (KASW 1998, default), ``"bagrow"`` (n log2 n / sum Lambda_i) or ``"window"``.
    window : sliding-window length w >= 2, required by (and only allowed with) ``variant="window"``.
    unit : ``"word"`` (lower-cased ``\\w+`` runs) or ``"char"``; used only when ``x`` is a str. Values are not
        comparable across units.
    method : ``"fast"`` (suffix array, O(n log n); O(n w) for the window) or ``"naive"`` (O(n^2) reference).

    Examples
    --------
    >>> round(entropy_rate([0, 1] * 500, variant="bagrow"), 3) < 0.1
    True
    """
    _check_window(variant, window)
    if method not in ("fast", "naive"):
        raise ValueError(f"method must be 'fast' or 'naive', got {method!r}")
    fn = match_lengths if method == "fast" else naive_match_lengths
    lam = fn(x, window=window if variant == "window" else None, unit=unit)
    return entropy_from_match_lengths(lam, variant, window)
