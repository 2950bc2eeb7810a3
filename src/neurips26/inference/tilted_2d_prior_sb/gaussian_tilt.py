"""Product-form tilts of a Gaussian 3D reference: the multi-marginal Schrödinger-bridge lift and its surrogates.

Gaussian sanity instance of the claimed rate of the (unpublished, descriptive title) NeurIPS 2026 abstract
"How close is an annealed 2D-tilted diffusion prior to the multi-marginal Schrödinger-bridge lift?".
No arXiv id or full text is available; the Gaussian family below is OURS [R] (the project's digest), it
checks the *shape* of the bound, not the paper's constants or its exact definition of the surrogate.

A volume ``x = (x_1, ..., x_N)`` has ``N`` slices ``x_i`` in ``R^d``. The reference is ``P_0 = N(m_0, C_0)``
(in the experiment ``C_0 = R_rho ⊗ S``, an AR(1) correlation across slices times an in-slice covariance).
A *product-form tilt* of ``P_0`` is

    dP/dP_0 (x) ∝ prod_i exp(phi_i(x_i)),     phi_i(x_i) = -1/2 x_i^T A_i x_i + b_i^T x_i,

so ``P`` is Gaussian with precision ``J_0 + blockdiag(A_i)`` and linear term ``J_0 m_0 + b``
(:class:`GaussianTilt`). Two such laws are compared through the paper's single scalar correction field

    Delta(x) = sum_i (psi_i - phi_i)(x_i),    log dPi/dP* = Delta - log E_{P*}[e^Delta],
    KL(Pi || P*) = E_Pi[Delta] - log E_{P*}[e^Delta]                                  (paper, item 1)

- :func:`gaussian_sb_lift`: the SB lift ``P* = argmin KL(P || P_0)`` s.t. slice marginals ``mu_i``, by
  Gaussian IPF (Sinkhorn): one slice at a time, multiply by ``mu_i / (current slice marginal)``; in moment
  form this is the exact rank-``d`` update ``m += C[:, i] C_ii^{-1} (m_i - m_ii)``,
  ``C += C[:, i] C_ii^{-1} (T_i - C_ii) C_ii^{-1} C[i, :]``, and the potentials gain
  ``A_i += T_i^{-1} - C_ii^{-1}``, ``b_i += T_i^{-1} m_i - C_ii^{-1} m_ii``.
- :func:`ratio_tilt`: the surrogate ``psi_i = log (mu_i * N(0, sigma^2)) / (P_{0,i} * N(0, sigma^2))``: the
  naive ratio tilt (``sigma = 0``; the first, parallel IPF step) built from Gaussian-smoothed marginals
  (the tempering piece at EDM level ``sigma``) [R].
- :func:`tilt_kl` (exact, stable: the precisions differ by a block-diagonal matrix only),
  :func:`correction_field`, :func:`scalar_field_kl` (closed-form identity), :func:`scalar_field_kl_mc`
  and :func:`tv_mc` (Monte Carlo, ``E_{P*}[(1 - dPi/dP*)_+]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

# The public names are listed once, in the package's __all__ (neurips26.inference.tilted_2d_prior_sb).


# ----------------------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------------------
def _finite_array(name: str, value, ndim: int) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values (no NaN or inf)")
    return arr


def _spd(name: str, mat: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of a symmetric positive-definite matrix, or a ValueError naming ``name``."""
    if mat.shape[0] != mat.shape[1]:
        raise ValueError(f"{name} must be square, got shape {mat.shape}")
    if not np.allclose(mat, mat.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(mat).max()))):
        raise ValueError(f"{name} must be symmetric")
    try:
        return linalg.cholesky(mat, lower=True)
    except linalg.LinAlgError:
        raise ValueError(f"{name} must be symmetric positive definite") from None


def _positive(name: str, value: float, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    ok = np.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {value}")
    return value


def _int_at_least(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def _slice_targets(target_means, target_covs, n_slices: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    means = _finite_array("target_means", target_means, 2)
    if means.shape != (n_slices, d):
        raise ValueError(
            f"target_means must have shape (n_slices, slice_dim) = {(n_slices, d)}, got {means.shape}"
        )
    covs = _finite_array("target_covs", target_covs, 3)
    if covs.shape != (n_slices, d, d):
        raise ValueError(
            f"target_covs must have shape (n_slices, d, d) = {(n_slices, d, d)}, got {covs.shape}"
        )
    for i in range(n_slices):
        _spd(f"target_covs[{i}]", covs[i])
    return means, covs


def _with_blocks(M: np.ndarray | None, blocks: np.ndarray) -> np.ndarray:
    """``M + blockdiag(blocks)`` (vectorized; ``blocks`` has shape (N, d, d))."""
    n, d, _ = blocks.shape
    out = M.copy() if M is not None else np.zeros((n * d, n * d))
    idx = np.arange(n)
    out.reshape(n, d, n, d)[idx, :, idx, :] += blocks
    return out


# ----------------------------------------------------------------------------------------------------------
# the family
# ----------------------------------------------------------------------------------------------------------
def edm_sigma_schedule(
    n_levels: int, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0
) -> np.ndarray:
    """EDM noise levels (Karras et al. 2022, eq. 5): ``(smax^(1/r) + k/(K-1) (smin^(1/r) - smax^(1/r)))^r``.

    Returns the ``n_levels`` levels in decreasing order, from ``sigma_max`` to ``sigma_min``.
    """
    n_levels = _int_at_least("n_levels", n_levels, 2)
    sigma_min = _positive("sigma_min", sigma_min)
    sigma_max = _positive("sigma_max", sigma_max)
    rho = _positive("rho", rho)
    if sigma_min >= sigma_max:
        raise ValueError(f"sigma_min must be < sigma_max, got {sigma_min} >= {sigma_max}")
    k = np.arange(n_levels) / (n_levels - 1)
    return (sigma_max ** (1 / rho) + k * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho


def squared_exponential_pixel_cov(side: int = 2, lengthscale: float = 1.0) -> np.ndarray:
    """In-slice covariance ``S_pq = exp(-|p - q|^2 / (2 l^2))`` over a ``side x side`` pixel grid."""
    side = _int_at_least("side", side, 1)
    lengthscale = _positive("lengthscale", lengthscale)
    g = (
        np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
        .reshape(-1, 2)
        .astype(float)
    )
    sq = ((g[:, None, :] - g[None, :, :]) ** 2).sum(-1)
    return np.exp(-sq / (2 * lengthscale**2))


def ar1_slice_covariance(n_slices: int, rho: float, slice_cov) -> np.ndarray:
    """Reference covariance ``R_rho ⊗ S`` with ``(R_rho)_ij = rho^|i-j|`` (AR(1) coupling across slices)."""
    n_slices = _int_at_least("n_slices", n_slices, 1)
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.integer, np.floating)):
        raise TypeError(f"rho must be a real number, got {type(rho).__name__}")
    if not (np.isfinite(rho) and -1.0 < rho < 1.0):
        raise ValueError(f"rho must lie in the open interval (-1, 1), got {rho}")
    S = _finite_array("slice_cov", slice_cov, 2)
    _spd("slice_cov", S)
    idx = np.arange(n_slices)
    R = float(rho) ** np.abs(idx[:, None] - idx[None, :])
    return np.kron(R, S)


@dataclass(eq=False)
class GaussianTilt:
    """A product-form tilt of a Gaussian reference: ``dP/dP_0 ∝ prod_i exp(-x_i^T A_i x_i / 2 + b_i^T x_i)``.

    Parameters
    ----------
    ref_mean : (N d,) mean of the reference ``P_0``.
    ref_precision : (N d, N d) precision ``J_0 = C_0^{-1}`` of the reference.
    A : (N, d, d) symmetric quadratic potentials (may be indefinite, as long as the tilt is normalizable).
    b : (N, d) linear potentials.

    The law is ``N(mean, covariance)`` with precision ``J_0 + blockdiag(A)`` and linear term
    ``J_0 m_0 + vec(b)``. Construction raises ``ValueError`` if that precision is not positive definite.
    """

    ref_mean: np.ndarray
    ref_precision: np.ndarray
    A: np.ndarray
    b: np.ndarray
    _chol: np.ndarray = field(init=False, repr=False)
    mean: np.ndarray = field(init=False, repr=False)
    covariance: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.A = _finite_array("A", self.A, 3)
        n, d, d2 = self.A.shape
        if d != d2:
            raise ValueError(f"A must have shape (n_slices, d, d), got {self.A.shape}")
        if not np.allclose(self.A, np.swapaxes(self.A, 1, 2), atol=1e-12):
            raise ValueError("A must hold symmetric (d, d) blocks")
        self.b = _finite_array("b", self.b, 2)
        if self.b.shape != (n, d):
            raise ValueError(f"b must have shape (n_slices, d) = {(n, d)}, got {self.b.shape}")
        self.ref_precision = _finite_array("ref_precision", self.ref_precision, 2)
        if self.ref_precision.shape != (n * d, n * d):
            raise ValueError(
                f"ref_precision must have shape (N d, N d) = {(n * d, n * d)}, got {self.ref_precision.shape}"
            )
        self.ref_mean = _finite_array("ref_mean", self.ref_mean, 1)
        if self.ref_mean.shape != (n * d,):
            raise ValueError(f"ref_mean must have shape (N d,) = {(n * d,)}, got {self.ref_mean.shape}")
        try:
            self._chol = linalg.cholesky(self.precision, lower=True)
        except linalg.LinAlgError:
            # name what a user can change: the slice whose quadratic potential is the most negative
            lam = np.linalg.eigvalsh(self.precision)[0]
            worst = int(np.argmin(np.linalg.eigvalsh(self.A)[:, 0]))
            raise ValueError(
                f"the tilt is not normalizable: J_0 + blockdiag(A) is not positive definite (smallest "
                f"eigenvalue {lam:.3g}); the most negative potential is A[{worst}]: weaken or smooth it (a "
                f"smaller tilt strength)"
            ) from None
        self.covariance = linalg.cho_solve((self._chol, True), np.eye(n * d))
        self.covariance = 0.5 * (self.covariance + self.covariance.T)
        self.mean = linalg.cho_solve((self._chol, True), self.linear_term)

    @classmethod
    def reference(cls, ref_mean, ref_cov, slice_dim: int) -> GaussianTilt:
        """The untilted reference ``P_0 = N(ref_mean, ref_cov)`` (all potentials zero)."""
        slice_dim = _int_at_least("slice_dim", slice_dim, 1)
        C0 = _finite_array("ref_cov", ref_cov, 2)
        L = _spd("ref_cov", C0)
        if C0.shape[0] % slice_dim:
            raise ValueError(f"slice_dim must divide the dimension {C0.shape[0]} of ref_cov, got {slice_dim}")
        n = C0.shape[0] // slice_dim
        J0 = linalg.cho_solve((L, True), np.eye(C0.shape[0]))
        return cls(
            np.broadcast_to(np.asarray(ref_mean, dtype=float), (C0.shape[0],)).copy(),
            0.5 * (J0 + J0.T),
            np.zeros((n, slice_dim, slice_dim)),
            np.zeros((n, slice_dim)),
        )

    # --- structure -------------------------------------------------------------------------------------
    @property
    def n_slices(self) -> int:
        return self.A.shape[0]

    @property
    def slice_dim(self) -> int:
        return self.A.shape[1]

    @property
    def precision(self) -> np.ndarray:
        return _with_blocks(self.ref_precision, self.A)

    @property
    def linear_term(self) -> np.ndarray:
        return self.ref_precision @ self.ref_mean + self.b.ravel()

    def with_potentials(self, A, b) -> GaussianTilt:
        """Another tilt of the same reference."""
        return GaussianTilt(self.ref_mean, self.ref_precision, A, b)

    def slice_marginals(self) -> tuple[np.ndarray, np.ndarray]:
        """Means (N, d) and covariances (N, d, d) of the slice marginals ``(pi_i)_# P``."""
        n, d = self.n_slices, self.slice_dim
        blocks = self.covariance.reshape(n, d, n, d)[np.arange(n), :, np.arange(n), :]
        return self.mean.reshape(n, d), blocks

    def potential(self, X) -> np.ndarray:
        """``sum_i phi_i(x_i)`` for each row of ``X`` (shape (n, N d))."""
        X = _finite_array("X", X, 2)
        if X.shape[1] != self.n_slices * self.slice_dim:
            raise ValueError(f"X must have {self.n_slices * self.slice_dim} columns, got {X.shape[1]}")
        Xs = X.reshape(len(X), self.n_slices, self.slice_dim)
        quad = np.einsum("kni,nij,knj->k", Xs, self.A, Xs)
        return -0.5 * quad + Xs.reshape(len(X), -1) @ self.b.ravel()

    def sample(self, n_samples: int, random_state=None) -> np.ndarray:
        """``n_samples`` draws, shape (n_samples, N d)."""
        n_samples = _int_at_least("n_samples", n_samples, 1)
        rng = np.random.default_rng(random_state)
        Z = rng.standard_normal((n_samples, self.mean.size))
        return self.mean + Z @ self._cov_factor().T

    def _cov_factor(self) -> np.ndarray:
        return linalg.cholesky(self.covariance, lower=True)


# ----------------------------------------------------------------------------------------------------------
# the SB lift (Gaussian IPF) and the surrogates
# ----------------------------------------------------------------------------------------------------------
def _ipf_sweep(A, b, mean, cov, means_t, covs_t, prec_t, order: str) -> None:
    """One IPF sweep in place. ``order='sequential'`` (Gauss-Seidel, the I-projection cycle) or ``'parallel'``
    (every slice against the marginals at the start of the sweep; from ``P_0`` it gives the ratio tilt)."""
    n, d = b.shape
    if order == "parallel":
        blocks = cov.reshape(n, d, n, d)[np.arange(n), :, np.arange(n), :]
        inv = np.linalg.inv(blocks)
        m_cur = mean.reshape(n, d)
        A += prec_t - inv
        b += np.einsum("nij,nj->ni", prec_t, means_t) - np.einsum("nij,nj->ni", inv, m_cur)
        return
    for i in range(n):
        s = slice(i * d, (i + 1) * d)
        Cii = cov[s, s]
        Ci = cov[:, s]
        inv = np.linalg.inv(Cii)
        G = Ci @ inv  # C[:, i] C_ii^{-1}
        m_i = mean[s].copy()
        A[i] += prec_t[i] - inv
        b[i] += prec_t[i] @ means_t[i] - inv @ m_i
        # the new law is p(x_{-i} | x_i) mu_i(x_i): exact rank-d moment update
        mean += G @ (means_t[i] - m_i)
        cov += G @ (covs_t[i] - Cii) @ G.T
        cov[:] = 0.5 * (cov + cov.T)


def _ipf_inputs(reference: GaussianTilt, target_means, target_covs, order: str):
    if not isinstance(reference, GaussianTilt):
        raise TypeError(f"reference must be a GaussianTilt, got {type(reference).__name__}")
    if order not in ("sequential", "parallel"):
        raise ValueError(f"order must be 'sequential' or 'parallel', got {order!r}")
    means_t, covs_t = _slice_targets(target_means, target_covs, reference.n_slices, reference.slice_dim)
    return means_t, covs_t, np.linalg.inv(covs_t)


def gaussian_sb_lift(
    reference: GaussianTilt,
    target_means,
    target_covs,
    *,
    tol: float = 1e-12,
    max_sweeps: int = 2000,
    order: str = "sequential",
    log: bool = False,
):
    """Multi-marginal Schrödinger-bridge lift of a Gaussian reference onto Gaussian slice marginals.

    ``P* = argmin_P KL(P || P_0)`` subject to ``(pi_i)_# P = N(target_means[i], target_covs[i])``; its
    density is ``dP*/dP_0 ∝ prod_i exp(phi_i(x_i))`` with quadratic Schrödinger potentials, found by IPF
    (Sinkhorn) sweeps starting from the reference's own potentials. Every sweep restarts from a fresh
    Cholesky solve of the precision, so rank-``d`` round-off does not accumulate.

    Parameters
    ----------
    reference : the tilt to start from (usually :meth:`GaussianTilt.reference`).
    target_means : (N, d) slice means ``m_i``.  target_covs : (N, d, d) slice covariances ``T_i`` (SPD).
    tol : stop when every slice mean and covariance matches its target to ``tol`` (max-abs).
    max_sweeps : cap on IPF sweeps (``>= 1``).  order : ``'sequential'`` (default) or ``'parallel'``.
    log : also return ``{'n_sweeps', 'marginal_error', 'converged', 'errors'}``.

    Returns
    -------
    The lift as a :class:`GaussianTilt` of the same reference (and the log if asked).
    """
    tol = _positive("tol", tol)
    max_sweeps = _int_at_least("max_sweeps", max_sweeps, 1)
    means_t, covs_t, prec_t = _ipf_inputs(reference, target_means, target_covs, order)
    n, d = reference.n_slices, reference.slice_dim
    A, b = reference.A.copy(), reference.b.copy()
    mean, cov = reference.mean.copy(), reference.covariance.copy()
    h0, idx = reference.ref_precision @ reference.ref_mean, np.arange(n)

    def marginal_error() -> float:
        blocks = cov.reshape(n, d, n, d)[idx, :, idx, :]
        return float(max(np.abs(mean.reshape(n, d) - means_t).max(), np.abs(blocks - covs_t).max()))

    errors, sweeps = [marginal_error()], 0
    while errors[-1] > tol and sweeps < max_sweeps:
        _ipf_sweep(A, b, mean, cov, means_t, covs_t, prec_t, order)
        A = 0.5 * (A + np.swapaxes(A, 1, 2))
        # restart the moments from a fresh Cholesky solve so rank-d round-off does not accumulate
        try:
            L = linalg.cholesky(_with_blocks(reference.ref_precision, A), lower=True)
        except linalg.LinAlgError:
            raise ValueError("IPF left the normalizable set (try order='sequential')") from None
        cov = linalg.cho_solve((L, True), np.eye(n * d))
        cov = 0.5 * (cov + cov.T)
        mean = linalg.cho_solve((L, True), h0 + b.ravel())
        errors.append(marginal_error())
        sweeps += 1
    tilt = reference.with_potentials(A, b)
    if log:
        info = {
            "n_sweeps": sweeps,
            "marginal_error": errors[-1],
            "converged": errors[-1] <= tol,
            "errors": errors,
        }
        return tilt, info
    return tilt


def ipf_ladder(
    reference: GaussianTilt, target_means, target_covs, n_sweeps: int, *, order: str = "sequential"
) -> list[GaussianTilt]:
    """The tilts after ``j = 1..n_sweeps`` IPF sweeps started from ``reference`` (the digest's "IPF ladder").

    ``order='sequential'`` is the Gauss-Seidel cycle of I-projections, whose ``KL(P* || P_j)`` decreases by
    Csiszár's Pythagorean identity. ``order='parallel'`` updates every slice against the marginals at the
    start of the sweep; its first rung from ``P_0`` is the naive ratio tilt, but iterated it can leave the
    normalizable set when slices are strongly coupled (it raises ``ValueError`` then).
    """
    n_sweeps = _int_at_least("n_sweeps", n_sweeps, 1)
    means_t, covs_t, prec_t = _ipf_inputs(reference, target_means, target_covs, order)
    out, tilt = [], reference
    for _ in range(n_sweeps):
        A, b = tilt.A.copy(), tilt.b.copy()
        mean, cov = tilt.mean.copy(), tilt.covariance.copy()
        _ipf_sweep(A, b, mean, cov, means_t, covs_t, prec_t, order)
        tilt = tilt.with_potentials(0.5 * (A + np.swapaxes(A, 1, 2)), b)
        out.append(tilt)
    return out


RATIO_TILT_POTENTIALS = ("replace", "add")


def ratio_tilt(
    reference: GaussianTilt,
    target_means,
    target_covs,
    smoothing: float = 0.0,
    *,
    potentials: str | None = None,
) -> GaussianTilt:
    """The surrogate tilt ``psi_i = log (mu_i * N(0, s^2 I)) - log (P_i * N(0, s^2 I))`` [R].

    ``smoothing = 0`` is the naive ratio tilt (one parallel IPF step); ``smoothing = sigma`` uses the
    Gaussian-smoothed 2D prior at EDM level ``sigma`` (the tempering piece). For Gaussians both smoothed laws
    stay Gaussian, so ``A_i = (T_i + s^2 I)^{-1} - (C_ii + s^2 I)^{-1}`` and
    ``b_i = (T_i + s^2 I)^{-1} m_i - (C_ii + s^2 I)^{-1} m_ii`` with ``(m_ii, C_ii)`` the slice marginal of ``P``.

    ``potentials`` says what happens when ``reference`` is itself a tilt with non-zero potentials (for the
    untilted reference ``P_0`` both choices give the same law and it may be left out):

    - ``"replace"``: ``P`` is the untilted ``P_0`` underneath; the tilt's own potentials are discarded and the
      result is the ratio tilt of ``P_0`` (what the paper's surrogate is);
    - ``"add"``: ``P`` is the given tilt; the ratios against its own slice marginals are added to its
      potentials (one parallel IPF step from that tilt).

    A non-reference tilt without an explicit ``potentials`` raises ``ValueError``: the two readings differ.
    """
    if not isinstance(reference, GaussianTilt):
        raise TypeError(f"reference must be a GaussianTilt, got {type(reference).__name__}")
    smoothing = _positive("smoothing", smoothing, allow_zero=True)
    if potentials is not None and potentials not in RATIO_TILT_POTENTIALS:
        raise ValueError(f"potentials must be one of {RATIO_TILT_POTENTIALS} or None, got {potentials!r}")
    tilted = bool(np.any(reference.A != 0) or np.any(reference.b != 0))
    if tilted and potentials is None:
        raise ValueError(
            "reference carries non-zero potentials: pass potentials='replace' (ratio tilt of the untilted "
            "P_0, its potentials discarded) or potentials='add' (ratios against its own slice marginals, added "
            "to its potentials)"
        )
    n, d = reference.n_slices, reference.slice_dim
    means_t, covs_t = _slice_targets(target_means, target_covs, n, d)
    if potentials == "add":
        base, A0, b0 = reference, reference.A, reference.b
    else:
        base = reference.with_potentials(np.zeros_like(reference.A), np.zeros_like(reference.b))
        A0, b0 = 0.0, 0.0
    m0, C0 = base.slice_marginals()
    eye = smoothing**2 * np.eye(d)
    Pt, P0 = np.linalg.inv(covs_t + eye), np.linalg.inv(C0 + eye)
    A = A0 + Pt - P0
    b = b0 + np.einsum("nij,nj->ni", Pt, means_t) - np.einsum("nij,nj->ni", P0, m0)
    return reference.with_potentials(0.5 * (A + np.swapaxes(A, 1, 2)), b)


# ----------------------------------------------------------------------------------------------------------
# divergences and the single correction field
# ----------------------------------------------------------------------------------------------------------
def _x_minus_log1p(e: np.ndarray) -> np.ndarray:
    """``e - log(1 + e)`` without cancellation for small ``e``."""
    out = e - np.log1p(e)
    small = np.abs(e) < 1e-4
    es = e[small]
    out[small] = es**2 / 2 - es**3 / 3 + es**4 / 4
    return out


def gaussian_kl(mean0, cov0, mean1, cov1) -> float:
    """``KL(N(mean0, cov0) || N(mean1, cov1))`` in closed form.

    ``1/2 [tr(C1^{-1} C0) - k - log det(C1^{-1} C0) + (m1 - m0)^T C1^{-1} (m1 - m0)]``, evaluated through the
    eigenvalues ``e`` of ``L1^{-1} (C0 - C1) L1^{-T}`` as ``1/2 sum(e - log1p(e))`` to avoid cancellation.
    """
    m0, m1 = _finite_array("mean0", mean0, 1), _finite_array("mean1", mean1, 1)
    C0, C1 = _finite_array("cov0", cov0, 2), _finite_array("cov1", cov1, 2)
    if not (m0.shape == m1.shape and C0.shape == C1.shape == (m0.size, m0.size)):
        raise ValueError("mean0, mean1 must be (k,) and cov0, cov1 must be (k, k) with one k")
    _spd("cov0", C0)
    L1 = _spd("cov1", C1)
    W = linalg.solve_triangular(L1, C0 - C1, lower=True)
    E = linalg.solve_triangular(L1, W.T, lower=True)
    e = np.linalg.eigvalsh(0.5 * (E + E.T))
    r = linalg.solve_triangular(L1, m1 - m0, lower=True)
    return float(0.5 * (_x_minus_log1p(e).sum() + r @ r))


def _same_family(p: GaussianTilt, q: GaussianTilt, names=("p", "q")) -> None:
    for name, t in zip(names, (p, q)):
        if not isinstance(t, GaussianTilt):
            raise TypeError(f"{name} must be a GaussianTilt, got {type(t).__name__}")
    if p.A.shape != q.A.shape or not (
        np.array_equal(p.ref_precision, q.ref_precision) and np.array_equal(p.ref_mean, q.ref_mean)
    ):
        raise ValueError(
            f"{names[0]} and {names[1]} must be tilts of the same reference with the same slicing"
        )


def tilt_kl(p: GaussianTilt, q: GaussianTilt) -> float:
    """Exact ``KL(p || q)`` between two tilts of one reference.

    Their precisions differ by ``D = blockdiag(A^q - A^p)`` exactly, so with ``C_p = L L^T`` and the
    eigenvalues ``e`` of ``L^T D L``: ``KL = 1/2 [sum(e - log1p(e)) + (m_q - m_p)^T J_q (m_q - m_p)]``.
    """
    _same_family(p, q)
    D = _with_blocks(None, q.A - p.A)
    L = p._cov_factor()
    e = np.linalg.eigvalsh(L.T @ D @ L)
    dm = q.mean - p.mean
    r = q._chol.T @ dm
    return float(0.5 * (_x_minus_log1p(e).sum() + r @ r))


@dataclass(frozen=True)
class CorrectionField:
    """``Delta(x) = -1/2 x^T Q x + c^T x`` with ``Q = blockdiag(A^Pi - A^*)``, ``c = b^Pi - b^*``.

    It is a sum of per-slice terms ``(psi_i - phi_i)(x_i)``: one scalar field carries the whole comparison.
    """

    Q_blocks: np.ndarray  # (N, d, d)
    c: np.ndarray  # (N, d)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        n, d = self.c.shape
        Xs = np.asarray(X, dtype=float).reshape(len(X), n, d)
        return (
            -0.5 * np.einsum("kni,nij,knj->k", Xs, self.Q_blocks, Xs)
            + Xs.reshape(len(X), -1) @ self.c.ravel()
        )


def correction_field(surrogate: GaussianTilt, lift: GaussianTilt) -> CorrectionField:
    """The single scalar correction field ``Delta = sum_i (psi_i - phi_i)`` between two tilts (item 1)."""
    _same_family(surrogate, lift, ("surrogate", "lift"))
    return CorrectionField(surrogate.A - lift.A, surrogate.b - lift.b)


def _log_mgf(delta: CorrectionField, law: GaussianTilt) -> float:
    """``log E_law[exp Delta]`` in closed form (natural parameters of ``law`` shifted by ``Delta``)."""
    J2 = _with_blocks(law.precision, delta.Q_blocks)
    h, h2 = law.linear_term, law.linear_term + delta.c.ravel()
    try:
        L2 = linalg.cholesky(J2, lower=True)
    except linalg.LinAlgError:
        return float("inf")
    logdet_ratio = 2 * (np.log(np.diag(law._chol)).sum() - np.log(np.diag(L2)).sum())
    return float(0.5 * (h2 @ linalg.cho_solve((L2, True), h2) - h @ law.mean + logdet_ratio))


def scalar_field_kl(surrogate: GaussianTilt, lift: GaussianTilt) -> dict[str, float]:
    """Closed-form terms of ``KL(Pi || P*) = E_Pi[Delta] - log E_{P*}[e^Delta]`` (item 1 of the digest).

    Returns ``{'E_pi_delta', 'log_E_star_exp_delta', 'kl'}``; ``kl`` equals :func:`tilt_kl` (up to round-off
    from the two large terms' cancellation).
    """
    delta = correction_field(surrogate, lift)
    m, C = surrogate.mean, surrogate.covariance
    Qf = _with_blocks(None, delta.Q_blocks)
    e_pi = -0.5 * (np.sum(Qf * C) + m @ Qf @ m) + delta.c.ravel() @ m
    lz = _log_mgf(delta, lift)
    return {"E_pi_delta": float(e_pi), "log_E_star_exp_delta": lz, "kl": float(e_pi - lz)}


def _logmeanexp(v: np.ndarray) -> float:
    mx = v.max()
    return float(mx + np.log(np.mean(np.exp(v - mx))))


def scalar_field_kl_mc(
    surrogate: GaussianTilt,
    lift: GaussianTilt,
    n_samples: int = 200_000,
    *,
    coupled: bool = True,
    batch_size: int = 20_000,
    random_state=None,
) -> float:
    """Monte Carlo ``E_Pi[Delta] - log E_{P*}[e^Delta]`` (the scalar-field identity, item 1).

    With ``coupled=True`` both laws are sampled from the same normals (``x = m + L z`` with Cholesky factors):
    common random numbers, so the small difference ``E_Pi[Delta] - E_{P*}[Delta]`` is estimated with small
    variance; each term stays an unbiased sample average (the log-mean-exp is consistent, bias ``O(1/n)``).
    """
    delta = correction_field(surrogate, lift)
    n_samples = _int_at_least("n_samples", n_samples, 2)
    batch_size = _int_at_least("batch_size", batch_size, 1)
    rng = np.random.default_rng(random_state)
    Lp, Ls = surrogate._cov_factor(), lift._cov_factor()
    d_pi, d_star = [], []
    for start in range(0, n_samples, batch_size):
        k = min(batch_size, n_samples - start)
        Z = rng.standard_normal((k, surrogate.mean.size))
        Zs = Z if coupled else rng.standard_normal(Z.shape)
        d_pi.append(delta(surrogate.mean + Z @ Lp.T))
        d_star.append(delta(lift.mean + Zs @ Ls.T))
    dp, ds = np.concatenate(d_pi), np.concatenate(d_star)
    # log-mean-exp is shift-invariant: centre at the sample mean so only the fluctuation of Delta enters
    return float(np.mean(dp - ds) - _logmeanexp(ds - ds.mean()))


def tv_mc(
    surrogate: GaussianTilt,
    lift: GaussianTilt,
    n_samples: int = 200_000,
    *,
    batch_size: int = 20_000,
    random_state=None,
) -> float:
    """Monte Carlo total variation ``TV(Pi, P*) = E_{P*}[(1 - dPi/dP*)_+]``.

    ``dPi/dP* = exp(Delta - log E_{P*}[e^Delta])`` with the normalizer in closed form.
    """
    delta = correction_field(surrogate, lift)
    n_samples = _int_at_least("n_samples", n_samples, 1)
    batch_size = _int_at_least("batch_size", batch_size, 1)
    lz = _log_mgf(delta, lift)
    rng = np.random.default_rng(random_state)
    L = lift._cov_factor()
    total = 0.0
    for start in range(0, n_samples, batch_size):
        k = min(batch_size, n_samples - start)
        X = lift.mean + rng.standard_normal((k, lift.mean.size)) @ L.T
        total += np.clip(1.0 - np.exp(delta(X) - lz), 0.0, None).sum()
    return float(total / n_samples)
