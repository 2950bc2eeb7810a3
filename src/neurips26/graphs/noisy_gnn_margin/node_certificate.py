"""Node-level certificate (definition 5 of the digest, reconstructed [R]) and a greedy edge-flip attack.

Model: a two-layer GIN node classifier with scaled sum aggregation ``M = s (A + (1 + eps) I)``:

    P = X W1 + c1,    H = relu(M P),    z = M H W2 + b2.

Certificate. Flipping node pairs turns ``A`` into ``A' = A + Delta``. Then
``z'_v - z_v = s [(1+eps) dH_v + sum_u A'_vu dH_u] W2 + s [Delta H]_v W2`` with
``|dH_u| <= s sum_{flips (u, w)} |P_w|`` elementwise (ReLU is 1-Lipschitz). Every flip adds
at most ``L_v = s^2 (2 + |eps|) max_w q_w + s max_{w != v} c_w`` to ``||z'_v - z_v||_inf``, where
``q_w = || |P_w| |W2| ||_inf`` and ``c_w = ||H_w W2||_inf``, so ``k`` flips (anywhere in the graph; only
those in the 2-hop receptive field matter) move every logit by at most ``k L_v``. The logit margin
``m_v = z_{v,y} - max_{c != y} z_{v,c}`` of the predicted class ``y`` can then drop by at most ``2 k L_v``:
the prediction is certified for every perturbation of fewer than ``m_v / (2 L_v)`` flips.

Attack. Greedy: at each step flip the pair (with one end in the closed neighbourhood of ``v``) that lowers
``v``'s margin most, until the prediction changes; the number of flips is an upper bound on the true
robustness radius (used for soundness and tightness of the certificate).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .gnn import _check_int

__all__ = [
    "GINNodeClassifier",
    "node_certificates",
    "greedy_flip_attack",
    "make_csbm",
    "train_node_classifier",
]


def _check_graph(A: np.ndarray | torch.Tensor, X: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    A = np.asarray(A, dtype=float)
    X = np.asarray(X, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"A must be a square (n, n) adjacency matrix with n >= 2, got {A.shape}")
    if not np.isin(A, (0.0, 1.0)).all() or not (A == A.T).all() or np.diag(A).any():
        raise ValueError("A must be a symmetric 0/1 matrix with a zero diagonal")
    if X.ndim != 2 or X.shape[0] != A.shape[0]:
        raise ValueError(f"X must have shape (n, d) with n = {A.shape[0]}, got {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X must be finite (no NaN or inf)")
    return A, X


class GINNodeClassifier(nn.Module):
    """Two-layer GIN node classifier ``z = M relu(M (X W1 + c1)) W2 + b2``, ``M = s (A + (1 + eps) I)``.

    Parameters
    ----------
    in_features : int >= 1; hidden : int >= 1; n_classes : int >= 2.
    eps : float > -1, self weight; agg_scale : float > 0, the constant ``s`` (e.g. 1 / (1 + mean degree)).
    random_state : int or None, seeds the weight initialisation.
    """

    def __init__(
        self,
        in_features: int,
        hidden: int = 32,
        n_classes: int = 2,
        eps: float = 0.0,
        agg_scale: float = 1.0,
        random_state: int | None = None,
    ) -> None:
        super().__init__()
        in_features = _check_int("in_features", in_features, 1)
        hidden = _check_int("hidden", hidden, 1)
        n_classes = _check_int("n_classes", n_classes, 2)
        if not np.isfinite(eps) or eps <= -1:
            raise ValueError(f"eps must be a finite float > -1, got {eps!r}")
        if not np.isfinite(agg_scale) or agg_scale <= 0:
            raise ValueError(f"agg_scale must be a finite float > 0, got {agg_scale!r}")
        self.eps, self.agg_scale = float(eps), float(agg_scale)
        with torch.random.fork_rng():
            if random_state is not None:
                torch.manual_seed(_check_int("random_state", random_state, 0))
            self.lin1 = nn.Linear(in_features, hidden, dtype=torch.float64)
            self.lin2 = nn.Linear(hidden, n_classes, dtype=torch.float64)

    def forward(self, A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """Logits (n, n_classes) for one graph ``A`` (n, n) with node features ``X`` (n, d)."""
        M = self.agg_scale * (A + (1.0 + self.eps) * torch.eye(A.shape[0], dtype=A.dtype))
        H = torch.relu(M @ self.lin1(X))
        return self.lin2(M @ H)

    def numpy_params(self) -> dict[str, np.ndarray]:
        """``W1`` (d, h), ``b1``, ``W2`` (h, C), ``b2`` as float64 arrays, in the docstring's convention."""
        return {
            "W1": self.lin1.weight.detach().numpy().T.copy(),
            "c1": self.lin1.bias.detach().numpy().copy(),
            "W2": self.lin2.weight.detach().numpy().T.copy(),
            "b2": self.lin2.bias.detach().numpy().copy(),
        }


def _state(
    model: GINNodeClassifier, A: np.ndarray, X: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P = X W1 + c1`` (the bias rides with the features, so ``S = M P``), ``S = M P`` and ``H = relu(S)``."""
    p = model.numpy_params()
    s, e = model.agg_scale, model.eps
    P = X @ p["W1"] + p["c1"]
    S = s * (A @ P + (1.0 + e) * P)
    return P, S, np.maximum(S, 0.0)


def _logits(model: GINNodeClassifier, A: np.ndarray, H: np.ndarray) -> np.ndarray:
    p = model.numpy_params()
    s, e = model.agg_scale, model.eps
    return s * (A @ H + (1.0 + e) * H) @ p["W2"] + p["b2"]


def _margins(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    own = np.take_along_axis(z, y[..., None], axis=-1)[..., 0]
    other = z.copy()
    np.put_along_axis(other, y[..., None], -np.inf, axis=-1)
    return own - other.max(axis=-1)


def node_certificates(model: GINNodeClassifier, A: np.ndarray, X: np.ndarray) -> dict[str, np.ndarray]:
    """Prediction, logit margin ``m_v``, per-flip bound ``L_v`` and certified radius of every node.

    The certified radius is the largest integer ``k`` with ``2 k L_v < m_v`` (module docstring): every
    perturbation of at most ``k`` edge flips leaves ``v``'s prediction unchanged.
    """
    if not isinstance(model, GINNodeClassifier):
        raise TypeError("model must be a GINNodeClassifier")
    A, X = _check_graph(A, X)
    p = model.numpy_params()
    s, e = model.agg_scale, model.eps
    P, _, H = _state(model, A, X)
    z = _logits(model, A, H)
    y = z.argmax(1)
    m = _margins(z, y)
    q = (np.abs(P) @ np.abs(p["W2"])).max(1)
    c = np.abs(H @ p["W2"]).max(1)
    top2 = np.sort(c)[-2:]
    c_other = np.where(c >= top2[-1], top2[0], top2[-1])  # max over w != v
    L = s * s * (2.0 + abs(e)) * q.max() + s * c_other
    with np.errstate(divide="ignore"):
        radius = np.maximum(np.ceil(m / (2.0 * L)) - 1.0, 0.0)
    return {"pred": y, "margin": m, "lipschitz": L, "radius": radius.astype(np.int64), "logits": z}


def greedy_flip_attack(
    model: GINNodeClassifier, A: np.ndarray, X: np.ndarray, nodes: np.ndarray | list[int], max_flips: int = 5
) -> np.ndarray:
    """Greedy edge-flip attack on each node in ``nodes``; returns the number of flips that changed its
    prediction, or ``max_flips + 1`` when ``max_flips`` greedy flips did not (an upper bound on the radius).
    """
    if not isinstance(model, GINNodeClassifier):
        raise TypeError("model must be a GINNodeClassifier")
    A0, X = _check_graph(A, X)
    max_flips = _check_int("max_flips", max_flips, 1)
    nodes = np.asarray(nodes)
    n = A0.shape[0]
    if (
        nodes.ndim != 1
        or not np.issubdtype(nodes.dtype, np.integer)
        or (nodes < 0).any()
        or (nodes >= n).any()
    ):
        raise ValueError(f"nodes must be integer node ids in [0, {n - 1}]")
    p = model.numpy_params()
    s, e, W2, b2 = model.agg_scale, model.eps, p["W2"], p["b2"]
    P, S0, H0 = _state(model, A0, X)
    y_all = _logits(model, A0, H0).argmax(1)
    out = np.full(len(nodes), max_flips + 1)
    for i, v in enumerate(nodes):
        A, S, H = A0.copy(), S0.copy(), H0.copy()
        y = y_all[v]
        for step in range(1, max_flips + 1):
            hood = np.flatnonzero(A[v])
            a = np.repeat(np.concatenate([[v], hood]), n)
            b = np.tile(np.arange(n), len(hood) + 1)
            keep = a != b
            a, b = a[keep], b[keep]
            sig = 1.0 - 2.0 * A[a, b]
            Sa = S[a] + s * sig[:, None] * P[b]
            Sb = S[b] + s * sig[:, None] * P[a]
            agg = (1.0 + e) * H[v] + A[v] @ H  # current aggregate at v
            delta = np.zeros((len(a), H.shape[1]))
            for x, Hx_new in ((a, np.maximum(Sa, 0.0)), (b, np.maximum(Sb, 0.0))):
                c_old = np.where(x == v, 1.0 + e, A[v, x])
                touches_v = (a == v) | (b == v)
                c_new = np.where(x == v, 1.0 + e, np.where(touches_v, A[v, x] + sig, A[v, x]))
                delta += c_new[:, None] * Hx_new - c_old[:, None] * H[x]
            z = s * (agg[None, :] + delta) @ W2 + b2
            marg = _margins(z, np.full(len(z), y))
            best = int(np.argmin(marg))
            ab, bb = a[best], b[best]
            A[ab, bb] = A[bb, ab] = 1.0 - A[ab, bb]
            S = s * (A @ P + (1.0 + e) * P)
            H = np.maximum(S, 0.0)
            if marg[best] < 0:
                out[i] = step
                break
    return out


def make_csbm(
    n: int = 300,
    p_in: float = 0.05,
    p_out: float = 0.01,
    mu: float = 1.0,
    d: int = 8,
    random_state: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-class contextual SBM: balanced labels, edges with probability ``p_in`` / ``p_out`` within /
    across classes, features ``x_v ~ N(+-mu u, I_d)`` for a random unit vector ``u``. Returns ``A, X, y``."""
    n = _check_int("n", n, 2)
    d = _check_int("d", d, 1)
    for name, v in (("p_in", p_in), ("p_out", p_out)):
        if not 0 <= v <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    if not np.isfinite(mu) or mu < 0:
        raise ValueError(f"mu must be a finite float >= 0, got {mu!r}")
    rng = np.random.default_rng(random_state)
    y = rng.permutation(np.arange(n) % 2)
    prob = np.where(y[:, None] == y[None, :], p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    A = (upper | upper.T).astype(float)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    X = rng.normal(size=(n, d)) + mu * (2 * y[:, None] - 1) * u
    return A, X, y


def train_node_classifier(
    model: GINNodeClassifier,
    A: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    *,
    n_steps: int = 200,
    lr: float = 1e-2,
    weight_decay: float = 5e-4,
) -> list[float]:
    """Full-batch cross-entropy training on the nodes in ``train_mask``; returns the loss history."""
    A, X = _check_graph(A, X)
    y = np.asarray(y)
    train_mask = np.asarray(train_mask, dtype=bool)
    if y.shape != (A.shape[0],) or train_mask.shape != y.shape or not train_mask.any():
        raise ValueError("y and train_mask must have shape (n,) and train_mask must select a node")
    n_steps = _check_int("n_steps", n_steps, 1)
    At, Xt = torch.as_tensor(A), torch.as_tensor(X)
    yt, mt = torch.as_tensor(y).long(), torch.as_tensor(train_mask)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    history = []
    for _ in range(n_steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(At, Xt)[mt], yt[mt])
        loss.backward()
        opt.step()
        history.append(float(loss.detach()))
    return history
