"""Noisy alignment: the margin criterion, the graph-level robustness radius and margin training.

Reconstructed [R] definitions (the paper's full text is not available; the digest's definitions are ours and
are kept in this one module). Given source graphs ``G_1..G_m`` and an embedding ``f``:

- alignment margin (definition 2): ``gamma_i(G~) = min_{j != i} ||f(G~) - f(G_j)|| - ||f(G~) - f(G_i)||``;
  ``f`` *aligns* ``G~`` to its source when ``gamma_i(G~) > 0``. The expressivity score is the rate of
  ``gamma > 0`` over identifiable noisy copies (:mod:`.atlas` decides identifiability exactly).
- zero noise (definition 3): ``G~ ~= G_i`` so ``gamma_i = delta_i`` below, and alignment holds iff
  ``f(G_i) != f(G_j)`` for all ``j``, which is the isomorphism-test notion (compare with the WL hash).
- separation gap ``delta_i = min_{j != i} ||f(G_i) - f(G_j)||`` and robustness radius (definition 4): if
  ``||f(G~) - f(G_i)|| <= B_i(k)`` for every ``G~`` within ``k`` edge flips of ``G_i``, then every such ``G~``
  with ``B_i(k) < delta_i / 2`` is aligned (triangle inequality). With a per-flip Lipschitz constant ``L``,
  ``r_i = delta_i / (2 L)``.
- provable bound for GIN (our derivation of the digest's layer-wise bound): with ``Z = ((1+eps) I + A) H``,
  ``Z' - Z = ((1+eps) I + A')(H' - H) + (A' - A) H`` so the node-state error obeys
  ``e_{l+1} <= Lip(MLP_l) * (a_l e_l + b_l)`` with ``a_l = 1 + |eps| + min(||A||_2 + sqrt(2k), dmax + k,
  n - 1)`` (the perturbed operator norm) and ``b_l = min(sqrt(2k) ||H^l||_F, k sqrt(r_1^2 + r_2^2))``
  (``r_1 >= r_2`` the two largest row norms of ``H^l``), ``Lip(MLP) = prod ||W||_2``. The sum readout adds
  ``sqrt(n)``; L2 normalisation maps a displacement ``e = ||x - y||`` to at most
  ``min(2, 2 e / |x|, e / sqrt(|x| (|x| - e)))`` (the last from ``2 - 2 cos = ||x - y||^2 / (|x||y|)`` minus
  ``(|x| - |y|)^2 / (|x||y|)``).
- vacuity: a triangle-inequality certificate of radius >= 1 needs ``B_i(1) < delta_i / 2``, but when another
  source ``G_j`` is one flip from ``G_i``, ``B_i(1) >= ||f(G_j) - f(G_i)|| >= delta_i`` for *every* ``f``; on the
  digest's random 7-node atlas families almost every source has such a neighbour, so no sound bound of this kind
  can certify them (:func:`sources_with_neighbour_at` counts them).
- empirical Lipschitz constant: the largest ``||f(G~) - f(G_i)||`` over all single flips of ``G_i``
  (tighter, not certified).
- margin training (definition 6): ``L_margin = E_{G~ ~ N(G_i)} relu(gamma0 - gamma_i(G~))`` added to a
  contrastive separation loss; DropEdge augmentation is the baseline.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from .gnn import DenseGNN, _check_int, all_single_flips

__all__ = [
    "alignment_margins",
    "separation_gaps",
    "robustness_radius",
    "zero_noise_alignment",
    "gin_flip_bound",
    "certified_flip_radius",
    "empirical_flip_lipschitz",
    "margin_loss",
    "train_alignment",
    "project_spectral_norm",
    "sources_with_neighbour_at",
]


def _as_2d(name: str, x: torch.Tensor | np.ndarray) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (rows are embeddings), got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return t


def alignment_margins(
    noisy: torch.Tensor | np.ndarray, source: torch.Tensor | np.ndarray, family: torch.Tensor | np.ndarray
) -> torch.Tensor:
    """``gamma_i(G~) = min_{j != i} ||f(G~) - f(G_j)|| - ||f(G~) - f(G_i)||`` for each noisy copy.

    Parameters
    ----------
    noisy : (N, d) embeddings ``f(G~)`` of the noisy copies.
    source : (N,) integer position of each copy's source in ``family``.
    family : (m, d) embeddings ``f(G_1..G_m)`` of the source graphs, m >= 2.

    Differentiable in ``noisy`` and ``family`` (used by :func:`margin_loss`).
    """
    noisy, family = _as_2d("noisy", noisy), _as_2d("family", family)
    if family.shape[0] < 2:
        raise ValueError("family must hold at least 2 source graphs")
    if noisy.shape[1] != family.shape[1]:
        raise ValueError(
            f"noisy and family must have the same dimension, got {noisy.shape[1]} and {family.shape[1]}"
        )
    src = torch.as_tensor(source)
    if src.shape != (noisy.shape[0],) or src.dtype.is_floating_point:
        raise ValueError(f"source must be an integer array of shape ({noisy.shape[0]},)")
    if (src < 0).any() or (src >= family.shape[0]).any():
        raise ValueError(f"source must index family, i.e. lie in [0, {family.shape[0] - 1}]")
    src = src.long()
    d = torch.cdist(noisy, family, compute_mode="donot_use_mm_for_euclid_dist")  # (N, m)
    own = d.gather(1, src[:, None])[:, 0]
    others = d.scatter(1, src[:, None], math.inf).min(dim=1).values
    return others - own


def separation_gaps(family: torch.Tensor | np.ndarray) -> torch.Tensor:
    """``delta_i = min_{j != i} ||f(G_i) - f(G_j)||`` (the zero-noise margin of every source graph)."""
    family = _as_2d("family", family)
    if family.shape[0] < 2:
        raise ValueError("family must hold at least 2 source graphs")
    return alignment_margins(family, torch.arange(family.shape[0]), family)


def robustness_radius(
    gaps: np.ndarray | torch.Tensor, lipschitz: np.ndarray | torch.Tensor | float
) -> np.ndarray:
    """``r_i = delta_i / (2 L_i)`` (definition 4), in edge flips; ``L`` scalar or per graph, all > 0."""
    g = np.asarray(gaps, dtype=float)
    L = np.broadcast_to(np.asarray(lipschitz, dtype=float), g.shape)
    if not np.isfinite(g).all() or (g < 0).any():
        raise ValueError("gaps must be finite and >= 0")
    if not np.isfinite(L).all() or (L <= 0).any():
        raise ValueError("lipschitz must be finite and > 0")
    return g / (2.0 * L)


def zero_noise_alignment(
    model: DenseGNN,
    A: torch.Tensor,
    X: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    tol: float = 1e-9,
    random_state: int | None = 0,
) -> np.ndarray:
    """Definition 3: whether ``f`` aligns a randomly relabelled copy of each source to its source.

    The copy is isomorphic to its source, so this measures ``gamma_i > tol`` at zero noise; it holds iff
    ``f(G_i)`` differs from every other ``f(G_j)`` (up to the float tolerance ``tol``).
    """
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite float >= 0, got {tol!r}")
    if not isinstance(A, torch.Tensor) or A.ndim != 3 or A.shape[0] < 2:
        raise ValueError(
            f"A must be a (B, n, n) tensor with B >= 2 source graphs, got {getattr(A, 'shape', type(A))}"
        )
    B, n, _ = A.shape
    if mask is None:
        mask = torch.ones(B, n, dtype=A.dtype)
    if X is None:
        X = torch.ones(B, n, model.mlps[0][0].in_features, dtype=A.dtype)
    g = torch.Generator().manual_seed(0 if random_state is None else int(random_state))
    # permute the real nodes of each graph among themselves (padding stays at the end)
    keys = torch.rand(B, n, generator=g, dtype=torch.float64) + 2.0 * (1 - mask)
    perm = keys.argsort(dim=1)
    rows = torch.arange(B)[:, None]
    Ap = A[rows[:, :, None], perm[:, :, None], perm[:, None, :]]
    with torch.no_grad():
        fam = model(A, X, mask)
        copy = model(Ap, X[rows, perm], mask[rows, perm])
        gamma = alignment_margins(copy, torch.arange(B), fam)
    return (gamma > tol).numpy()


def _mlp_lipschitz(model: DenseGNN) -> list[float]:
    return [
        float(
            np.prod(
                [
                    torch.linalg.matrix_norm(m.weight.detach(), ord=2).item()
                    for m in mlp
                    if hasattr(m, "weight")
                ]
            )
        )
        for mlp in model.mlps
    ]


def gin_flip_bound(
    model: DenseGNN, A: torch.Tensor, n_flips: np.ndarray | list[int] | int, X: torch.Tensor | None = None
) -> np.ndarray:
    """A provable bound ``B_i(k) >= ||f(G~) - f(G_i)||`` over every ``G~`` within ``k`` edge flips of ``G_i``.

    Follows the layer-wise recursion in the module docstring (GIN, sum readout, optional L2 normalisation).
    ``A`` is (B, n, n) with every node real (no padding); returns (B, K) for the K flip counts.

    The recursion multiplies ``prod ||W||_2`` per layer by the perturbed aggregation norm, so with unconstrained
    weights it exceeds the embedding's norm and, for a normalised model (``DenseGNN()``'s default), saturates
    at the trivial 2.0 (the unit sphere's diameter): every certified radius is then 0. A :class:`UserWarning`
    says so when it happens at the smallest flip count asked for. For a non-trivial certificate cap the
    layers' Lipschitz constants, the control the certificate needs: :func:`project_spectral_norm`
    (``project_spectral_norm(DenseGNN(), 0.05)`` certifies radius >= 1 on graphs far apart in edit distance)
    or ``train_alignment(..., spectral_norm=...)`` for a trained model.
    """
    if not isinstance(model, DenseGNN) or model.conv != "gin" or model.readout != "sum":
        raise ValueError("model must be a DenseGNN with conv='gin' and readout='sum'")
    ks = np.atleast_1d(np.asarray(n_flips))
    if ks.ndim != 1 or not np.issubdtype(ks.dtype, np.integer) or (ks < 0).any():
        raise ValueError(f"n_flips must be non-negative integers, got {n_flips!r}")
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (B, n, n), got {tuple(A.shape)}")
    B, n, _ = A.shape
    if X is None:
        X = torch.ones(B, n, model.mlps[0][0].in_features, dtype=A.dtype)
    with torch.no_grad():
        states = model.node_states(A, X)
        g = torch.cat([H.sum(1) for H in states[1:]], dim=-1)
        gnorm = g.norm(dim=-1).numpy()  # (B,)
        opA = torch.linalg.eigvalsh(A.to(torch.float64)).abs().max(dim=-1).values.numpy()
        dmax = A.sum(-1).max(dim=-1).values.numpy()
        fro = [H.norm(dim=(1, 2)).numpy() for H in states]
        top2 = [H.norm(dim=2).topk(min(2, n), dim=1).values.square().sum(1).sqrt().numpy() for H in states]
    lips = _mlp_lipschitz(model)
    k = ks[None, :].astype(float)  # (1, K)
    a = 1.0 + abs(model.eps) + np.minimum(np.minimum(opA[:, None] + np.sqrt(2 * k), dmax[:, None] + k), n - 1)
    e = np.zeros((B, len(ks)))
    read_sq = np.zeros_like(e)
    for layer in range(model.n_layers):
        b = np.minimum(np.sqrt(2 * k) * fro[layer][:, None], k * top2[layer][:, None])
        e = lips[layer] * (a * e + b)
        read_sq += n * e**2  # ||1^T (H' - H)|| <= sqrt(n) ||H' - H||_F
    bound = np.sqrt(read_sq)
    if model.normalize:
        # ||x/|x| - y/|y|||^2 = 2 - 2 cos <= ||x - y||^2 / (|x| |y|) and |y| >= |x| - e; 2 e / |x| also holds
        x = np.maximum(gnorm[:, None], 1e-300)
        with np.errstate(divide="ignore", invalid="ignore"):
            tight = np.where(bound < x, bound / np.sqrt(x * np.maximum(x - bound, 1e-300)), np.inf)
        bound = np.minimum(np.minimum(2.0, 2.0 * bound / x), tight)
        positive = ks > 0
        if positive.any():
            first = int(np.flatnonzero(positive)[np.argmin(ks[positive])])
            trivial = int((bound[:, first] >= 2.0).sum())
            if trivial:
                warnings.warn(
                    f"gin_flip_bound: the provable bound is the trivial 2.0 (the unit sphere's diameter) for "
                    f"{trivial} of {B} graphs at k = {int(ks[first])} flip(s), so their certified radius is 0; "
                    "cap the layers' Lipschitz constants (project_spectral_norm(model, max_norm), or "
                    "train_alignment(..., spectral_norm=...)) for a non-trivial certificate",
                    UserWarning,
                    stacklevel=2,
                )
    bound[:, ks == 0] = 0.0
    return bound


def certified_flip_radius(
    model: DenseGNN, A: torch.Tensor, gaps: np.ndarray | torch.Tensor, max_flips: int | None = None
) -> np.ndarray:
    """Largest ``k`` such that every graph within ``k`` edge flips of ``G_i`` is provably aligned.

    That is the largest ``k`` with ``gin_flip_bound(k) < delta_i / 2``; 0 when even one flip is not
    certified (the common case for sum-aggregation GNNs; digest pitfall). With ``DenseGNN()``'s unconstrained
    default weights the bound is the trivial 2.0 and this warns (see :func:`gin_flip_bound`); cap the weights'
    spectral norm first (:func:`project_spectral_norm`).
    """
    n = A.shape[1]
    max_flips = n * (n - 1) // 2 if max_flips is None else _check_int("max_flips", max_flips, 1)
    gaps = np.asarray(gaps, dtype=float)
    if gaps.shape != (A.shape[0],) or not np.isfinite(gaps).all():
        raise ValueError(f"gaps must be a finite array of shape ({A.shape[0]},)")
    ks = np.arange(1, max_flips + 1)
    ok = gin_flip_bound(model, A, ks) < gaps[:, None] / 2.0
    # bounds grow with k, so the certified set is a prefix; count it robustly anyway
    return np.where(ok.all(1), max_flips, np.argmin(ok, axis=1))


def empirical_flip_lipschitz(model: DenseGNN, A: torch.Tensor, X: torch.Tensor | None = None) -> np.ndarray:
    """Per graph, ``max ||f(G~) - f(G_i)||`` over all single edge flips ``G~`` of ``G_i`` (uncertified).

    ``A`` is (B, n, n) with every node real.
    """
    if not isinstance(model, DenseGNN):
        raise TypeError(f"model must be a DenseGNN, got {type(model).__name__}")
    if not isinstance(A, torch.Tensor) or A.ndim != 3 or A.shape[1] != A.shape[2] or A.shape[1] < 2:
        raise ValueError(f"A must have shape (B, n, n) with n >= 2, got {tuple(getattr(A, 'shape', ()))}")
    B, n, _ = A.shape
    if X is None:
        X = torch.ones(B, n, model.mlps[0][0].in_features, dtype=A.dtype)
    flips = torch.stack([all_single_flips(a) for a in A])  # (B, P, n, n)
    P = flips.shape[1]
    with torch.no_grad():
        base = model(A, X)
        emb = model(flips.reshape(B * P, n, n), X.repeat_interleave(P, dim=0)).reshape(B, P, -1)
    return (emb - base[:, None]).norm(dim=-1).max(dim=1).values.numpy()


def sources_with_neighbour_at(distances: np.ndarray, max_distance: int = 1) -> np.ndarray:
    """For a family's pairwise edit distances (m, m), whether each source has another source within
    ``max_distance`` flips; for those no Lipschitz / triangle-inequality certificate reaches radius
    ``> (max_distance - 1) / 2`` (module docstring, vacuity)."""
    D = np.asarray(distances, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] < 2:
        raise ValueError(f"distances must be a square (m, m) matrix with m >= 2, got {D.shape}")
    D = D + np.diag(np.full(D.shape[0], np.inf))
    return D.min(axis=1) <= max_distance


def margin_loss(
    noisy: torch.Tensor, source: torch.Tensor, family: torch.Tensor, gamma0: float = 0.5
) -> torch.Tensor:
    """``L_margin = mean relu(gamma0 - gamma_i(G~))`` over noisy copies (definition 6)."""
    if not np.isfinite(gamma0) or gamma0 <= 0:
        raise ValueError(f"gamma0 must be a finite float > 0, got {gamma0!r}")
    return F.relu(gamma0 - alignment_margins(noisy, source, family)).mean()


def _contrastive(anchors: torch.Tensor, family: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE against the source embeddings: logits ``-||f(G') - f(G_j)||^2 / T``, target ``j = i``."""
    logits = -torch.cdist(anchors, family, compute_mode="donot_use_mm_for_euclid_dist").square() / temperature
    return F.cross_entropy(logits, torch.arange(len(family)).repeat(len(anchors) // len(family)))


def train_alignment(
    model: DenseGNN,
    A: torch.Tensor,
    *,
    n_steps: int = 300,
    lr: float = 1e-2,
    temperature: float = 0.1,
    augment: str = "none",
    drop_rate: float = 0.1,
    margin_weight: float = 0.0,
    gamma0: float = 0.5,
    flip_rate: float = 0.05,
    n_noisy: int = 4,
    copy_filter: Callable[[torch.Tensor, torch.Tensor], np.ndarray | torch.Tensor] | None = None,
    spectral_norm: float | None = None,
    random_state: int | None = None,
) -> list[float]:
    """Train ``model`` to separate the source graphs ``A`` (m, n, n); returns the loss history.

    The task loss is InfoNCE against the source embeddings (contrastive separation): the anchors are the
    sources themselves (``augment="none"``, plain training) or DropEdge copies (``augment="dropedge"``,
    every edge dropped with probability ``drop_rate``). ``margin_weight > 0`` adds
    ``margin_weight * L_margin`` on ``n_noisy`` noisy copies per source, each node pair flipped with
    probability ``flip_rate`` (definition 6). ``copy_filter(noisy_A, source) -> bool mask`` restricts the
    margin loss to the copies it keeps (the criterion only asks for ``gamma > 0`` on identifiable copies;
    pass :meth:`AtlasFlipIndex.identifiable` there). ``spectral_norm = c`` projects every weight matrix back to
    ``||W||_2 <= c`` after each step (the digest's optional spectral-norm control of ``delta / L``).
    """
    if A.ndim != 3 or A.shape[0] < 2 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (m, n, n) with m >= 2, got {tuple(A.shape)}")
    n_steps = _check_int("n_steps", n_steps, 1)
    n_noisy = _check_int("n_noisy", n_noisy, 1)
    if augment not in ("none", "dropedge"):
        raise ValueError(f"augment must be 'none' or 'dropedge', got {augment!r}")
    for name, v, lo, hi in (("drop_rate", drop_rate, 0, 1), ("flip_rate", flip_rate, 0, 1)):
        if not np.isfinite(v) or not lo <= v <= hi:
            raise ValueError(f"{name} must be in [{lo}, {hi}], got {v!r}")
    for name, v in (("lr", lr), ("temperature", temperature), ("gamma0", gamma0)):
        if not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a finite float > 0, got {v!r}")
    if not np.isfinite(margin_weight) or margin_weight < 0:
        raise ValueError(f"margin_weight must be a finite float >= 0, got {margin_weight!r}")
    if spectral_norm is not None and (
        isinstance(spectral_norm, bool) or not np.isfinite(spectral_norm) or spectral_norm <= 0
    ):
        raise ValueError(f"spectral_norm must be None or a finite float > 0, got {spectral_norm!r}")
    gen = torch.Generator().manual_seed(
        0 if random_state is None else _check_int("random_state", random_state, 0)
    )
    m, n, _ = A.shape
    A = A.to(model.mlps[0][0].weight.dtype)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    iu = torch.triu_indices(n, n, offset=1)
    source = torch.arange(m).repeat(n_noisy)
    history = []
    if spectral_norm is not None:
        project_spectral_norm(model, spectral_norm)
    for _ in range(n_steps):
        opt.zero_grad()
        fam = model(A)
        if augment == "dropedge":
            keep = (torch.rand(m, n, n, generator=gen, dtype=A.dtype) >= drop_rate).to(A.dtype).triu(1)
            anchors = model(A * (keep + keep.transpose(1, 2)))
        else:
            anchors = fam
        loss = _contrastive(anchors, fam, temperature)
        if margin_weight > 0:
            flips = torch.zeros(m * n_noisy, n, n, dtype=A.dtype)
            on = (torch.rand(m * n_noisy, iu.shape[1], generator=gen, dtype=A.dtype) < flip_rate).to(A.dtype)
            flips[:, iu[0], iu[1]] = on
            flips = flips + flips.transpose(1, 2)
            An = A.repeat(n_noisy, 1, 1)
            An = An + flips * (1 - 2 * An)
            keep = torch.ones(len(An), dtype=torch.bool)
            if copy_filter is not None:
                keep = torch.as_tensor(np.asarray(copy_filter(An, source)), dtype=torch.bool)
            if keep.any():
                loss = loss + margin_weight * margin_loss(model(An[keep]), source[keep], fam, gamma0)
        loss.backward()
        opt.step()
        if spectral_norm is not None:
            project_spectral_norm(model, spectral_norm)
        history.append(float(loss.detach()))
    return history


def project_spectral_norm(model: DenseGNN, max_norm: float = 1.0) -> DenseGNN:
    """Scale every weight matrix of ``model`` down to spectral norm ``<= max_norm`` (in place; returns it).

    With 1-Lipschitz activations each layer's MLP is then ``max_norm^mlp_layers``-Lipschitz, which bounds the
    product ``prod ||W_l||_2`` in :func:`gin_flip_bound` (digest, definition 6: spectral-norm control).
    """
    if not isinstance(model, DenseGNN):
        raise TypeError(f"model must be a DenseGNN, got {type(model).__name__}")
    if isinstance(max_norm, bool) or not np.isfinite(max_norm) or max_norm <= 0:
        raise ValueError(f"max_norm must be a finite float > 0, got {max_norm!r}")
    with torch.no_grad():
        for mlp in model.mlps:
            for layer in mlp:
                if hasattr(layer, "weight"):
                    sigma = torch.linalg.matrix_norm(layer.weight, ord=2)
                    if sigma > max_norm:
                        layer.weight.mul_(max_norm / sigma)
    return model
