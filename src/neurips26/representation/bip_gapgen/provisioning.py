"""Repulsion-based allocation of non-colliding virtual identities on the hypersphere, inside the real subspace.

Paper: Ji, Shen, Jain, Liu, Liu, "Non-Colliding Biometric Identities for Digital Entities: Geometry, Capacity,
and Million-Scale Virtual Identity Provisioning" (BIP / GapGen), arXiv 2605.18238.

The paper's geometric insight: real identity embeddings concentrate in a low-dimensional subspace of the
recognizer's sphere and a generator can only realise embeddings there, so virtual identities must be packed into
the unclaimed gaps *inside* that subspace, at least a collision threshold away from every real identity and from
each other. The full text is not public to us; the allocator below is RECONSTRUCTED [R] from the abstract and the
digest (``shared/papers/bip-gapgen.md``), after hypersphere-dispersion work ("Keep your distance", arXiv 2502.08231):

1. subspace ``P`` = top-``q`` directions of the gallery's second moment (``q`` keeps ``variance_kept`` of the
   energy); candidates ``v = P a / ||a||`` with ``a ~ N(mu_R, Sigma_R)``, the Gaussian fit of the gallery's
   coordinates ``P^T r`` (on-manifold candidate generation);
2. repulsion: projected Riemannian gradient descent on the sphere of ``span(P)`` of the energy

       E(v) = sum_{r in N_R(v)} softplus(beta (cos(v, r) - tau_c + m))
            + sum_{v' in N_V(v)} softplus(beta (cos(v, v') - tau_v + m)),

   ``g_tan = g - (g.v) v``, ``v <- normalize(v - eta g_tan)``; neighbour lists ``N`` come from one blocked matrix
   product per round and hold every pair within ``delta`` of its threshold, and a candidate never moves more than
   ``delta`` from where its list was made, so the lists stay complete for the acceptance test;
3. hard acceptance: ``max_r cos(v, r) < tau_c - m`` and ``max_{v'} cos(v, v') < tau_v`` against the gallery, all
   previously accepted virtuals and the batch (greedy within the batch); rejected candidates carry over to the
   next round (at most ``max_rounds``);
4. incremental: each batch is repelled from the gallery and everything accepted before; there is no built-in cap.

[R] The digest's soft on-manifold penalty ``lambda ||(I - P P^T) v||^2`` is replaced by its ``lambda -> inf``
limit: virtuals live exactly in ``span(P)`` (the digest warns that a small lambda buys fake capacity in the
orthogonal complement). All optimiser arithmetic therefore runs in the ``q`` subspace coordinates, which is exact
for dot products with any vector because ``(P a) . x = a . (P^T x)``. ``n_steps = 0`` turns the allocator into
on-manifold rejection sampling (the digest's throughput baseline).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_random_state

from .geometry import IMPOSTOR_METHODS, check_unit_rows, impostor_threshold, real_subspace

_SAFETY = 1e-4  # float32 rounding allowance on list thresholds and acceptance tests
_CLEAR = 0.02  # rows this far below every threshold are not moved
_REFRESH = 4  # steps between re-selections of the pairs near the softplus knee


@dataclass
class RoundStats:
    """What one call to :meth:`IdentityProvisioner.provision` did."""

    n_accepted: int
    n_candidates: int
    n_rounds: int
    n_discarded: int
    seconds: float
    n_scanned: int = 0  # candidate rows compared against the whole pool (one blocked matmul row each)

    @property
    def accepted_per_scan(self) -> float:
        """Accepted identities per full scan of gallery + virtuals (the cost unit both methods pay)."""
        return self.n_accepted / self.n_scanned if self.n_scanned else math.nan

    @property
    def throughput(self) -> float:
        """Accepted identities per second."""
        return self.n_accepted / self.seconds if self.seconds > 0 else math.inf


class IdentityProvisioner(BaseEstimator):
    """Provision virtual identities that collide with no enrolled real identity and with no other virtual one.

    Parameters
    ----------
    margin : safety margin ``m`` in (0, 2): a virtual must satisfy ``cos(v, r) < tau_c - m`` for every real ``r``.
    far : false-accept rate in (0, 1) that sets ``tau_c`` (and ``tau_v``) from the gallery when they are None.
    tau_c, tau_v : collision thresholds (cosines in (-1, 1)); None = the ``(1 - far)`` impostor quantile.
    variance_kept : energy fraction in (0, 1] kept by the real subspace ``P``.
    threshold_method : how ``tau_c`` is found when it is None: ``"exact"`` (memory-bounded tiles) or ``"ann"``
        (faiss HNSW neighbour lists; for galleries of hundreds of thousands), see :func:`impostor_threshold`.
    batch_size : candidates optimised together (>= 1).
    n_steps : repulsion steps per round (>= 0; 0 = rejection sampling).
    step_size : largest angular move of a candidate per step, in (0, 1).
    delta : neighbour-list slack in (0, 1): pairs within ``delta`` of their threshold are listed; a candidate
        moves at most ``delta`` per round.
    beta : softplus sharpness (> 0).
    max_rounds : rounds a candidate may take part in (it is carried over while rejected) before it is discarded
        (>= 1).
    block : pool rows per blocked matrix product (>= 1).
    random_state : seed or ``numpy.random.RandomState``.

    Attributes
    ----------
    basis_ : (d, q) orthonormal basis of the real subspace.  subspace_ : :class:`RealSubspace`.
    tau_c_, tau_v_ : thresholds used.  identities_ : (m, d) every virtual provisioned so far.
    n_gallery_ : enrolled real identities (grows with :meth:`enroll`).  history_ : list of :class:`RoundStats`.
    """

    def __init__(
        self,
        margin: float = 0.02,
        *,
        far: float = 1e-4,
        tau_c: float | None = None,
        tau_v: float | None = None,
        variance_kept: float = 0.97,
        threshold_method: str = "exact",
        batch_size: int = 2048,
        n_steps: int = 8,
        step_size: float = 0.01,
        delta: float = 0.06,
        beta: float = 100.0,
        max_rounds: int = 2,
        block: int = 4096,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.margin = margin
        self.far = far
        self.tau_c = tau_c
        self.tau_v = tau_v
        self.variance_kept = variance_kept
        self.threshold_method = threshold_method
        self.batch_size = batch_size
        self.n_steps = n_steps
        self.step_size = step_size
        self.delta = delta
        self.beta = beta
        self.max_rounds = max_rounds
        self.block = block
        self.random_state = random_state

    # --- validation -----------------------------------------------------------------------------------
    def _check_params(self) -> None:
        def real(name: str, lo: float, hi: float, lo_open: bool = True, hi_open: bool = True) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
                raise TypeError(f"{name} must be a number, got {type(v).__name__}")
            v = float(v)
            ok = (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)
            if not (math.isfinite(v) and ok):
                lb, rb = ("(" if lo_open else "["), (")" if hi_open else "]")
                raise ValueError(f"{name} must be in {lb}{lo}, {hi}{rb}, got {v!r}")

        def integer(name: str, lo: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")

        real("margin", 0.0, 2.0)
        real("far", 0.0, 1.0)
        for name in ("tau_c", "tau_v"):
            if getattr(self, name) is not None:
                real(name, -1.0, 1.0)
        real("variance_kept", 0.0, 1.0, hi_open=False)
        if self.threshold_method not in IMPOSTOR_METHODS:
            raise ValueError(
                f"threshold_method must be one of {IMPOSTOR_METHODS}, got {self.threshold_method!r}"
            )
        real("step_size", 0.0, 1.0)
        real("delta", 0.0, 1.0)
        real("beta", 0.0, math.inf)
        integer("batch_size", 1)
        integer("n_steps", 0)
        integer("max_rounds", 1)
        integer("block", 1)

    # --- fitting --------------------------------------------------------------------------------------
    def fit(
        self, gallery: object, y: object = None, *, existing: object | None = None
    ) -> IdentityProvisioner:
        """Learn the real subspace, the on-manifold Gaussian and the thresholds from the enrolment gallery.

        ``gallery``: (n, d) unit rows. ``existing``: optional (m, d) unit rows of virtual identities provisioned
        earlier (kept as obstacles, at the virtual threshold, and listed first in ``identities_``).
        """
        self._check_params()
        R = check_unit_rows(gallery, "gallery")
        if R.shape[0] < 2:
            raise ValueError(f"gallery must have at least 2 rows, got {R.shape[0]}")
        self.subspace_ = real_subspace(R, self.variance_kept)
        P = self.subspace_.basis
        self.basis_ = P
        self.tau_c_ = (
            float(self.tau_c)
            if self.tau_c is not None
            else impostor_threshold(R, self.far, method=self.threshold_method)
        )
        self.tau_v_ = float(self.tau_v) if self.tau_v is not None else self.tau_c_
        if self.tau_c_ - float(self.margin) <= -1.0:
            raise ValueError(
                f"margin must be smaller than tau_c + 1 = {self.tau_c_ + 1:.4g}, got {self.margin!r}"
            )
        A = R @ P
        self.mean_ = A.mean(axis=0)
        cov = np.cov(A, rowvar=False) if A.shape[0] > 1 else np.eye(P.shape[1])
        w, U = np.linalg.eigh(np.atleast_2d(cov))
        self.cov_sqrt_ = U * np.sqrt(np.clip(w, 0.0, None))  # a = mean + cov_sqrt @ eps
        self._rng = check_random_state(self.random_state)
        d = R.shape[1]
        self.n_features_in_ = d
        self.n_gallery_ = R.shape[0]
        # pool of obstacles in subspace coordinates, with per-entry acceptance and energy thresholds
        self._pool = [A.astype(np.float32)]
        self._t_acc = [np.full(R.shape[0], self.tau_c_ - self.margin)]
        self._t_en = [np.full(R.shape[0], self.tau_c_ - self.margin)]
        self._virtual_coords: list[np.ndarray] = []
        self.identities_ = np.empty((0, d))
        self.history_: list[RoundStats] = []
        if existing is not None:
            E = check_unit_rows(existing, "existing", allow_empty=True)
            if E.shape[1] != d:
                raise ValueError(f"existing must have {d} columns like the gallery, got {E.shape[1]}")
            if E.shape[0]:
                self._add_virtuals(E @ P, E)
        return self

    def _add_virtuals(self, coords: np.ndarray, full: np.ndarray) -> None:
        self._pool.append(coords.astype(np.float32))
        self._t_acc.append(np.full(len(coords), self.tau_v_))
        self._t_en.append(np.full(len(coords), self.tau_v_ - self.margin))
        self.identities_ = np.vstack([self.identities_, full])

    def _consolidate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(self._pool) > 1:
            self._pool = [np.vstack(self._pool)]
            self._t_acc = [np.concatenate(self._t_acc)]
            self._t_en = [np.concatenate(self._t_en)]
        return self._pool[0], self._t_acc[0], self._t_en[0]

    def enroll(self, reals: object) -> IdentityProvisioner:
        """Enrol new real identities: later batches keep ``tau_c - margin`` away from them too.

        The subspace and thresholds stay as fitted; checking the new reals against the virtuals already issued is
        the caller's audit (:func:`count_collisions`).
        """
        check_is_fitted(self, "basis_")
        X = check_unit_rows(reals, "reals")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"reals must have {self.n_features_in_} columns, got {X.shape[1]}")
        self._pool.append((X @ self.basis_).astype(np.float32))
        self._t_acc.append(np.full(len(X), self.tau_c_ - self.margin))
        self._t_en.append(np.full(len(X), self.tau_c_ - self.margin))
        self.n_gallery_ += X.shape[0]
        return self

    # --- sampling -------------------------------------------------------------------------------------
    def _sample_coords(self, n: int, rng: np.random.RandomState) -> np.ndarray:
        a = self.mean_ + rng.standard_normal((n, self.mean_.size)) @ self.cov_sqrt_.T
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    def sample_naive(self, n: int, random_state: int | np.random.RandomState | None = None) -> np.ndarray:
        """Naive on-manifold sampling (no repulsion, no check): ``n`` unit rows ``P a / ||a||``, ``a ~ N(mu, Sigma)``."""
        check_is_fitted(self, "basis_")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        return self._to_full(self._sample_coords(int(n), check_random_state(random_state)))

    def _to_full(self, coords: np.ndarray) -> np.ndarray:
        V = coords @ self.basis_.T
        return V / np.linalg.norm(V, axis=1, keepdims=True)

    # --- the allocator --------------------------------------------------------------------------------
    def _neighbours(
        self, X: np.ndarray, pool: np.ndarray, t_list: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """All (candidate, pool) pairs with float32 cosine > ``t_list[pool]`` (one blocked matmul)."""
        X32 = X.astype(np.float32)
        ii, jj = [], []
        for b in range(0, pool.shape[0], self.block):
            S = X32 @ pool[b : b + self.block].T
            i, j = np.nonzero(S > t_list[None, b : b + self.block])
            ii.append(i)
            jj.append(j + b)
        if not ii:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(ii), np.concatenate(jj)

    def _repel(
        self,
        X: np.ndarray,
        ii: np.ndarray,
        jj: np.ndarray,
        pool: np.ndarray,
        t_en: np.ndarray,
        t_acc: np.ndarray,
        within_t_en: float,
    ) -> np.ndarray:
        """``n_steps`` of projected Riemannian gradient descent of E (module docstring) over the listed pool pairs
        and the close pairs inside the batch; every row stays within ``delta`` of where it started. Rows already
        clear of every threshold by ``_CLEAR`` are held still (they act as obstacles only)."""
        beta = float(self.beta)
        n = len(X)
        Yp = pool[jj]  # float32 partners, gathered once per round
        c = np.einsum("ij,ij->i", X.astype(np.float32)[ii], Yp)
        active = np.zeros(n, bool)
        active[ii[c - t_acc[jj] > -_CLEAR]] = True
        G0 = X @ X.T
        np.fill_diagonal(G0, -np.inf)
        active |= G0.max(axis=1) - self.tau_v_ > -_CLEAR
        if not active.any():
            return X
        act_idx = np.flatnonzero(active)
        m = act_idx.size
        pos = np.full(n, -1)
        pos[act_idx] = np.arange(m)
        keep = active[ii]
        ii, jj, c, Yp = pos[ii[keep]], jj[keep], c[keep], Yp[keep]
        tp = t_en[jj]
        cut = 5.0 / beta  # softplus'(beta x) = beta sigmoid(beta x) < beta e^-5 below this
        Xa = X[act_idx]
        X0 = Xa.copy()
        moving = np.ones(m, bool)
        step = 0
        while step < self.n_steps and moving.any():
            # every _REFRESH steps keep only the pairs that can reach the softplus knee before the next refresh
            # (a step moves a row by at most step_size, so a pool cosine by at most step_size, a batch one by 2x)
            k = min(_REFRESH, self.n_steps - step)
            if step:
                c = np.einsum("ij,ij->i", Xa.astype(np.float32)[ii], Yp)
            hp = c > tp - cut - k * self.step_size
            pi, pY, pt = ii[hp], Yp[hp].astype(np.float64), tp[hp]
            G = Xa @ X.T
            G[np.arange(m), act_idx] = -np.inf
            qi, qj = np.nonzero(G > within_t_en - cut - 2 * k * self.step_size)
            ptr_p = np.concatenate([[0], np.cumsum(np.bincount(pi, minlength=m))])
            ptr_q = np.concatenate([[0], np.cumsum(np.bincount(qi, minlength=m))])
            op = np.argsort(pi, kind="stable")
            cols_p = np.arange(len(pi))[op]
            for _ in range(k):
                wp = beta * expit(beta * (np.einsum("ij,ij->i", Xa[pi], pY) - pt))
                wq = beta * expit(beta * (np.einsum("ij,ij->i", Xa[qi], X[qj]) - within_t_en))
                g = sparse.csr_matrix((wp[op], cols_p, ptr_p), shape=(m, len(pi))) @ pY
                g += sparse.csr_matrix((wq, qj, ptr_q), shape=(m, n)) @ X
                g -= np.sum(g * Xa, axis=1, keepdims=True) * Xa  # tangent to the sphere
                gn = np.linalg.norm(g, axis=1, keepdims=True)
                Xn = Xa - (self.step_size / np.maximum(gn, beta / 2.0)) * g
                Xn /= np.linalg.norm(Xn, axis=1, keepdims=True)
                ok = moving & (np.linalg.norm(Xn - X0, axis=1) <= self.delta)
                Xa[ok] = Xn[ok]
                X[act_idx] = Xa
                moving &= ok
                step += 1
        return X

    def provision(self, n_new: int, *, max_candidates: int | None = None) -> np.ndarray:
        """Provision ``n_new`` further virtual identities (unit rows, shape (n_new, d)) and append them to
        ``identities_``. With ``max_candidates`` the run stops after that many candidates and may return fewer.
        """
        check_is_fitted(self, "basis_")
        if isinstance(n_new, bool) or not isinstance(n_new, (int, np.integer)) or n_new < 0:
            raise ValueError(f"n_new must be a non-negative integer, got {n_new!r}")
        if max_candidates is not None and (
            isinstance(max_candidates, bool)
            or not isinstance(max_candidates, (int, np.integer))
            or max_candidates < 1
        ):
            raise ValueError(f"max_candidates must be a positive integer or None, got {max_candidates!r}")
        t0 = time.perf_counter()
        rng = self._rng
        q = self.basis_.shape[1]
        accepted: list[np.ndarray] = []
        n_acc = n_cand = n_rounds = n_disc = n_scan = 0
        carry = np.empty((0, q))
        carry_age = np.empty(0, int)
        idle_rounds = 0
        budget_left = math.inf if max_candidates is None else int(max_candidates)
        while n_acc < n_new:
            need = n_new - n_acc
            n_fresh = min(self.batch_size - len(carry), int(math.ceil(1.25 * need)) + 8, budget_left)
            n_fresh = max(int(n_fresh), 0)
            if n_fresh == 0 and len(carry) == 0:
                break
            X = np.vstack([carry, self._sample_coords(n_fresh, rng)])
            age = np.concatenate([carry_age, np.zeros(n_fresh, int)])
            n_cand += n_fresh
            budget_left -= n_fresh
            n_rounds += 1
            pool, t_acc, t_en = self._consolidate()
            slack = self.delta if self.n_steps > 0 else 0.0
            t_list = np.minimum(t_acc, t_en) - slack - _SAFETY
            ii, jj = self._neighbours(X, pool, t_list)
            n_scan += len(X)
            if self.n_steps > 0:
                X = self._repel(X, ii, jj, pool, t_en, t_acc, self.tau_v_ - self.margin)
            # hard acceptance against the pool (lists are complete: no row moved more than delta)
            c = np.einsum("ij,ij->i", X[ii], pool[jj].astype(np.float64))
            bad = np.zeros(len(X), bool)
            bad[ii[c >= t_acc[jj] - _SAFETY]] = True
            # greedy acceptance within the batch
            ok = np.flatnonzero(~bad)
            keep = np.zeros(len(X), bool)
            keep[ok] = True
            if ok.size > 1:
                G = X[ok] @ X[ok].T
                a_idx, b_idx = np.nonzero(np.triu(G >= self.tau_v_ - _SAFETY, k=1))
                for a, b in zip(ok[a_idx], ok[b_idx], strict=True):  # conflicts only (few)
                    if keep[a]:
                        keep[b] = False
            acc = X[keep][:need]
            if len(acc):
                accepted.append(acc)
                self._add_virtuals(acc, self._to_full(acc))
                n_acc += len(acc)
                idle_rounds = 0
            else:
                idle_rounds += 1
                if idle_rounds >= 50 and max_candidates is None:
                    raise RuntimeError(
                        f"no candidate accepted in 50 rounds after {n_acc} of {n_new}: the subspace looks saturated "
                        f"at tau_c={self.tau_c_:.4g}, tau_v={self.tau_v_:.4g}, margin={self.margin}"
                    )
            rest = ~keep
            age = age[rest] + 1
            carry, n_old = X[rest], len(age)
            alive = age < self.max_rounds
            carry, carry_age = carry[alive], age[alive]
            n_disc += n_old - len(carry_age)
            if self.n_steps == 0:  # rejection sampling never retries a rejected point
                n_disc += len(carry)
                carry, carry_age = np.empty((0, q)), np.empty(0, int)
        n_disc += len(carry)
        out = (
            self.identities_[len(self.identities_) - n_acc :] if n_acc else np.empty((0, self.n_features_in_))
        )
        self.history_.append(RoundStats(n_acc, n_cand, n_rounds, n_disc, time.perf_counter() - t0, n_scan))
        return out.copy()


def provision_identities(
    gallery: object,
    n_new: int,
    margin: float = 0.02,
    *,
    existing: object | None = None,
    far: float = 1e-4,
    tau_c: float | None = None,
    tau_v: float | None = None,
    random_state: int | np.random.RandomState | None = None,
    **kwargs: object,
) -> np.ndarray:
    """Provision ``n_new`` non-colliding virtual identities for ``gallery`` (the functional form of
    :class:`IdentityProvisioner`; see it for the method and the remaining keyword arguments).

    Returns an (n_new, d) array of unit rows with ``cos(v, r) < tau_c - margin`` for every gallery row ``r`` and
    ``cos(v, v') < tau_v`` for every other returned or ``existing`` virtual ``v'``. Incremental enrolment: pass the
    identities issued before as ``existing``.
    """
    est = IdentityProvisioner(
        margin,
        far=far,
        tau_c=tau_c,
        tau_v=tau_v,
        random_state=random_state,
        **kwargs,  # type: ignore[arg-type]
    )
    return est.fit(gallery, existing=existing).provision(n_new)


def uniform_sphere(n: int, d: int, random_state: int | np.random.RandomState | None = None) -> np.ndarray:
    """``n`` directions uniform on the full sphere ``S^{d-1}`` (the off-manifold baseline)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    Z = check_random_state(random_state).standard_normal((int(n), int(d)))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True)
