"""Source-level sketches and relation-level observability (ObsAlign, reconstructed; see the package docstring).

A source never sends raw data, only, per modality m and class c, the count ``n_smc``, the embedding sum and the
sum of squared norms, and per modality pair (m, m') and class c the co-observation count and the sum of paired
cosines. These are sums, so sketches of disjoint shards add up to the sketch of the pooled data (sufficiency).

Observability of a relation r = (m, m', c), from the pooled and per-source statistics:

    b_r = B_r / (B_r + kappa_b)                    B_r = sum_s n_s(mm')c         (bridge evidence)
    a_r = A_r / (A_r + kappa_a)                    A_r = min(sum_s n_smc, sum_s n_sm'c)   (side support)
    k_r = clip((qbar_r + 1) / 2, 0, 1) * exp(-Var_s(q_s(mm')c) / eta)             (cross-modal consistency;
                                                     no co-observation: qbar_r = 0, Var = 0, so k_r = 1/2)
    u_r = exp(-(U_mc + U_m'c) / (2 lambda))        U_mc = sum_s w_s ||mu_smc - mubar_mc||^2 / d + vbar_mc / N_mc
    o_r = [b_r + (1 - b_r) rho_side a_r] * k_r * u_r   in [0, 1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class SourceSketch:
    """Sufficient statistics of one source's embeddings (K modalities, C classes, d dimensions); all sums."""

    counts: np.ndarray  # (K, C)        n_smc
    sums: np.ndarray  # (K, C, d)       sum of f_m(x) over samples of class c that observe m
    sq_norms: np.ndarray  # (K, C)      sum of ||f_m(x)||^2
    pair_counts: np.ndarray  # (K, K, C)  samples of class c observing both m and m'
    pair_cos: np.ndarray  # (K, K, C)     sum of cos(f_m(x), f_m'(x)) over them

    def __add__(self, other: SourceSketch) -> SourceSketch:
        if self.sums.shape != other.sums.shape:
            raise ValueError(f"sketch shapes differ: {self.sums.shape} vs {other.sums.shape}")
        return SourceSketch(*(getattr(self, f) + getattr(other, f) for f in _FIELDS))

    @property
    def prototypes(self) -> np.ndarray:
        """Class prototypes mu_smc (K, C, d); rows with no sample are 0."""
        return self.sums / np.maximum(self.counts, 1)[..., None]

    @property
    def n_bytes(self) -> int:
        return int(sum(getattr(self, f).nbytes for f in _FIELDS))


_FIELDS = ("counts", "sums", "sq_norms", "pair_counts", "pair_cos")


def compute_sketch(
    embeddings: np.ndarray, observed: np.ndarray, y: np.ndarray, n_classes: int
) -> SourceSketch:
    """Sketch of one source from its embeddings ``(n, K, d)``, the observed mask ``(n, K)`` and labels ``(n,)``.

    Embeddings of unobserved modalities are ignored (they may hold anything, e.g. zeros).
    """
    emb = np.asarray(embeddings, dtype=np.float64)
    obs = np.asarray(observed, dtype=bool)
    y = np.asarray(y)
    if emb.ndim != 3:
        raise ValueError(f"embeddings must be (n, K, d), got shape {emb.shape}")
    n, K, d = emb.shape
    if obs.shape != (n, K):
        raise ValueError(f"observed must have shape {(n, K)}, got {obs.shape}")
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise ValueError(f"n_classes must be a positive integer, got {n_classes!r}")
    if n and (y.min() < 0 or y.max() >= n_classes or not np.issubdtype(y.dtype, np.integer)):
        raise ValueError(f"y must hold integer labels in [0, {n_classes - 1}]")
    if not np.all(np.isfinite(emb[obs])):
        raise ValueError("embeddings of observed modalities must be finite")
    onehot = np.eye(n_classes)[y] if n else np.zeros((0, n_classes))  # (n, C)
    w = obs[:, :, None] * onehot[:, None, :]  # (n, K, C)
    counts = w.sum(0)
    sums = np.einsum("nkc,nkd->kcd", w, emb)
    sq_norms = np.einsum("nkc,nk->kc", w, (emb**2).sum(-1))
    unit = emb / np.maximum(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12)
    cos = np.einsum("nkd,njd->nkj", unit, unit)  # (n, K, K)
    both = obs[:, :, None] & obs[:, None, :]
    pair_counts = np.einsum("nkj,nc->kjc", both.astype(float), onehot)
    pair_cos = np.einsum("nkj,nc->kjc", both * cos, onehot)
    return SourceSketch(counts, sums, sq_norms, pair_counts, pair_cos)


@dataclass
class Observability:
    """Relation-level observability ``o`` (K, K, C) and its four factors (symmetric in m, m'; diagonal = 1)."""

    o: np.ndarray
    bridge: np.ndarray
    side: np.ndarray
    consistency: np.ndarray
    certainty: np.ndarray
    uncertainty: np.ndarray  # U_mc, (K, C)

    def relations(self) -> list[tuple[int, int, int]]:
        """The off-diagonal relations (m < m', c)."""
        K, _, C = self.o.shape
        return [(m, j, c) for m in range(K) for j in range(m + 1, K) for c in range(C)]


def observability(
    sketches: Sequence[SourceSketch],
    *,
    kappa_bridge: float = 20.0,
    kappa_side: float = 20.0,
    eta: float = 0.05,
    lam: float | None = None,
    rho_side: float = 0.3,
) -> Observability:
    """Observability of every relation (m, m', c) from the sources' sketches (``lam=None``: median U)."""
    if len(sketches) == 0:
        raise ValueError("sketches must hold at least one source sketch")
    for name, v in [("kappa_bridge", kappa_bridge), ("kappa_side", kappa_side), ("eta", eta)]:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    if lam is not None and not (isinstance(lam, (int, float)) and lam > 0 and math.isfinite(lam)):
        raise ValueError(f"lam must be None or a positive finite number, got {lam!r}")
    if not isinstance(rho_side, (int, float)) or not 0 <= rho_side <= 1:
        raise ValueError(f"rho_side must be in [0, 1], got {rho_side!r}")
    for i, s in enumerate(sketches):
        if not isinstance(s, SourceSketch):
            raise TypeError(f"sketches[{i}] must be a SourceSketch, got {type(s).__name__}")
        if (s.counts < 0).any() or (s.pair_counts < 0).any():
            raise ValueError(f"sketches[{i}] has negative counts")
        if (s.pair_counts > np.minimum(s.counts[:, None, :], s.counts[None, :, :]) + 1e-9).any():
            raise ValueError(f"sketches[{i}] has more co-observations than observations (corrupt sketch)")
    pooled = sketches[0]
    for s in sketches[1:]:
        pooled = pooled + s
    K, C, d = pooled.sums.shape
    B = pooled.pair_counts
    bridge = B / (B + kappa_bridge)
    N = pooled.counts  # (K, C)
    A = np.minimum(N[:, None, :], N[None, :, :])
    side = A / (A + kappa_side)
    # consistency: count-weighted mean paired cosine and its between-source variance
    qbar = pooled.pair_cos / np.maximum(B, 1)
    var_q = np.zeros_like(qbar)
    for s in sketches:
        qs = s.pair_cos / np.maximum(s.pair_counts, 1)
        var_q += s.pair_counts * (qs - qbar) ** 2
    var_q /= np.maximum(B, 1)
    # with no co-observation (B_r = 0) qbar_r = 0 and Var = 0: no evidence either way, k_r = 1/2, so side support
    # alone still gives the digest's weak trust rho_side * a_r * k_r * u_r
    consistency = np.clip((qbar + 1) / 2, 0, 1) * np.exp(-var_q / eta)
    # prototype uncertainty: between-source dispersion + within-source variance / N
    mubar = pooled.sums / np.maximum(N, 1)[..., None]
    disp = np.zeros((K, C))
    within = np.zeros((K, C))
    for s in sketches:
        ws = s.counts / np.maximum(N, 1)
        mu = s.prototypes
        disp += ws * ((mu - mubar) ** 2).sum(-1) / d
        within += ws * np.maximum(s.sq_norms / np.maximum(s.counts, 1) - (mu**2).sum(-1), 0) / d
    U = np.where(N > 0, disp + within / np.maximum(N, 1), np.inf)
    finite = U[np.isfinite(U)]
    scale = lam if lam is not None else (float(np.median(finite)) if finite.size else 1.0)
    scale = max(scale, 1e-12)
    Ur = U[:, None, :] + U[None, :, :]
    certainty = np.where(np.isfinite(Ur), np.exp(-Ur / (2 * scale)), 0.0)
    o = (bridge + (1 - bridge) * rho_side * side) * consistency * certainty
    eye = np.eye(K, dtype=bool)[:, :, None]
    o = np.where(eye, 1.0, np.clip(o, 0.0, 1.0))
    return Observability(o, bridge, side, consistency, certainty, U)
