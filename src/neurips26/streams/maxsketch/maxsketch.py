"""MaxSketch: robust distinct counting with the maxima of random projections.

Paper: N. Tsikouras, C. Caramanis, C. Tzamos, "MaxSketch: Robust Distinct Counting in Streams via Random
Projections", arXiv 2605.15571 (NeurIPS 2026). Only the abstract is public to us; everything beyond "keep the
maximum of random Gaussian projections" is reconstructed ([R]) from the abstract, the cited prior work and
standard max-stable sketch math.

Model. Each stream item ``x_t`` is a unit-norm noisy view of one of ``n`` latent objects with centres ``u_o``;
centres are nearly orthogonal and ``||x_t - u_o|| <= delta`` (small).

Sketch (max-linear). ``m`` directions ``g_j = h_j / ||h_j||`` with ``h_j ~ N(0, I_d)``, derived from the seed
(generated once per process and cached; never serialised). State ``S_j = max_t <g_j, x_t>`` (``m`` float32).
Merging is the elementwise maximum; repeats and order of the items do not change the state.

Estimator [R]. For fixed ``j`` the values ``<g_j, u_o>`` over isotropic, independent centres are i.i.d. with the
law of one coordinate of a uniform point on the sphere ``S^{d-1}``,

    F_d(s) = P(<g, u> <= s) = I_{(1+s)/2}((d-1)/2, (d-1)/2)            (regularised incomplete beta),

so ``P(S_j <= s) = F_d(s)^n`` and ``E_j = -log F_d(S_j) ~ Exponential(rate n)``. The rate estimate is

    n_hat = (m - 1) / sum_j E_j                                          (unbiased for n),

with relative standard deviation ``1 / sqrt(m - 2)``; ``method="median_of_means"`` takes the median of this
estimate over groups of projections. Using the exact spherical law instead of ``Phi(sqrt(d) s)`` is our
refinement [R]: it is the Gaussian-projection model conditioned on ``||h_j||``, whose fluctuation would otherwise
act as a common factor over all objects and bias the inversion. The tail ``1 - F_d`` is evaluated directly as
an incomplete beta function (never as one minus the CDF), because ``F_d(S_j)`` is within ``1/n`` of 1.

Noise correction [R]. Noisy views add a positive bias: an object seen ``r`` times contributes the maximum over
``r`` noisy copies. With a view model ``<g, x> = rho <g, u> + tau e / sqrt(d)`` (``e ~ N(0, 1)``,
``rho = sqrt(1 - tau^2)``, ``tau`` = the noise scale), the per-object law becomes

    1 - F_{d,tau,r}(s) = E_M[ 1 - F_d((s - tau M / sqrt(d)) / rho) ],   M = max of r standard normals,

computed by quadrature over ``M``, mixed over the number of views ``r`` of an object: zero-truncated Poisson
with mean ``N_views / n_hat`` (solved by fixed-point iteration) or a fixed ``r``.

Both inputs of the correction come from the sketch state itself, and neither changes when items repeat:

- ``N_views``, the number of *distinct* observations, is a HyperLogLog over a 64-bit hash of each unit vector's
  float32 bytes (``2**12`` one-byte registers, merged by elementwise maximum);
- ``tau`` comes from the digest's "reservoir of near-duplicate pairs": for each of the first ``reservoir``
  directions the sketch keeps its ``4`` largest-projecting distinct observations (exact top-4, merged by taking
  the top-4 of the union), each stored as ``1024`` sign bits on random hyperplanes, which give the angle
  between two of them. The top observations of a direction are mostly views of the few objects that project
  highest on it, so the lists hold pairs of views of one object. A pair is a near-duplicate when it is much
  closer than two *different* objects with the same projections could be (``||x - x'||^2 ~ 2 - 2 s_a s_b``
  for near-orthogonal objects, spread ``2 / sqrt(d)``) and closer than ``pair_radius``;
  ``tau^2 = mean ||x - x'||^2 / 2`` over those pairs.

So ``noise_scale="auto"`` (the default) counts objects, not views, on a stream of noisy views, and a sketch of
the same stream fed twice, or a merge of overlapping sketches, is bit-for-bit the sketch of their union. Limits
(measured in the experiment): the correction assumes isotropic Gaussian view noise and Poisson-like view
counts; heavy-tailed (Zipf) view counts and noise confined to a low-dimensional subspace are reported there.

Calibration [R] (the paper's "generalises beyond the training regime"): :class:`LogLinearCalibration` fits a
monotone map ``log n = a + b log n_hat`` on streams with small, known ``n`` and is applied to larger streams.

Memory: ``4 m`` bytes of maxima + ``4096`` bytes of view-count registers + ``reservoir * 4 * 140`` bytes of
near-duplicate reservoir (:attr:`MaxSketch.memory_bytes`: 26,112 bytes at m = 1024). Time: ``O(m d)`` per item, one float32 matrix
product per batch plus a few passes over it; the directions are cached, so single-vector updates do not
regenerate them. Query ``O(m)``.
"""

from __future__ import annotations

import struct
import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import special

__all__ = [
    "LogLinearCalibration",
    "MaxSketch",
    "estimate_noise_scale",
    "estimate_from_maxima",
    "sphere_coordinate_logsf",
]

_CHUNK = 256  # directions generated per chunk; part of the sketch's identity (first m' directions are shared)
_MAGIC = b"MXSK"
_VERSION = 3
# magic, version, dim, n_projections, seed, reservoir, depth, coords, hll precision, noise_scale, pair_radius,
# has_center (version 3; the centre's dim float64 values follow the state)
_HEADER = struct.Struct("<4sBQQQHHHBddB")
_HEADER_V2 = struct.Struct("<4sBQQQHHHBdd")  # read for sketches written before centring existed
_NOISE_GRID = np.linspace(-7.0, 7.0, 57)  # quadrature nodes for the noise maximum M (error < 1e-8)
_HLL_P = 12  # view-count HyperLogLog: 2**12 one-byte registers (relative error ~ 1.04 / 64)
_DEPTH = 4  # top observations kept per reservoir direction
_SIGN_BITS = 1024  # sign bits (random hyperplanes) stored per reservoir observation: its angle to the others
_MIN_PAIRS = 3  # fewer near-duplicate pairs than this: the stream is taken as noise-free
# Common-mean warning: mean cosine between the top observations of K different reservoir directions above
# _COMMON_MEAN_COS + 6 null standard deviations (near-orthogonal objects: 0, with variance 2 / (K (K - 1)) times
# 1 / d plus the sign-bit angle noise pi^2 / (4 * 1024)). Measured: a common mean at cosine 0.3 with the objects
# (mean top cosine 0.06) already halves the estimate at d = 128, n = 3000.
_COMMON_MEAN_COS = 0.02
_TILE_ELEMENTS = 2**22  # projections computed at once (a 16 MB float32 block): rows per tile = this / m
_U64 = np.uint64


def _check_int(value: object, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {value}")
    return value


def _check_noise_scale(noise_scale: object, allow_auto: bool = True) -> float | str:
    if isinstance(noise_scale, str):
        if allow_auto and noise_scale == "auto":
            return "auto"
        raise ValueError(f"noise_scale must be 'auto' or a number in [0, 1), got {noise_scale!r}")
    if isinstance(noise_scale, bool):
        raise TypeError("noise_scale must be 'auto' or a real number, got bool")
    try:
        tau = float(noise_scale)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(
            f"noise_scale must be 'auto' or a real number, got {type(noise_scale).__name__}"
        ) from None
    if not (0.0 <= tau < 1.0):
        raise ValueError(f"noise_scale must be in [0, 1) (or 'auto'), got {noise_scale!r}")
    return tau


# --- the null law ---------------------------------------------------------------------------------------------
def sphere_coordinate_logsf(s: np.ndarray | float, dim: int) -> np.ndarray:
    """``log P(<g, u> > s)`` for ``u`` uniform on the unit sphere of ``R^dim`` and a fixed unit ``g``.

    ``P(<g, u> > s) = I_{(1-s)/2}((d-1)/2, (d-1)/2)``; evaluated without cancellation for ``s`` near 1.
    ``s`` must lie in [-1, 1] (values within 1e-6 outside, from rounding, are clipped).
    """
    dim = _check_int(dim, "dim", 2)
    s = np.asarray(s, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("s must be finite")
    if np.any(np.abs(s) > 1.0 + 1e-6):
        raise ValueError(
            f"s must lie in [-1, 1] (a projection of unit vectors), got max |s| = {np.abs(s).max()}"
        )
    s = np.clip(s, -1.0, 1.0)
    a = 0.5 * (dim - 1)
    with np.errstate(divide="ignore"):
        return np.log(special.betainc(a, a, 0.5 * (1.0 - s)))


@lru_cache(maxsize=16)
def _logsf_grid(dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``log P(<g, u> > s)`` on a fine grid of ``s`` (linear interpolation error < 1e-6 for |s| <= 0.9)."""
    s = np.linspace(-0.9, 0.9, 2**15 + 1)
    a = 0.5 * (dim - 1)
    return s, np.log(special.betainc(a, a, 0.5 * (1.0 - s)))


def _logsf_fast(s: np.ndarray, dim: int) -> np.ndarray:
    """:func:`sphere_coordinate_logsf` by interpolation where it is accurate, exactly elsewhere."""
    grid, values = _logsf_grid(dim)
    s = np.clip(s, -1.0, 1.0)
    out = np.interp(s, grid, values)
    far = np.abs(s) > 0.9
    if far.any():
        a = 0.5 * (dim - 1)
        with np.errstate(divide="ignore"):
            out[far] = np.log(special.betainc(a, a, 0.5 * (1.0 - s[far])))
    return out


# --- the noise correction -------------------------------------------------------------------------------------
def _ztp_lambda(mean: np.ndarray) -> np.ndarray:
    """Zero-truncated Poisson rate with the given means (> 1): solves lam / (1 - exp(-lam)) = mean (Newton)."""
    lam = np.maximum(mean - np.exp(-mean), 1e-6)
    for _ in range(60):
        e = np.exp(-lam)
        g = lam / -np.expm1(-lam) - mean
        dg = (1.0 - e - lam * e) / np.expm1(-lam) ** 2
        step = g / dg
        lam = np.maximum(lam - step, 1e-9)
        if np.all(np.abs(step) < 1e-12 * np.maximum(lam, 1.0)):
            break
    return lam


def _views_pmf(mean_views: np.ndarray, views_model: str = "poisson") -> tuple[np.ndarray, np.ndarray]:
    """Support ``k`` (K,) and zero-truncated Poisson probabilities (G, K) of an object's number of views."""
    mean_views = np.maximum(mean_views, 1.0)
    top = float(mean_views.max())
    k = np.arange(1, int(top + 12 * np.sqrt(top) + 12), dtype=np.float64)
    pmf = np.zeros((mean_views.size, k.size))
    poisson = mean_views > 1.0 + 1e-9
    pmf[~poisson, 0] = 1.0
    if poisson.any():
        lam = _ztp_lambda(mean_views[poisson])[:, None]
        log_pmf = k[None, :] * np.log(lam) - lam - special.gammaln(k + 1)[None, :] - np.log(-np.expm1(-lam))
        pmf[poisson] = np.exp(log_pmf)
    return k, pmf


def _max_density(k: np.ndarray) -> np.ndarray:
    """Density ``k phi(u) Phi(u)^(k-1)`` of the maximum of ``k`` standard normals on the quadrature nodes, one
    row per ``k`` (a real ``k >= 1`` gives the law with CDF ``Phi^k``: "fixed" views)."""
    u = _NOISE_GRID
    k = np.asarray(k, dtype=np.float64)
    log_d = (
        np.log(k)[..., None]
        - 0.5 * u**2
        - 0.5 * np.log(2 * np.pi)
        + (k[..., None] - 1.0) * special.log_ndtr(u)
    )
    return np.exp(log_d)


def _rate(exp_values: np.ndarray, method: str, n_groups: int) -> np.ndarray:
    """Rate estimates of rows of i.i.d. Exponential(n) values: ``(k - 1) / sum`` (or its median over groups)."""
    if method == "mle":
        return (exp_values.shape[1] - 1) / exp_values.sum(axis=1)
    groups = np.array_split(exp_values, n_groups, axis=1)
    return np.median(np.stack([(g.shape[1] - 1) / g.sum(axis=1) for g in groups]), axis=0)


def _exp_values(tail: np.ndarray) -> np.ndarray:
    return np.maximum(-np.log1p(-np.minimum(tail, 1.0 - 1e-16)), 1e-300)


def estimate_from_maxima(
    maxima: np.ndarray,
    dim: int,
    *,
    noise_scale: float = 0.0,
    n_views: float | np.ndarray | None = None,
    views_model: str = "poisson",
    method: str = "mle",
    n_groups: int = 8,
    max_iter: int = 60,
    tol: float = 1e-7,
) -> float | np.ndarray:
    """Distinct-object estimate from the projection maxima ``S_j`` (module docstring, estimator).

    Parameters
    ----------
    maxima : array of shape (m,), ``S_j = max_t <g_j, x_t>`` for unit directions ``g_j``; or shape (G, m):
        G independent sketches of the same size, estimated at once (returns an array of G estimates).
    dim : ambient dimension ``d >= 2``.
    noise_scale : ``tau`` in [0, 1); 0 is the pure model (every view lies on its object's centre).
    n_views : number of distinct observations in the stream (per sketch when ``maxima`` is 2-D), needed when
        ``noise_scale > 0``: the mean number of views of an object is ``n_views / n_hat``.
    views_model : law of the number of views of one object given its mean ``r``: ``"poisson"``
        (zero-truncated Poisson, i.e. Poisson sightings of objects seen at least once) or ``"fixed"``
        (every object seen ``r`` times; biased low when the counts vary, by Jensen's inequality).
    method : ``"mle"`` (``(m - 1) / sum E_j``) or ``"median_of_means"`` (median over ``n_groups`` groups).
    """
    arr = np.asarray(maxima, dtype=np.float64)
    single = arr.ndim == 1
    if arr.ndim not in (1, 2) or arr.shape[-1] < 2 or arr.size == 0:
        raise ValueError(f"maxima must have shape (m,) or (G, m) with m >= 2, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("maxima must be finite (an empty sketch has no estimate)")
    if np.any(np.abs(arr) > 1.0 + 1e-6):
        raise ValueError("maxima must lie in [-1, 1] (maxima of projections of unit vectors)")
    arr = np.atleast_2d(arr)
    dim = _check_int(dim, "dim", 2)
    tau = _check_noise_scale(noise_scale, allow_auto=False)
    if method not in ("mle", "median_of_means"):
        raise ValueError(f"method must be 'mle' or 'median_of_means', got {method!r}")
    if method == "median_of_means":
        n_groups = _check_int(n_groups, "n_groups", 1, arr.shape[1] // 2)
    if views_model not in ("poisson", "fixed"):
        raise ValueError(f"views_model must be 'poisson' or 'fixed', got {views_model!r}")
    if tau == 0.0:
        out = _rate(_exp_values(np.exp(sphere_coordinate_logsf(arr, dim))), method, n_groups)
        return float(out[0]) if single else out
    if n_views is None:
        raise ValueError("n_views is required when noise_scale > 0")
    views = np.broadcast_to(np.asarray(n_views, dtype=np.float64), (arr.shape[0],)).copy()
    if not np.all(np.isfinite(views)) or np.any(views < 1):
        raise ValueError(f"n_views must be finite and >= 1, got {n_views!r}")
    out = np.empty(arr.shape[0])
    for lo in range(0, arr.shape[0], 8):  # bounded memory: (8, m, nodes) tables at a time
        out[lo : lo + 8] = _corrected(
            arr[lo : lo + 8], dim, tau, views[lo : lo + 8], views_model, method, n_groups, max_iter, tol
        )
    return float(out[0]) if single else out


def _corrected(maxima, dim, tau, n_views, views_model, method, n_groups, max_iter, tol) -> np.ndarray:
    """Noise-corrected estimates of G sketches (rows of ``maxima``), by fixed-point iteration on the mean views."""
    rho = np.sqrt(1.0 - tau**2)
    du = _NOISE_GRID[1] - _NOISE_GRID[0]
    shifted = (maxima[:, :, None] - tau * _NOISE_GRID[None, None, :] / np.sqrt(dim)) / rho
    table = np.exp(_logsf_fast(shifted.ravel(), dim)).reshape(shifted.shape)  # (G, m, nodes)

    def n_hat_given(mean_views: np.ndarray) -> np.ndarray:
        if views_model == "fixed":
            f = _max_density(np.maximum(mean_views, 1.0))  # (G, nodes)
        else:
            k, pmf = _views_pmf(mean_views, views_model)
            f = pmf @ _max_density(k)  # (G, K) @ (K, nodes)
        tail = np.einsum("gju,gu->gj", table, f) * du
        return _rate(_exp_values(tail), method, n_groups)

    n_hat = n_hat_given(np.ones(maxima.shape[0]))  # upper bound: the least correction
    for _ in range(max_iter):
        new = n_hat_given(np.maximum(1.0, n_views / n_hat))
        done = np.abs(np.log(new / n_hat)) < tol
        n_hat = new
        if done.all():
            break
    return n_hat


def estimate_noise_scale(views_a: np.ndarray, views_b: np.ndarray) -> float:
    """Noise scale ``tau`` from paired views of the same objects: ``tau^2 = mean ||x - x'||^2 / 2``.

    Rows of ``views_a`` and ``views_b`` are two views of the same object (unit-normalised here). For a unit
    direction ``g`` uniform on the sphere, ``E <g, x - x'>^2 = ||x - x'||^2 / d``, so ``tau / sqrt(d)`` is the
    standard deviation of the per-view projection noise used by the noise correction. A sketch estimates the
    same quantity from its own stream (:attr:`MaxSketch.noise_scale_`); this function is for labelled pairs.
    """
    a = _as_batch(views_a, None, "views_a").astype(np.float64)
    b = _as_batch(views_b, a.shape[1], "views_b").astype(np.float64)
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"views_a and views_b must have the same number of rows, got {a.shape[0]}, {b.shape[0]}"
        )
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    tau2 = 0.5 * float(np.mean(np.sum((a - b) ** 2, axis=1)))
    return float(min(np.sqrt(tau2), 0.99))


# --- hashing ----------------------------------------------------------------------------------------------------
def _splitmix64(z: np.ndarray) -> np.ndarray:
    z = z.astype(_U64, copy=True)
    z ^= z >> _U64(30)
    z *= _U64(0xBF58476D1CE4E5B9)
    z ^= z >> _U64(27)
    z *= _U64(0x94D049BB133111EB)
    z ^= z >> _U64(31)
    return z


def _row_hashes(unit: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """64-bit hash of each row's float32 bytes: a multilinear hash mod 2**64, then the splitmix64 finaliser."""
    rows = np.ascontiguousarray(unit, dtype=np.float32)
    if rows.shape[1] % 2:
        rows = np.hstack([rows, np.zeros((rows.shape[0], 1), np.float32)])
    words = rows.view(_U64)
    return _splitmix64(words.dot(multipliers))


def _hll_rank(hashes: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """HyperLogLog register index (top ``p`` bits) and rank (1 + leading zeros of the other ``64 - p`` bits)."""
    idx = (hashes >> _U64(64 - p)).astype(np.intp)
    rest = hashes & _U64((1 << (64 - p)) - 1)
    e = (
        np.frexp(rest.astype(np.float64))[1].astype(np.int64) - 1
    )  # floor(log2(rest)), fixed below if rounded up
    pos = rest > 0
    over = np.zeros_like(pos)
    over[pos] = (_U64(1) << e[pos].astype(_U64)) > rest[pos]
    e = e - over
    rank = np.where(pos, (64 - p) - e, 64 - p + 1)
    return idx, rank.astype(np.uint8)


def hll_count(registers: np.ndarray, hash_bits: int = 64) -> float:
    """HyperLogLog cardinality from its registers: Ertl's improved estimator (O. Ertl, "New cardinality
    estimation algorithms for HyperLogLog sketches", arXiv 1702.01284, Alg. 6), unbiased over the whole range
    without the empirical bias tables of HLL++ (the classic estimator is biased by a few percent near 2.5 m)."""
    registers = np.asarray(registers)
    m = registers.size
    p = int(np.log2(m))
    q = hash_bits - p
    counts = np.bincount(registers.astype(np.intp), minlength=q + 2).astype(np.float64)
    z = m * _ertl_tau(1.0 - counts[q + 1] / m)
    for k in range(q, 0, -1):
        z = 0.5 * (z + counts[k])
    z += m * _ertl_sigma(counts[0] / m)
    return float(m * m / (2.0 * np.log(2.0)) / z)


def _ertl_sigma(x: float) -> float:
    if x == 1.0:
        return np.inf
    y, z = 1.0, x
    while True:
        x *= x
        z_old = z
        z += x * y
        y += y
        if z == z_old:
            return z


def _ertl_tau(x: float) -> float:
    if x in (0.0, 1.0):
        return 0.0
    y, z = 1.0, 1.0 - x
    while True:
        x = np.sqrt(x)
        z_old = z
        y *= 0.5
        z -= (1.0 - x) ** 2 * y
        if z == z_old:
            return z / 3.0


# --- input ------------------------------------------------------------------------------------------------------
def _check_center(center: object, dim: int) -> np.ndarray | None:
    if center is None:
        return None
    arr = np.asarray(center)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"center must be a real numeric vector or None, got dtype {arr.dtype}")
    if arr.shape != (dim,):
        raise ValueError(f"center must have shape (dim,) = ({dim},), got {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("center must be finite (no NaN or inf)")
    arr.setflags(write=False)
    return arr


def _same_center(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))


def _as_batch(x: np.ndarray, dim: int | None, name: str = "x", check_values: bool = True) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a vector or a 2-D batch (n_items, dim), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch; pass at least one vector")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name} must have dim = {dim} columns, got {arr.shape[1]}")
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64, copy=False)
    if check_values:
        _check_values(arr, name)
    return arr


def _check_values(arr: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(~np.any(arr != 0, axis=1)):
        raise ValueError(f"{name} contains an all-zero vector, which has no direction")


def _unit_rows(arr: np.ndarray, name: str = "x") -> np.ndarray:
    """Rows scaled to unit norm, in ``arr``'s precision (for :meth:`MaxSketch.project`); raises on NaN/inf or
    all-zero rows (checked through the norms: one pass)."""
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    if not (np.all(np.isfinite(norms)) and np.all(norms > 0)):
        _check_values(arr, name)  # the precise error; otherwise squares overflowed: rescale first
        arr = arr / np.abs(arr).max(axis=1, keepdims=True)
        norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    return arr / norms[:, None]


_WORK = threading.local()  # per-thread scratch buffers for update (the unit rows of a tile, its projections)


def _scratch(name: str, shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
    """A per-thread C-contiguous buffer of ``shape``, reused across updates (a flat block viewed as needed): fresh
    pages for every tile would cost as much as the normalisation itself."""
    bufs = getattr(_WORK, "bufs", None)
    if bufs is None:
        bufs = _WORK.bufs = {}
    size = shape[0] * shape[1]
    buf = bufs.get(name)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = bufs[name] = np.empty(size, dtype)
    return buf[:size].reshape(shape)


def _exact_dots(rows64: np.ndarray, dirs64: np.ndarray) -> np.ndarray:
    """Fixed-order float64 dot products of paired rows (n, d) and directions (n, d): the same value whatever
    batch a row arrived in (BLAS may round a row's products differently depending on its batch)."""
    return np.einsum("ij,ij->i", rows64, dirs64, optimize=False)


@lru_cache(maxsize=1)
def _threadpool_controller():
    from threadpoolctl import ThreadpoolController  # scikit-learn's dependency, imported on first use

    return ThreadpoolController()


def _blas_threads(n: int):
    return _threadpool_controller().limit(limits=n, user_api="blas")


def _exact_signs(rows64: np.ndarray, normals64: np.ndarray) -> np.ndarray:
    """``<normal_k, row_i> > 0`` as the fixed-order products give it, whatever the batch: BLAS for the block, and
    the few products within BLAS's rounding of zero re-evaluated in a fixed order."""
    # one thread: this is a thin product (the rows entering the reservoir), which a threaded BLAS serves up to
    # 30x slower on a loaded machine (threads wait for cores) than one thread does
    with _blas_threads(1):
        proj = rows64 @ normals64.T
    scale = np.sqrt(np.einsum("ij,ij->i", normals64, normals64))  # rows are unit: |error| <= d eps ||n_k||
    unsure = np.abs(proj) <= 4.0 * rows64.shape[1] * np.finfo(np.float64).eps * scale[None, :]
    if unsure.any():
        i, k = np.nonzero(unsure)
        proj[i, k] = _exact_dots(rows64[i], normals64[k])
    return proj > 0


class MaxSketch:
    """Mergeable, duplicate-insensitive sketch that counts distinct latent objects in a stream of embeddings.

    Parameters
    ----------
    dim : dimension of the stream's vectors (>= 2).
    n_projections : number ``m`` of random directions (= float32 maxima kept), >= 2.
    seed : seed of the directions (0 <= seed < 2**63); sketches merge only with the same configuration.
    noise_scale : ``"auto"`` (default: the view-noise scale ``tau`` estimated from the sketch's own reservoir
        of near-duplicate pairs), or a fixed ``tau`` in [0, 1) (0 = pure model: every view on its centre).
    reservoir : number of directions whose top observations form the near-duplicate reservoir (default
        ``min(32, n_projections)``; 0 disables it, and then ``"auto"`` means ``tau = 0``).
    pair_radius : two reservoir observations closer than this (unit vectors, Euclidean) are views of one object.
        The default 1.0 (cosine > 0.5) assumes near-orthogonal objects, as the estimator does; in low dimension
        (d < 64) distinct objects that project high on the same direction can come closer, so lower it there.
    center : optional vector of shape (dim,) subtracted from every vector before it is normalised (default None:
        no centring). Learned embeddings share a common mean direction, which breaks the near-orthogonality the
        estimator assumes and drives the estimate towards 1; pass the mean of held-out embeddings from the same
        encoder (never of the stream being counted). The centre is fixed for the sketch's life, and this is
        deliberate: a mean fitted from the stream as it goes (a running mean) would centre early items with a
        different vector than late ones, so the state would depend on the order of the stream and two sketches
        could no longer merge; and a maximum of ``<g, (x - mu) / ||x - mu||>`` cannot be re-centred after the
        fact, since the normalisation does not commute with the subtraction. Part of the configuration: sketches
        merge only with an equal centre (:meth:`merge`, ``==``, serialised with the state).

    Common-direction warning. :meth:`estimate` raises a ``UserWarning`` when the stream's vectors share a
    dominant common direction. Criterion: the mean cosine between the top observations of the ``K`` reservoir
    directions (:attr:`common_direction_cosine_`; one distinct observation per direction) exceeds
    ``0.02 + 6 sd``, where ``sd = sqrt(2 / (K (K - 1)) * (1 / d + pi^2 / 4096))`` is its spread for near-orthogonal
    objects (the ``1 / d`` of random unit vectors plus the sign-bit angle estimate's noise). Near-orthogonal
    objects give about 0; objects sharing a mean ``mu`` give about ``cos^2(x, mu)`` (0.3 at a common-mean cosine
    of 0.55). The remedy is ``center=`` above. A stream of only a few dozen distinct objects can also trip it
    (several directions then hold views of the same object).

    Vectors are normalised to unit length before projection (only directions matter): any input is rounded to
    float32 once (after centring, which is done in float64) and normalised and projected in float32, so a float64
    stream and its float32 copy give the same sketch (the maxima are kept as float32); each kept maximum is
    re-evaluated exactly, so it does not depend on how the stream was batched.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> centres = rng.standard_normal((500, 64))
    >>> views = centres[rng.integers(0, 500, 2500)] + 0.1 * rng.standard_normal((2500, 64)) / 8
    >>> sk = MaxSketch(64, n_projections=512, seed=1).update(views)
    >>> 400 < sk.estimate() < 600          # counts objects, not the ~2000 distinct views
    True
    """

    def __init__(
        self,
        dim: int,
        n_projections: int = 1024,
        seed: int = 0,
        *,
        noise_scale: float | str = "auto",
        reservoir: int | None = None,
        pair_radius: float = 1.0,
        center: np.ndarray | None = None,
    ):
        self.dim = _check_int(dim, "dim", 2)
        self.n_projections = _check_int(n_projections, "n_projections", 2)
        self.seed = _check_int(seed, "seed", 0, 2**63 - 1)
        self.noise_scale = _check_noise_scale(noise_scale)
        if reservoir is None:
            reservoir = min(32, self.n_projections)
        self.reservoir = _check_int(reservoir, "reservoir", 0, min(self.n_projections, 65535))
        try:
            radius = float(pair_radius)
        except (TypeError, ValueError):
            raise TypeError(f"pair_radius must be a real number, got {type(pair_radius).__name__}") from None
        if not (0.0 < radius <= 2.0):
            raise ValueError(f"pair_radius must be in (0, 2], got {pair_radius!r}")
        self.pair_radius = radius
        self.center = _check_center(center, self.dim)
        self.maxima_ = np.full(self.n_projections, -np.inf, dtype=np.float32)
        self.view_registers_ = np.zeros(2**_HLL_P, dtype=np.uint8)
        self.top_values_ = np.full((self.reservoir, _DEPTH), -np.inf, dtype=np.float32)
        self.top_hashes_ = np.zeros((self.reservoir, _DEPTH), dtype=_U64)
        self.top_signs_ = np.zeros((self.reservoir, _DEPTH, _SIGN_BITS // 8), dtype=np.uint8)
        self._cache: dict = {}

    # --- projections ------------------------------------------------------------------------------------
    def _directions(self, chunk: int, dtype: np.dtype) -> np.ndarray:
        """Unit directions ``chunk * 256 ...`` as a (dim, <=256) block, derived from the seed."""
        width = min(_CHUNK, self.n_projections - chunk * _CHUNK)
        rng = np.random.default_rng([self.seed, chunk])
        h = rng.standard_normal((self.dim, _CHUNK), dtype=np.float32)[:, :width].astype(np.float64)
        h /= np.linalg.norm(h, axis=0, keepdims=True)
        return h.astype(dtype, copy=False)

    def _all_directions(self, dtype: np.dtype) -> np.ndarray:
        """All ``m`` directions as a (dim, m) matrix, generated once and cached (float64 and float32)."""
        key = np.dtype(dtype).str
        if key not in self._cache:
            if "<f8" not in self._cache:
                n_chunks = -(-self.n_projections // _CHUNK)
                self._cache["<f8"] = np.hstack([self._directions(c, np.float64) for c in range(n_chunks)])
                self._cache["T8"] = np.ascontiguousarray(self._cache["<f8"].T)
            if key != "<f8":
                self._cache[key] = self._cache["<f8"].astype(dtype)
        return self._cache[key]

    def _hash_multipliers(self) -> np.ndarray:
        if "mult" not in self._cache:
            rng = np.random.default_rng([self.seed, 2**32 + 1])
            words = (self.dim + 1) // 2
            self._cache["mult"] = rng.integers(0, 2**63, words, dtype=np.int64).astype(_U64) * _U64(2) + _U64(
                1
            )
        return self._cache["mult"]

    def _sign_directions(self) -> np.ndarray:
        """(SIGN_BITS, dim) hyperplane normals whose signs store a reservoir observation (independent of g_j)."""
        if "signs" not in self._cache:
            rng = np.random.default_rng([self.seed, 2**32 + 2])
            self._cache["signs"] = rng.standard_normal((_SIGN_BITS, self.dim))
        return self._cache["signs"]

    def project(self, x: np.ndarray) -> np.ndarray:
        """Projections ``<g_j, x_t / ||x_t||>`` of a batch, shape (n_items, m) (for inspection and tests)."""
        unit = _unit_rows(_as_batch(x, self.dim, check_values=False))
        return unit @ self._all_directions(unit.dtype)

    # --- streaming API -------------------------------------------------------------------------------------
    def update(self, x: np.ndarray) -> MaxSketch:
        """Add one vector (shape (dim,)) or a batch (shape (n_items, dim)); returns ``self``.

        Raises ``ValueError`` (and leaves the sketch unchanged) on a wrong dimension, NaN/inf, an all-zero
        vector (or, with ``center``, a vector equal to the centre) or an empty batch.
        """
        batch = _as_batch(x, self.dim, check_values=False)
        dirs = self._all_directions(np.float32)
        dirs_t64 = self._cache["T8"]
        mult = self._hash_multipliers()
        eps = np.finfo(np.float32).eps
        # |BLAS - exact| <= (d + sqrt(d) + 1) eps for unit vectors (accumulation + rounded directions); x2 margin
        tol = 2.0 * (self.dim + np.sqrt(self.dim) + 1.0) * eps
        maxima = self.maxima_.astype(np.float64)
        registers = self.view_registers_.copy()
        top = (self.top_values_.copy(), self.top_hashes_.copy(), self.top_signs_.copy())
        n_res = self.reservoir
        # one tile at a time: cast + normalise into a scratch buffer, one float32 GEMM into another, then only
        # the few entries near a column maximum are looked at again (the scratch stays O(tile), whatever the batch)
        tile = int(np.clip(_TILE_ELEMENTS // self.n_projections, 64, 4096))
        for lo in range(0, batch.shape[0], tile):
            rows = self._unit_tile(batch[lo : lo + tile])
            # projections laid out direction by direction, (m, rows): a column's values are contiguous
            block = _scratch("block", (self.n_projections, rows.shape[0]), np.float32)
            np.matmul(dirs.T, rows.T, out=block)
            col_max = block.max(axis=1)
            self._update_maxima(maxima, block, col_max, rows, dirs_t64, tol)
            hashes = _row_hashes(rows, mult)
            idx, rank = _hll_rank(hashes, _HLL_P)
            np.maximum.at(registers, idx, rank)
            if n_res:
                self._update_reservoir(top, block[:n_res], col_max[:n_res], rows, hashes, dirs_t64, tol)
        # commit (everything above only read the state)
        self.maxima_ = maxima.astype(np.float32)
        self.view_registers_ = registers
        self.top_values_, self.top_hashes_, self.top_signs_ = top
        return self

    def _unit_tile(self, chunk: np.ndarray) -> np.ndarray:
        """Rows of ``chunk`` (centred first, with ``center``) as float32 unit vectors, in a per-thread scratch
        buffer. Any input is rounded to float32 once and normalised in float32, so a float64 stream and its float32
        copy give the same sketch; values outside float32's range are rescaled (in their own precision) first."""
        if self.center is not None:
            _check_values(chunk, "x")  # a NaN must not hide behind the subtraction
            chunk = chunk.astype(np.float64) - self.center  # in float64: the mean can dwarf the residual
            if np.any(~np.any(chunk != 0, axis=1)):
                raise ValueError("x contains a vector equal to center, which has no direction after centring")
        out = _scratch("unit", chunk.shape, np.float32)
        src = chunk if chunk.dtype == np.float32 else out
        if src is out:
            with np.errstate(over="ignore", under="ignore"):  # out of float32's range: rescaled below
                np.copyto(out, chunk, casting="unsafe")  # the one cast
        norms = np.sqrt(np.einsum("ij,ij->i", src, src))
        if not (np.all(np.isfinite(norms)) and np.all(norms > 0)):
            # the precise error; otherwise float32 over- or underflowed: rescale first
            _check_values(chunk, "x")
            np.copyto(out, chunk / np.abs(chunk).max(axis=1, keepdims=True), casting="unsafe")
            src = out
            norms = np.sqrt(np.einsum("ij,ij->i", src, src))
        return np.divide(src, norms[:, None], out=out)

    @staticmethod
    def _update_maxima(maxima, block, col_max, rows, dirs_t64, tol) -> None:
        """Exact maxima, in place. ``block`` is (m, rows): re-evaluate, in a fixed order, the entries that may be a
        direction's new maximum: within ``tol`` of the tile's maximum for it and above the kept maximum.
        Directions whose tile maximum does not come near the kept one cost nothing beyond the max-reduction."""
        thr = np.maximum(maxima - 2 * tol, col_max.astype(np.float64) - tol)
        cols = np.flatnonzero(col_max >= thr)
        if cols.size == 0:
            return
        hits = np.flatnonzero(block[cols] >= thr[cols, None].astype(np.float32))
        k, r = np.divmod(hits, block.shape[1])
        c = cols[k]
        np.maximum.at(maxima, c, _exact_dots(rows[r].astype(np.float64), dirs_t64[c]))

    def _update_reservoir(self, top, block, col_max, rows, hashes, dirs_t64, tol) -> None:
        """Exact top-DEPTH distinct observations per reservoir direction (ties broken by hash); ``block`` is the
        (reservoir, rows) projections of the tile on the reservoir's directions."""
        values, hsh, signs = top
        # a row can enter a list only if it beats the list's current last value (exact values, so allow tol)
        bar = values[:, -1].astype(np.float64) - tol
        if not np.any(col_max >= bar):  # the usual case once the lists are full: nothing in this tile enters
            return
        first = np.unique(hashes, return_index=True)[1]  # distinct observations of the tile
        if first.size < rows.shape[0]:
            first.sort()
            block, rows, hashes = block[:, first], rows[first], hashes[first]
        n_rows = block.shape[1]
        mask = block >= bar[:, None].astype(np.float32)
        if np.count_nonzero(mask) > 4 * _DEPTH * block.shape[0]:  # lists not yet full: tighten by the kth
            depth = min(_DEPTH, n_rows)
            kth = np.partition(block, n_rows - depth, axis=1)[:, n_rows - depth]
            mask &= block >= (np.maximum(kth.astype(np.float64), bar + tol) - tol)[:, None].astype(np.float32)
        c, r = np.divmod(np.flatnonzero(mask), n_rows)
        if r.size == 0:
            return
        exact = _exact_dots(rows[r].astype(np.float64), dirs_t64[c]).astype(np.float32)
        # every touched list at once (as _top_distinct_order per list): the lists' entries and the candidates,
        # one entry per (list, observation) with its largest value, then each list's DEPTH largest by (value, hash)
        lists = np.unique(c)
        slot = np.tile(np.arange(_DEPTH), lists.size)
        lst = np.concatenate([np.repeat(lists, _DEPTH), c])
        val = np.concatenate([values[lists].ravel(), exact])
        hsh_all = np.concatenate([hsh[lists].ravel(), hashes[r]])
        # src < 0: slot -1 - src of the list's own entries; src >= 0: a row of the tile
        src = np.concatenate([-1 - slot, r])
        fin = np.isfinite(val)
        lst, val, hsh_all, src = lst[fin], val[fin], hsh_all[fin], src[fin]
        neg = -val.astype(np.float64)
        # stable: an entry already in the list wins a tie with its copy from the tile
        order = np.lexsort((neg, hsh_all, lst))
        fresh = np.ones(order.size, bool)
        fresh[1:] = (lst[order][1:] != lst[order][:-1]) | (hsh_all[order][1:] != hsh_all[order][:-1])
        keep = order[fresh]
        keep = keep[np.lexsort((hsh_all[keep], neg[keep], lst[keep]))]
        lst, val, hsh_all, src = lst[keep], val[keep], hsh_all[keep], src[keep]
        rank = np.arange(lst.size) - np.searchsorted(lst, lst)
        top_k = rank < _DEPTH
        lst, val, hsh_all, src, rank = lst[top_k], val[top_k], hsh_all[top_k], src[top_k], rank[top_k]
        # sign bits only for the rows that enter
        entering = np.unique(src[src >= 0])
        new_signs = np.packbits(
            _exact_signs(rows[entering].astype(np.float64), self._sign_directions()), axis=1
        )
        out_v = np.full((lists.size, _DEPTH), -np.inf, dtype=np.float32)
        out_h = np.zeros((lists.size, _DEPTH), dtype=_U64)
        out_s = np.zeros((lists.size, _DEPTH, signs.shape[-1]), dtype=np.uint8)
        at = np.searchsorted(lists, lst)
        out_v[at, rank], out_h[at, rank] = val, hsh_all
        old = src < 0
        out_s[at[old], rank[old]] = signs[lst[old], -1 - src[old]]
        out_s[at[~old], rank[~old]] = new_signs[np.searchsorted(entering, src[~old])]
        values[lists], hsh[lists], signs[lists] = out_v, out_h, out_s

    def _check_compatible(self, other: object) -> None:
        if not isinstance(other, MaxSketch):
            raise TypeError(f"other must be a MaxSketch, got {type(other).__name__}")
        for attr in ("dim", "n_projections", "seed", "reservoir", "noise_scale", "pair_radius"):
            if getattr(self, attr) != getattr(other, attr):
                raise ValueError(
                    f"cannot merge sketches with different {attr}: {getattr(self, attr)} != {getattr(other, attr)}"
                )
        if not _same_center(self.center, other.center):
            raise ValueError(
                "cannot merge sketches with different center (the vectors were centred differently)"
            )

    def merge(self, other: MaxSketch) -> MaxSketch:
        """Merge ``other`` into this sketch; returns ``self``. The result is the sketch of the union of the two
        streams, whatever their overlap: maxima and view registers by elementwise maximum, reservoir lists by
        the top observations of the union."""
        self._check_compatible(other)
        values, hsh, signs = self.top_values_.copy(), self.top_hashes_.copy(), self.top_signs_.copy()
        for j in range(self.reservoir):
            values[j], hsh[j], signs[j] = _top_distinct(
                np.concatenate([values[j], other.top_values_[j]]),
                np.concatenate([hsh[j], other.top_hashes_[j]]),
                np.concatenate([signs[j], other.top_signs_[j]]),
            )
        self.maxima_ = np.maximum(self.maxima_, other.maxima_)
        self.view_registers_ = np.maximum(self.view_registers_, other.view_registers_)
        self.top_values_, self.top_hashes_, self.top_signs_ = values, hsh, signs
        return self

    @classmethod
    def union(cls, sketches: Sequence[MaxSketch]) -> MaxSketch:
        """A new sketch of the union of the streams of ``sketches`` (all with the same configuration)."""
        sketches = list(sketches)
        if not sketches:
            raise ValueError("sketches must hold at least one MaxSketch")
        out = sketches[0].copy() if isinstance(sketches[0], MaxSketch) else None
        if out is None:
            raise TypeError(f"sketches must hold MaxSketch objects, got {type(sketches[0]).__name__}")
        for other in sketches[1:]:
            out.merge(other)
        return out

    def copy(self) -> MaxSketch:
        out = self._like()
        out.maxima_ = self.maxima_.copy()
        out.view_registers_ = self.view_registers_.copy()
        out.top_values_ = self.top_values_.copy()
        out.top_hashes_ = self.top_hashes_.copy()
        out.top_signs_ = self.top_signs_.copy()
        out._cache = self._cache  # directions depend only on the configuration
        return out

    def _like(self) -> MaxSketch:
        return MaxSketch(
            self.dim,
            self.n_projections,
            self.seed,
            noise_scale=self.noise_scale,
            reservoir=self.reservoir,
            pair_radius=self.pair_radius,
            center=self.center,
        )

    def is_empty(self) -> bool:
        return bool(np.all(np.isneginf(self.maxima_)))

    @property
    def memory_floats(self) -> int:
        """Maxima kept by the sketch (``m``); the directions are derived from the seed, never stored."""
        return self.n_projections

    @property
    def memory_bytes(self) -> int:
        """Bytes of state: float32 maxima, view-count registers and the near-duplicate reservoir."""
        return int(
            self.maxima_.nbytes
            + self.view_registers_.nbytes
            + self.top_values_.nbytes
            + self.top_hashes_.nbytes
            + self.top_signs_.nbytes
        )

    # --- what the state says ----------------------------------------------------------------------------
    @property
    def n_views_(self) -> float:
        """Estimated number of distinct observations (HyperLogLog over the vectors' hashes; 0 when empty)."""
        return 0.0 if self.is_empty() else hll_count(self.view_registers_)  # empty registers: sigma(1) = inf

    def near_duplicate_pairs(self) -> np.ndarray:
        """Squared distances ``||x - x'||^2`` of the distinct reservoir pairs that are near-duplicates: the pairs
        behind :attr:`noise_scale_`.

        A pair's angle is estimated from its 1024 stored sign bits (``theta = pi * hamming / 1024``). Two
        *different* near-orthogonal objects that both project ``s_a, s_b`` on the list's direction have
        ``||x - x'||^2 ~ 2 - 2 s_a s_b`` with a spread of ``2 / sqrt(d)`` (plus the angle estimate's); a pair
        counts as a near-duplicate only when it is 4 such spreads below that and closer than ``pair_radius``.
        """
        seen: set[tuple[int, int]] = set()
        out = []
        d = self.dim
        for j in range(self.reservoir):
            ok = np.isfinite(self.top_values_[j])
            if ok.sum() < 2:
                continue
            h, s = self.top_hashes_[j][ok], self.top_values_[j][ok].astype(np.float64)
            bits = np.unpackbits(self.top_signs_[j][ok], axis=1)
            for a in range(h.size):
                for b in range(a + 1, h.size):
                    key = (int(min(h[a], h[b])), int(max(h[a], h[b])))
                    if key in seen:
                        continue
                    seen.add(key)
                    p = np.count_nonzero(bits[a] != bits[b]) / _SIGN_BITS
                    d2 = 2.0 - 2.0 * np.cos(np.pi * p)
                    mu = 2.0 - 2.0 * s[a] * s[b]
                    theta = np.arccos(np.clip(1.0 - mu / 2.0, -1.0, 1.0))
                    spread = np.hypot(
                        2.0 * np.sqrt((1.0 - s[a] ** 2) * (1.0 - s[b] ** 2) / (d - 1)),
                        2.0
                        * np.sin(theta)
                        * np.pi
                        * np.sqrt((theta / np.pi) * (1 - theta / np.pi) / _SIGN_BITS),
                    )
                    if d2 < min(mu - 4.0 * spread, self.pair_radius**2):
                        out.append(d2)
        return np.sort(np.asarray(out, dtype=np.float64))

    @property
    def common_direction_cosine_(self) -> float:
        """Mean cosine between the top observations of different reservoir directions (NaN with fewer than 2).

        For the near-orthogonal objects the estimator assumes it is 0 (spread ``sqrt(2 / (K (K - 1) d))`` over
        ``K`` directions); embeddings that share a common mean ``mu`` give about ``cos^2(x, mu)`` instead, and
        the estimate collapses towards 1. Angles come from the stored sign bits (``theta = pi * hamming / 1024``).
        """
        ok = np.isfinite(self.top_values_[:, 0])
        _, first = np.unique(self.top_hashes_[ok, 0], return_index=True)  # one per distinct observation
        bits = np.unpackbits(self.top_signs_[ok, 0][first], axis=1).astype(np.int32)
        k = bits.shape[0]
        if k < 2:
            return float("nan")
        hamming = bits @ (1 - bits).T + (1 - bits) @ bits.T
        cos = np.cos(np.pi * hamming[np.triu_indices(k, 1)] / _SIGN_BITS)
        return float(cos.mean())

    def _warn_if_common_direction(self) -> None:
        cos = self.common_direction_cosine_
        k = int(np.unique(self.top_hashes_[np.isfinite(self.top_values_[:, 0]), 0]).size)
        null_sd = (
            np.sqrt(2.0 / (k * (k - 1)) * (1.0 / self.dim + np.pi**2 / (4 * _SIGN_BITS))) if k >= 2 else 0
        )
        if k >= 2 and cos > _COMMON_MEAN_COS + 6.0 * null_sd:
            warnings.warn(
                f"the stream's vectors share a common direction: the top observations of {k} different "
                f"projection directions have mean cosine {cos:.2f}, where the near-orthogonal objects the "
                "estimator assumes give about 0. Embeddings with a common mean (as learned encoders give) drive "
                "the estimate towards 1: centre them, MaxSketch(..., center=<mean of held-out embeddings>). "
                "(A stream of only a handful of distinct objects looks the same.)",
                UserWarning,
                stacklevel=3,
            )

    @property
    def noise_scale_(self) -> float:
        """View-noise scale estimated from the stream: ``sqrt(mean ||x - x'||^2 / 2)`` over near-duplicate
        pairs of the reservoir (0.0 with fewer than 3 such pairs: the stream looks noise-free)."""
        d2 = self.near_duplicate_pairs()
        if d2.size < _MIN_PAIRS:  # one or two stray pairs are more likely distinct objects than a noise level
            return 0.0
        return float(min(np.sqrt(0.5 * d2.mean()), 0.99))

    def estimate(
        self,
        noise_scale: float | str | None = None,
        method: str = "mle",
        n_groups: int = 8,
        views_model: str = "poisson",
    ) -> float:
        """Estimated number of distinct latent objects (0.0 for an empty sketch).

        ``noise_scale`` overrides the sketch's setting (``"auto"``: estimated from the stream; a number: fixed
        ``tau``); see :func:`estimate_from_maxima` for ``method`` and ``views_model``.
        """
        tau = self.noise_scale if noise_scale is None else _check_noise_scale(noise_scale)
        if method not in ("mle", "median_of_means"):
            raise ValueError(f"method must be 'mle' or 'median_of_means', got {method!r}")
        if views_model not in ("poisson", "fixed"):
            raise ValueError(f"views_model must be 'poisson' or 'fixed', got {views_model!r}")
        if self.is_empty():
            return 0.0
        self._warn_if_common_direction()
        if tau == "auto":
            tau = self.noise_scale_
        return float(
            estimate_from_maxima(
                self.maxima_,
                self.dim,
                noise_scale=tau,
                n_views=max(self.n_views_, 1.0),
                views_model=views_model,
                method=method,
                n_groups=n_groups,
            )
        )

    count = estimate  # datasketch's name

    # --- serialisation ---------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Configuration header, then the state arrays (little-endian)."""
        tau = np.nan if self.noise_scale == "auto" else float(self.noise_scale)
        header = _HEADER.pack(
            _MAGIC,
            _VERSION,
            self.dim,
            self.n_projections,
            self.seed,
            self.reservoir,
            _DEPTH,
            _SIGN_BITS,
            _HLL_P,
            tau,
            self.pair_radius,
            self.center is not None,
        )
        return b"".join(
            [
                header,
                self.maxima_.astype("<f4").tobytes(),
                self.view_registers_.tobytes(),
                self.top_values_.astype("<f4").tobytes(),
                self.top_hashes_.astype("<u8").tobytes(),
                self.top_signs_.tobytes(),
                b"" if self.center is None else self.center.astype("<f8").tobytes(),
            ]
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> MaxSketch:
        """Inverse of :meth:`to_bytes`."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size or data[:4] != _MAGIC:
            raise ValueError("data is not a serialised MaxSketch (bad magic or too short)")
        if data[4] not in (2, _VERSION):
            raise ValueError(f"data has format version {data[4]}, this library reads 2 and {_VERSION}")
        header = _HEADER if data[4] == _VERSION else _HEADER_V2
        if len(data) < header.size:
            raise ValueError("data is not a serialised MaxSketch (too short)")
        has_center = False
        if data[4] == _VERSION:
            _, _, dim, m, seed, res, depth, bits, p, tau, radius, has_center = header.unpack_from(data)
        else:
            _, _, dim, m, seed, res, depth, bits, p, tau, radius = header.unpack_from(data)
        if (depth, bits, p) != (_DEPTH, _SIGN_BITS, _HLL_P):
            raise ValueError(
                f"data has reservoir depth/bits/precision {(depth, bits, p)}, expected {(_DEPTH, _SIGN_BITS, _HLL_P)}"
            )
        sizes = [4 * m, 2**p, 4 * res * depth, 8 * res * depth, res * depth * bits // 8]
        center_bytes = 8 * dim if has_center else 0
        if len(data) != header.size + sum(sizes) + center_bytes:
            raise ValueError(
                f"data has {len(data)} bytes, expected {header.size + sum(sizes) + center_bytes} for m = {m}"
            )
        center = (
            np.frombuffer(data, "<f8", count=dim, offset=len(data) - center_bytes) if has_center else None
        )
        out = cls(
            dim,
            m,
            seed,
            noise_scale="auto" if np.isnan(tau) else tau,
            reservoir=res,
            pair_radius=radius,
            center=center,
        )
        off = header.size
        parts = []
        for size, dtype in zip(sizes, ("<f4", "u1", "<f4", "<u8", "u1")):
            parts.append(np.frombuffer(data, dtype=dtype, count=size // np.dtype(dtype).itemsize, offset=off))
            off += size
        out.maxima_ = parts[0].astype(np.float32)
        out.view_registers_ = parts[1].astype(np.uint8)
        out.top_values_ = parts[2].astype(np.float32).reshape(res, depth)
        out.top_hashes_ = parts[3].astype(_U64).reshape(res, depth)
        out.top_signs_ = parts[4].astype(np.uint8).reshape(res, depth, bits // 8)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MaxSketch):
            return NotImplemented
        config = ("dim", "n_projections", "seed", "reservoir", "noise_scale", "pair_radius")
        if any(getattr(self, a) != getattr(other, a) for a in config):
            return False
        if not _same_center(self.center, other.center):
            return False
        return all(
            np.array_equal(getattr(self, a), getattr(other, a))
            for a in ("maxima_", "view_registers_", "top_values_", "top_hashes_", "top_signs_")
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MaxSketch(dim={self.dim}, n_projections={self.n_projections}, seed={self.seed}, "
            f"noise_scale={self.noise_scale!r}, reservoir={self.reservoir}"
            + (", center=<vector>)" if self.center is not None else ")")
        )


def _top_distinct_order(values: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Indices of the DEPTH largest finite values with distinct hashes, largest first (ties by hash)."""
    finite = np.flatnonzero(np.isfinite(values))
    order = finite[np.lexsort((hashes[finite], -values[finite].astype(np.float64)))]
    _, first = np.unique(hashes[order], return_index=True)
    return order[np.sort(first)[:_DEPTH]]


def _top_distinct(values: np.ndarray, hashes: np.ndarray, signs: np.ndarray):
    """The DEPTH largest values with distinct hashes (ties by hash), padded with -inf; a function of the set."""
    keep = _top_distinct_order(values, hashes)
    out_v = np.full(_DEPTH, -np.inf, dtype=np.float32)
    out_h = np.zeros(_DEPTH, dtype=_U64)
    out_s = np.zeros((_DEPTH, signs.shape[-1]), dtype=np.uint8)
    out_v[: keep.size], out_h[: keep.size], out_s[: keep.size] = values[keep], hashes[keep], signs[keep]
    return out_v, out_h, out_s


class LogLinearCalibration:
    """Monotone calibration ``log n = intercept_ + slope_ * log n_hat`` fitted on streams with known ``n``.

    The paper calibrates on small streams and reports that the estimate generalises to larger ones [R]; the
    log-linear form extrapolates (isotonic regression would not) and is monotone when ``slope_ > 0``.
    """

    def fit(
        self, n_hat: Sequence[float] | np.ndarray, n_true: Sequence[float] | np.ndarray
    ) -> LogLinearCalibration:
        est = np.asarray(n_hat, dtype=np.float64)
        true = np.asarray(n_true, dtype=np.float64)
        if est.ndim != 1 or true.shape != est.shape:
            raise ValueError(
                f"n_hat and n_true must be 1-D of equal length, got {est.shape} and {true.shape}"
            )
        if est.size < 2:
            raise ValueError("n_hat needs at least 2 calibration streams")
        if not (
            np.all(np.isfinite(est)) and np.all(est > 0) and np.all(np.isfinite(true)) and np.all(true > 0)
        ):
            raise ValueError("n_hat and n_true must be finite and > 0")
        if np.ptp(np.log(est)) == 0:
            raise ValueError("n_hat must take at least 2 distinct values")
        slope, intercept = np.polyfit(np.log(est), np.log(true), 1)
        if slope <= 0:
            raise ValueError(f"the fitted calibration is not increasing (slope {slope:.3g}); check the data")
        self.slope_, self.intercept_ = float(slope), float(intercept)
        return self

    def predict(self, n_hat: float | np.ndarray) -> np.ndarray | float:
        if not hasattr(self, "slope_"):
            raise RuntimeError("LogLinearCalibration is not fitted; call fit first")
        est = np.asarray(n_hat, dtype=np.float64)
        if not (np.all(np.isfinite(est)) and np.all(est > 0)):
            raise ValueError("n_hat must be finite and > 0")
        out = np.exp(self.intercept_ + self.slope_ * np.log(est))
        return float(out) if out.ndim == 0 else out
