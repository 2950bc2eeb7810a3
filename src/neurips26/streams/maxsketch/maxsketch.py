"""MaxSketch: robust distinct counting with the maxima of random projections.

Paper: N. Tsikouras, C. Caramanis, C. Tzamos, "MaxSketch: Robust Distinct Counting in Streams via Random
Projections", arXiv 2605.15571 (NeurIPS 2026). Only the abstract is public to us; everything beyond "keep the
maximum of random Gaussian projections" is reconstructed ([R]) from the abstract, the cited prior work and
standard max-stable sketch math.

Model. Each stream item ``x_t`` is a unit-norm noisy view of one of ``n`` latent objects with centres ``u_o``;
centres are nearly orthogonal and ``||x_t - u_o|| <= delta`` (small).

Sketch (max-linear). ``m`` directions ``g_j = h_j / ||h_j||`` with ``h_j ~ N(0, I_d)`` regenerated from the
seed in chunks (never stored). State ``S_j = max_t <g_j, x_t>`` (``m`` floats). Merging is the elementwise
maximum; repeats and order of the items do not change the state.

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
``rho = sqrt(1 - tau^2)``, ``tau`` = ``noise_scale``, estimated by :func:`estimate_noise_scale` from pairs of
views of the same object as ``tau^2 = E||x - x'||^2 / 2``), the per-object law becomes

    1 - F_{d,tau,r}(s) = E_M[ 1 - F_d((s - tau M / sqrt(d)) / rho) ],   M = max of r standard normals,

computed by quadrature over ``M``, mixed over the number of views ``r`` of an object: zero-truncated
Poisson with mean ``n_items / n_hat`` (Poisson sightings; solved by fixed-point iteration) or a fixed ``r``.
The sketch therefore also counts its items. That count is the only part of the state that duplicated items
change, and only the noise-corrected estimate reads it. Limits (measured in the experiment): the correction
assumes isotropic Gaussian view noise; on MiniLM sentence embeddings, whose view noise is not isotropic, it
over-corrects, and the calibration below is what works there.

Calibration [R] (the paper's "generalises beyond the training regime"): :class:`LogLinearCalibration` fits a
monotone map ``log n = a + b log n_hat`` on streams with small, known ``n`` and is applied to larger streams.

Memory: ``m`` floats (plus the seed, the dimension and the item count). Time: ``O(m d)`` per item, done as a
matrix product per batch; every :meth:`MaxSketch.update` call regenerates the ``d x m`` directions chunk by
chunk, so feed batches rather than single vectors. Query ``O(m)``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special

__all__ = [
    "LogLinearCalibration",
    "MaxSketch",
    "estimate_noise_scale",
    "estimate_from_maxima",
    "sphere_coordinate_logsf",
]

_CHUNK = 256  # directions generated per chunk; part of the sketch's identity (first m' directions are shared)
_MAGIC = b"MXSK"
_VERSION = 1
_HEADER = struct.Struct("<4sBQQQq")  # magic, version, dim, n_projections, seed, n_items
_NOISE_GRID = np.linspace(-7.0, 7.0, 141)  # quadrature nodes for the noise maximum M


def _check_int(value: object, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {value}")
    return value


def _check_noise_scale(noise_scale: float) -> float:
    try:
        tau = float(noise_scale)
    except (TypeError, ValueError):
        raise TypeError(f"noise_scale must be a real number, got {type(noise_scale).__name__}") from None
    if not (0.0 <= tau < 1.0):
        raise ValueError(f"noise_scale must be in [0, 1), got {noise_scale!r}")
    return tau


def sphere_coordinate_logsf(s: np.ndarray, dim: int) -> np.ndarray:
    """``log P(<g, u> > s)`` for ``u`` uniform on the unit sphere of ``R^dim`` and a fixed unit ``g``.

    ``P(<g, u> > s) = I_{(1-s)/2}((d-1)/2, (d-1)/2)``; evaluated without cancellation for ``s`` near 1.
    """
    s = np.clip(np.asarray(s, dtype=np.float64), -1.0, 1.0)
    a = 0.5 * (dim - 1)
    with np.errstate(divide="ignore"):
        return np.log(special.betainc(a, a, 0.5 * (1.0 - s)))


def _noise_logsf_table(s: np.ndarray, dim: int, noise_scale: float) -> np.ndarray:
    """``log(1 - F_d((s_j - tau u_k / sqrt(d)) / rho))`` on the quadrature nodes ``u_k``, shape (m, K)."""
    rho = np.sqrt(1.0 - noise_scale**2)
    shifted = (s[:, None] - noise_scale * _NOISE_GRID[None, :] / np.sqrt(dim)) / rho
    return sphere_coordinate_logsf(shifted, dim)


def _log_max_density(u: np.ndarray, r: np.ndarray | float) -> np.ndarray:
    """log density of the maximum of ``r`` standard normals at ``u`` (broadcast over ``r``)."""
    return np.log(r) - 0.5 * u**2 - 0.5 * np.log(2 * np.pi) + (r - 1.0) * special.log_ndtr(u)


def _views_log_pmf(mean_views: float, views_model: str) -> tuple[np.ndarray, np.ndarray]:
    """Support and log-probabilities of the number of views of one object, given its mean."""
    if views_model == "fixed" or mean_views <= 1.0 + 1e-9:
        return np.array([max(mean_views, 1.0)]), np.zeros(1)
    # zero-truncated Poisson(lam) with mean lam / (1 - exp(-lam)) = mean_views (Poisson sightings, seen >= 1)
    lam = optimize.brentq(lambda t: t / -np.expm1(-t) - mean_views, 1e-9, mean_views + 1.0)
    k = np.arange(1, int(mean_views + 12 * np.sqrt(mean_views) + 12))
    log_pmf = k * np.log(lam) - lam - special.gammaln(k + 1) - np.log(-np.expm1(-lam))
    return k.astype(np.float64), log_pmf


def _object_tail(logsf_table: np.ndarray, mean_views: float, views_model: str) -> np.ndarray:
    """``1 - F_{d,tau,r}(s_j)`` for one object's maximum over its noisy views (module docstring)."""
    u = _NOISE_GRID
    k, log_pmf = _views_log_pmf(mean_views, views_model)
    log_f = special.logsumexp(log_pmf[:, None] + _log_max_density(u[None, :], k[:, None]), axis=0)
    return np.exp(special.logsumexp(logsf_table + log_f[None, :], axis=1)) * (u[1] - u[0])


def _rate(exp_values: np.ndarray, method: str, n_groups: int) -> float:
    """Rate estimate of i.i.d. Exponential(n) values: ``(k - 1) / sum`` (or its median over groups)."""
    if method == "mle":
        return (exp_values.size - 1) / exp_values.sum()
    groups = np.array_split(exp_values, n_groups)
    return float(np.median([(g.size - 1) / g.sum() for g in groups]))


def estimate_from_maxima(
    maxima: np.ndarray,
    dim: int,
    *,
    noise_scale: float = 0.0,
    n_items: int | None = None,
    views_model: str = "poisson",
    method: str = "mle",
    n_groups: int = 8,
    max_iter: int = 50,
    tol: float = 1e-6,
) -> float:
    """Distinct-object estimate from the projection maxima ``S_j`` (module docstring, estimator).

    Parameters
    ----------
    maxima : array of shape (m,), ``S_j = max_t <g_j, x_t>`` for unit directions ``g_j``.
    dim : ambient dimension ``d >= 2``.
    noise_scale : ``tau`` in [0, 1); 0 is the pure model (every view lies on its object's centre).
    n_items : number of stream items, needed when ``noise_scale > 0`` (mean views = n_items / n_hat).
    views_model : law of the number of views of one object given the mean ``r``: ``"poisson"``
        (zero-truncated Poisson, i.e. Poisson sightings of objects seen at least once) or ``"fixed"``
        (every object seen ``r`` times; biased low when the counts vary, by Jensen's inequality).
    method : ``"mle"`` (``(m - 1) / sum E_j``) or ``"median_of_means"`` (median over ``n_groups`` groups).
    """
    maxima = np.asarray(maxima, dtype=np.float64)
    if maxima.ndim != 1 or maxima.size < 2:
        raise ValueError(f"maxima must be a 1-D array with at least 2 values, got shape {maxima.shape}")
    if not np.all(np.isfinite(maxima)):
        raise ValueError("maxima must be finite (an empty sketch has no estimate)")
    dim = _check_int(dim, "dim", 2)
    tau = _check_noise_scale(noise_scale)
    if method not in ("mle", "median_of_means"):
        raise ValueError(f"method must be 'mle' or 'median_of_means', got {method!r}")
    if method == "median_of_means":
        n_groups = _check_int(n_groups, "n_groups", 1, maxima.size // 2)
    if views_model not in ("poisson", "fixed"):
        raise ValueError(f"views_model must be 'poisson' or 'fixed', got {views_model!r}")
    if tau > 0.0:
        if n_items is None:
            raise ValueError("n_items is required when noise_scale > 0")
        n_items = _check_int(n_items, "n_items", 1)

    if tau == 0.0:
        tail = np.exp(sphere_coordinate_logsf(maxima, dim))
    else:
        table = _noise_logsf_table(maxima, dim, tau)

    def n_hat_given(views: float) -> float:
        t = tail if tau == 0.0 else _object_tail(table, views, views_model)
        exp_values = -np.log1p(-np.minimum(t, 1.0 - 1e-16))
        exp_values = np.maximum(exp_values, 1e-300)
        return _rate(exp_values, method, n_groups)

    if tau == 0.0:
        return float(n_hat_given(1.0))
    n_hat = n_hat_given(1.0)  # upper bound: the least correction
    for _ in range(max_iter):
        views = max(1.0, n_items / n_hat)
        new = n_hat_given(views)
        if abs(np.log(new / n_hat)) < tol:
            return float(new)
        n_hat = new
    return float(n_hat)


def estimate_noise_scale(views_a: np.ndarray, views_b: np.ndarray) -> float:
    """Noise scale ``tau`` from paired views of the same objects: ``tau^2 = mean ||x - x'||^2 / 2``.

    Rows of ``views_a`` and ``views_b`` are two views of the same object (unit-normalised here). For a unit
    direction ``g`` uniform on the sphere, ``E <g, x - x'>^2 = ||x - x'||^2 / d``, so ``tau / sqrt(d)`` is the
    standard deviation of the per-view projection noise used by the noise correction.
    """
    a = _as_batch(views_a, None, "views_a")
    b = _as_batch(views_b, a.shape[1], "views_b")
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"views_a and views_b must have the same number of rows, got {a.shape[0]}, {b.shape[0]}"
        )
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    tau2 = 0.5 * float(np.mean(np.sum((a - b) ** 2, axis=1)))
    return float(min(np.sqrt(tau2), 0.99))


def _as_batch(x: np.ndarray, dim: int | None, name: str = "x") -> np.ndarray:
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
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(~np.any(arr != 0, axis=1)):
        raise ValueError(f"{name} contains an all-zero vector, which has no direction")
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64, copy=False)
    return arr


def _exact_column_max(batch: np.ndarray, directions: np.ndarray, block: np.ndarray) -> np.ndarray:
    """Column maxima of ``block = batch @ directions``, made independent of how the stream was batched.

    BLAS may round a row's dot products differently depending on the batch it sits in, which would make
    ``sketch(A + B)`` and ``merge(sketch(A), sketch(B))`` differ in the last bits. So each column's maximum is
    re-evaluated with a fixed-order dot product (einsum) on the few rows within rounding distance of the BLAS
    maximum: the result is the fixed-order value of the true arg-max row, whatever the batching.
    """
    col_max = block.max(axis=0)
    # BLAS and fixed-order dot products of unit vectors differ by at most ~dim * eps; 8x that is a safe margin
    tol = 8 * batch.shape[1] * np.finfo(block.dtype).eps
    rows, cols = np.nonzero(block >= col_max[None, :] - tol)
    exact = np.einsum("ij,ij->i", batch[rows], directions[:, cols].T, optimize=False)
    out = np.full(col_max.shape, -np.inf, dtype=block.dtype)
    np.maximum.at(out, cols, exact)
    return out


class MaxSketch:
    """Mergeable, duplicate-insensitive sketch that counts distinct latent objects in a stream of embeddings.

    Parameters
    ----------
    dim : dimension of the stream's vectors (>= 2).
    n_projections : number ``m`` of random directions (= floats kept), >= 2.
    seed : seed of the directions (0 <= seed < 2**63); sketches merge only with equal dim, size and seed.
    noise_scale : default ``tau`` for :meth:`estimate` (0 = pure model; see :func:`estimate_noise_scale`).

    Vectors are normalised to unit length before projection (only directions matter). Float32 batches are
    projected in float32, everything else in float64; the state is float64.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> centres = rng.standard_normal((500, 64))
    >>> sk = MaxSketch(64, n_projections=512, seed=1)
    >>> _ = sk.update(np.repeat(centres, 3, axis=0))          # every object three times
    >>> 400 < sk.estimate() < 600
    True
    """

    def __init__(self, dim: int, n_projections: int = 1024, seed: int = 0, *, noise_scale: float = 0.0):
        self.dim = _check_int(dim, "dim", 2)
        self.n_projections = _check_int(n_projections, "n_projections", 2)
        self.seed = _check_int(seed, "seed", 0, 2**63 - 1)
        self.noise_scale = _check_noise_scale(noise_scale)
        self.maxima_ = np.full(self.n_projections, -np.inf)
        self.n_items_ = 0

    # --- projections ------------------------------------------------------------------------------------
    def _directions(self, chunk: int, dtype: np.dtype) -> np.ndarray:
        """Unit directions ``chunk * 256 ...`` as a (dim, <=256) block, regenerated from the seed."""
        width = min(_CHUNK, self.n_projections - chunk * _CHUNK)
        rng = np.random.default_rng([self.seed, chunk])
        h = rng.standard_normal((self.dim, _CHUNK), dtype=np.float32)[:, :width].astype(np.float64)
        h /= np.linalg.norm(h, axis=0, keepdims=True)
        return h.astype(dtype, copy=False)

    def project(self, x: np.ndarray) -> np.ndarray:
        """Projections ``<g_j, x_t / ||x_t||>`` of a batch, shape (n_items, m) (for inspection and tests)."""
        batch = _as_batch(x, self.dim)
        batch = batch / np.linalg.norm(batch, axis=1, keepdims=True)
        n_chunks = -(-self.n_projections // _CHUNK)
        return np.hstack([batch @ self._directions(c, batch.dtype) for c in range(n_chunks)])

    # --- streaming API -------------------------------------------------------------------------------------
    def update(self, x: np.ndarray) -> MaxSketch:
        """Add one vector (shape (dim,)) or a batch (shape (n_items, dim)); returns ``self``.

        Raises ``ValueError`` (and leaves the sketch unchanged) on a wrong dimension, NaN/inf, an all-zero
        vector or an empty batch.
        """
        batch = _as_batch(x, self.dim)
        batch = batch / np.linalg.norm(batch, axis=1, keepdims=True)
        new = self.maxima_.copy()
        n_chunks = -(-self.n_projections // _CHUNK)
        for c in range(n_chunks):
            directions = self._directions(c, batch.dtype)
            col_max = _exact_column_max(batch, directions, batch @ directions)
            lo = c * _CHUNK
            np.maximum(new[lo : lo + col_max.shape[0]], col_max, out=new[lo : lo + col_max.shape[0]])
        self.maxima_ = new
        self.n_items_ += batch.shape[0]
        return self

    def _check_compatible(self, other: object) -> None:
        if not isinstance(other, MaxSketch):
            raise TypeError(f"other must be a MaxSketch, got {type(other).__name__}")
        for attr in ("dim", "n_projections", "seed"):
            if getattr(self, attr) != getattr(other, attr):
                raise ValueError(
                    f"cannot merge sketches with different {attr}: {getattr(self, attr)} != {getattr(other, attr)}"
                )

    def merge(self, other: MaxSketch) -> MaxSketch:
        """Merge ``other`` into this sketch (elementwise maximum; item counts add); returns ``self``."""
        self._check_compatible(other)
        self.maxima_ = np.maximum(self.maxima_, other.maxima_)
        self.n_items_ += other.n_items_
        return self

    def copy(self) -> MaxSketch:
        out = MaxSketch(self.dim, self.n_projections, self.seed, noise_scale=self.noise_scale)
        out.maxima_ = self.maxima_.copy()
        out.n_items_ = self.n_items_
        return out

    def is_empty(self) -> bool:
        return self.n_items_ == 0

    @property
    def memory_floats(self) -> int:
        """Floats kept by the sketch (``m``); the directions are regenerated from the seed, never stored."""
        return self.n_projections

    def estimate(
        self,
        noise_scale: float | None = None,
        method: str = "mle",
        n_groups: int = 8,
        views_model: str = "poisson",
    ) -> float:
        """Estimated number of distinct latent objects (0.0 for an empty sketch).

        ``noise_scale`` overrides the sketch's default ``tau``; see :func:`estimate_from_maxima`.
        """
        tau = self.noise_scale if noise_scale is None else _check_noise_scale(noise_scale)
        if method not in ("mle", "median_of_means"):
            raise ValueError(f"method must be 'mle' or 'median_of_means', got {method!r}")
        if views_model not in ("poisson", "fixed"):
            raise ValueError(f"views_model must be 'poisson' or 'fixed', got {views_model!r}")
        if self.is_empty():
            return 0.0
        return estimate_from_maxima(
            self.maxima_,
            self.dim,
            noise_scale=tau,
            n_items=self.n_items_,
            views_model=views_model,
            method=method,
            n_groups=n_groups,
        )

    # --- serialisation ---------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Header (dim, size, seed, item count) and the ``m`` maxima as little-endian float64."""
        header = _HEADER.pack(_MAGIC, _VERSION, self.dim, self.n_projections, self.seed, self.n_items_)
        return header + self.maxima_.astype("<f8").tobytes() + struct.pack("<d", self.noise_scale)

    @classmethod
    def from_bytes(cls, data: bytes) -> MaxSketch:
        """Inverse of :meth:`to_bytes`."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size or data[:4] != _MAGIC:
            raise ValueError("data is not a serialised MaxSketch (bad magic or too short)")
        magic, version, dim, m, seed, n_items = _HEADER.unpack_from(data)
        if version != _VERSION:
            raise ValueError(f"data has format version {version}, this library reads {_VERSION}")
        if len(data) != _HEADER.size + 8 * m + 8:
            raise ValueError(f"data has {len(data)} bytes, expected {_HEADER.size + 8 * m + 8} for m = {m}")
        (tau,) = struct.unpack_from("<d", data, _HEADER.size + 8 * m)
        out = cls(dim, m, seed, noise_scale=tau)
        out.maxima_ = np.frombuffer(data, dtype="<f8", count=m, offset=_HEADER.size).astype(np.float64)
        out.n_items_ = n_items
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MaxSketch):
            return NotImplemented
        return (self.dim, self.n_projections, self.seed, self.n_items_) == (
            other.dim,
            other.n_projections,
            other.seed,
            other.n_items_,
        ) and bool(np.array_equal(self.maxima_, other.maxima_))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MaxSketch(dim={self.dim}, n_projections={self.n_projections}, seed={self.seed}, "
            f"n_items={self.n_items_})"
        )


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
