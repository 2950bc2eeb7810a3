"""Backward filter for a linear-Gaussian proxy process on a tree, in canonical form (BFFG, step 2 of the digest).

Every node ``c`` carries the proxy likelihood of the observations in its subtree, in canonical form

    h~_c(x) = exp(c_c - 1/2 x^T H_c x + F_c^T x).

Leaf (or any observed node) with ``y = x + N(0, R)``: ``H += R^{-1}``, ``F += R^{-1} y`` (and the Gaussian
constant). A child's ``h~_c`` is pulled back through the proxy edge ``x_c | x_p ~ N(Phi x_p + beta, Q~)``:

    h~_{c->p}(x_p) = \\int N(x_c; Phi x_p + beta, Q~) h~_c(x_c) dx_c,

which in canonical form (van der Meulen and Schauer, arXiv 2010.03509, with ``v = H^{-1} F``) is
``H' = Phi^T (H^{-1} + Q~)^{-1} Phi`` and ``F' = Phi^T (H^{-1} + Q~)^{-1} (v - beta)``. We evaluate it in the
equivalent form that needs ``Q~^{-1}`` but never ``H^{-1}`` (``H`` may be singular at a node with partial
information): with ``J = H + Q~^{-1}``, the message is ``exp(k - 1/2 m^T A m + b^T m)`` in ``m = Phi x_p + beta``,

    A = Q~^{-1} - Q~^{-1} J^{-1} Q~^{-1},   b = Q~^{-1} J^{-1} F,   k = c - 1/2 log|I + Q~ H| + 1/2 F^T J^{-1} F.

A parent sums its children's messages (and its own observation). Inverses are Cholesky solves; an optional
``jitter`` is added to ``J`` (the digest's pitfall: ``H`` becomes ill-conditioned at large depth). Cost
``O(n_nodes d^3)``, vectorised over the nodes of one depth level.

Also here: the exact linear-Gaussian smoother built on the filter (:func:`gaussian_tree_smoother`) and a
dense brute-force reference (:func:`dense_gaussian_tree_posterior`) that conditions the joint Gaussian of all
nodes on the observations directly; they agree to rounding error and are the "Kalman" reference of gate 1.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .tree import Tree, as_tree

_LOG2PI = float(np.log(2.0 * np.pi))


class CanonicalMessages(NamedTuple):
    """Per-node canonical form of ``h~_c`` (observation at ``c`` plus the children's messages)."""

    H: np.ndarray  # (n, d, d)
    F: np.ndarray  # (n, d)
    c: np.ndarray  # (n,)


class EdgeCoefficients(NamedTuple):
    """``log \\int N(x_c; m, Q) h~_c(x_c) dx_c = k - 1/2 m^T A m + b^T m`` for every node ``c``."""

    A: np.ndarray  # (n, d, d)
    b: np.ndarray  # (n, d)
    k: np.ndarray  # (n,)
    J_inv: np.ndarray  # (n, d, d) covariance of the tilted transition N_can(H + Q^{-1}, F + Q^{-1} m)


def _sym(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M + np.swapaxes(M, -1, -2))


def _spd_inverse_logdet(M: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Inverse and log-determinant of a batch of symmetric positive definite matrices via Cholesky."""
    try:
        L = np.linalg.cholesky(_sym(M))
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"{name} must be symmetric positive definite") from exc
    eye = np.broadcast_to(np.eye(M.shape[-1]), M.shape)
    L_inv = np.linalg.solve(L, eye)
    inv = np.swapaxes(L_inv, -1, -2) @ L_inv
    logdet = 2.0 * np.sum(np.log(np.diagonal(L, axis1=-2, axis2=-1)), axis=-1)
    return _sym(inv), logdet


def check_spd(M: np.ndarray, name: str, d: int) -> np.ndarray:
    """``M`` as a float (d, d) symmetric positive definite matrix (a scalar or (d,) vector means diagonal)."""
    M = np.asarray(M, dtype=float)
    if M.ndim == 0:
        M = M * np.eye(d)
    elif M.ndim == 1 and M.shape[0] == d:
        M = np.diag(M)
    if M.shape != (d, d):
        raise ValueError(
            f"{name} must be a scalar, a ({d},) diagonal or a ({d}, {d}) matrix, got shape {M.shape}"
        )
    if not np.all(np.isfinite(M)):
        raise ValueError(f"{name} must be finite")
    if not np.allclose(M, M.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be symmetric")
    if np.linalg.eigvalsh(M).min() <= 0:
        raise ValueError(f"{name} must be positive definite")
    return _sym(M)


def check_observations(y: np.ndarray, tree: Tree, d: int | None = None) -> np.ndarray:
    """Observations as an (n_nodes, d) array with NaN rows at unobserved nodes.

    ``y`` may be given for all nodes (NaN rows = unobserved) or as an (n_leaves, d) array in the order of
    ``tree.leaves``. Every leaf must be observed: an unobserved leaf carries no information and its
    ``h~ = 1`` has ``H = 0`` (the digest's tree contract).
    """
    y = np.asarray(y, dtype=float)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[1] < 1:
        raise ValueError(f"y must be a 2-D array (nodes x dimension), got shape {y.shape}")
    if d is not None and y.shape[1] != d:
        raise ValueError(f"y must have {d} columns (the state dimension), got {y.shape[1]}")
    if y.shape[0] == tree.n_leaves:
        full = np.full((tree.n_nodes, y.shape[1]), np.nan)
        full[tree.leaves] = y
        y = full
    elif y.shape[0] != tree.n_nodes:
        raise ValueError(
            f"y must have one row per node ({tree.n_nodes}) or per leaf ({tree.n_leaves}), got {y.shape[0]}"
        )
    if np.any(np.isinf(y)):
        raise ValueError("y must not contain inf")
    nan_rows = np.isnan(y)
    partial = nan_rows.any(1) & ~nan_rows.all(1)
    if partial.any():
        raise ValueError("y rows must be fully observed or fully NaN (unobserved)")
    observed = ~nan_rows.any(1)
    missing = tree.leaves[~observed[tree.leaves]]
    if missing.size:
        raise ValueError(
            f"y: every leaf must be observed; leaves without observations: {missing[:10].tolist()}"
        )
    return y


def _per_node(arr: np.ndarray, n: int, shape: tuple[int, ...], name: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=float)
    if arr.shape == shape:
        arr = np.broadcast_to(arr, (n, *shape))
    if arr.shape != (n, *shape):
        raise ValueError(f"{name} must have shape {shape} or {(n, *shape)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return np.array(arr)


def edge_coefficients(
    H: np.ndarray, F: np.ndarray, c: np.ndarray, Q: np.ndarray, jitter: float = 0.0
) -> EdgeCoefficients:
    """Pull-back coefficients of canonical ``h~`` through ``N(m, Q)`` (batched over the leading axis).

    ``log \\int N(x; m, Q) exp(c - x^T H x / 2 + F^T x) dx = k - m^T A m / 2 + b^T m``.
    """
    d = H.shape[-1]
    Q = np.broadcast_to(Q, H.shape)
    Q_inv, _ = _spd_inverse_logdet(Q, "transition covariance")
    J = H + Q_inv + jitter * np.eye(d)
    J_inv, logdet_J = _spd_inverse_logdet(J, "H + Q^{-1}")
    _, logdet_Q = _spd_inverse_logdet(Q, "transition covariance")
    A = _sym(Q_inv - Q_inv @ J_inv @ Q_inv)
    JF = np.einsum("nij,nj->ni", J_inv, F)
    b = np.einsum("nij,nj->ni", Q_inv, JF)
    # log|I + Q H| = log|Q| + log|J|
    k = c - 0.5 * (logdet_Q + logdet_J) + 0.5 * np.einsum("ni,ni->n", F, JF)
    return EdgeCoefficients(A, b, k, J_inv)


def backward_filter(
    parent: np.ndarray | Tree,
    y: np.ndarray,
    obs_cov: np.ndarray | float,
    Phi: np.ndarray,
    beta: np.ndarray,
    proxy_cov: np.ndarray | float,
    *,
    jitter: float = 0.0,
) -> CanonicalMessages:
    """Closed-form backward filter of the proxy ``x_c | x_p ~ N(Phi x_p + beta, Q~)``, leaves to root.

    Parameters
    ----------
    parent : parent-index array (or a :class:`Tree`).
    y : (n_nodes, d) observations with NaN rows at unobserved nodes, or (n_leaves, d) at ``tree.leaves``.
    obs_cov : (d, d) observation covariance ``R`` of ``y = x + N(0, R)``.
    Phi, beta, proxy_cov : proxy edge parameters, shared ((d, d), (d,), (d, d)) or per child node
        ((n, d, d), (n, d), (n, d, d)); the root's entries are unused.
    jitter : added to the diagonal of ``H + Q~^{-1}`` before each Cholesky solve (>= 0).

    Returns
    -------
    CanonicalMessages ``(H, F, c)`` of ``h~_c`` at every node, root included.
    """
    tree = as_tree(parent)
    y = np.asarray(y, dtype=float)
    d = y.shape[-1] if y.ndim == 2 else 1
    y = check_observations(y, tree)
    n = tree.n_nodes
    R = check_spd(obs_cov, "obs_cov", d)
    Phi = _per_node(Phi, n, (d, d), "Phi")
    beta = _per_node(beta, n, (d,), "beta")
    Qt = np.asarray(proxy_cov, dtype=float)
    if Qt.ndim == 3:
        Qt = _per_node(Qt, n, (d, d), "proxy_cov")
        for node in range(n):
            if node != tree.root:
                check_spd(Qt[node], "proxy_cov", d)
    else:
        Qt = np.broadcast_to(check_spd(Qt, "proxy_cov", d), (n, d, d))
    if not (np.isfinite(jitter) and jitter >= 0):
        raise ValueError(f"jitter must be a finite number >= 0, got {jitter!r}")
    R_inv, logdet_R = _spd_inverse_logdet(R, "obs_cov")
    H = np.zeros((n, d, d))
    F = np.zeros((n, d))
    c = np.zeros(n)
    obs = ~np.isnan(y[:, 0])
    yo = y[obs]
    H[obs] += R_inv
    F[obs] += yo @ R_inv
    c[obs] += -0.5 * np.einsum("ni,ij,nj->n", yo, R_inv, yo) - 0.5 * (d * _LOG2PI + logdet_R)
    for lev in reversed(tree.levels[1:]):
        co = edge_coefficients(H[lev], F[lev], c[lev], Qt[lev], jitter)
        Ph, be = Phi[lev], beta[lev]
        PtA = np.swapaxes(Ph, -1, -2) @ co.A
        Hm = _sym(PtA @ Ph)
        Fm = np.einsum("nji,nj->ni", Ph, co.b - np.einsum("nij,nj->ni", co.A, be))
        cm = co.k - 0.5 * np.einsum("ni,nij,nj->n", be, co.A, be) + np.einsum("ni,ni->n", co.b, be)
        par = tree.parent[lev]
        np.add.at(H, par, Hm)
        np.add.at(F, par, Fm)
        np.add.at(c, par, cm)
    return CanonicalMessages(_sym(H), F, c)


def root_log_evidence(
    messages: CanonicalMessages, root: int, root_mean: np.ndarray, root_cov: np.ndarray
) -> float:
    """``log \\int N(x; m0, P0) h~_root(x) dx``: the proxy's log marginal likelihood ``log p~(y)``."""
    H, F, c = messages.H[root], messages.F[root], messages.c[root]
    d = H.shape[0]
    P0_inv, logdet_P0 = _spd_inverse_logdet(root_cov[None], "root_cov")
    P0_inv, logdet_P0 = P0_inv[0], logdet_P0[0]
    J = H + P0_inv
    J_inv, logdet_J = _spd_inverse_logdet(J[None], "H_root + root_cov^{-1}")
    h = F + P0_inv @ root_mean
    del d
    return float(
        c - 0.5 * (logdet_P0 + logdet_J[0]) + 0.5 * h @ J_inv[0] @ h - 0.5 * root_mean @ P0_inv @ root_mean
    )


def gaussian_tree_smoother(
    parent: np.ndarray | Tree,
    y: np.ndarray,
    obs_cov: np.ndarray | float,
    Phi: np.ndarray,
    beta: np.ndarray,
    transition_cov: np.ndarray | float,
    root_mean: np.ndarray | float,
    root_cov: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact smoothing marginals of a linear-Gaussian tree: backward filter, then forward guiding moments.

    The guided transition ``q(x_c | x_p) ∝ N(x_c; Phi x_p + beta, Q) h~_c(x_c)`` is
    ``N(J^{-1}(F_c + Q^{-1}(Phi x_p + beta)), J^{-1})`` with ``J = H_c + Q^{-1}``; for linear dynamics it is the
    exact posterior transition, so propagating means and covariances root to leaves gives the marginals.

    Returns ``(means (n, d), covs (n, d, d), log_evidence)``.
    """
    tree = as_tree(parent)
    y = np.asarray(y, dtype=float)
    d = y.shape[-1] if y.ndim == 2 else 1
    m0 = np.broadcast_to(np.asarray(root_mean, dtype=float), (d,)).copy()
    P0 = check_spd(root_cov, "root_cov", d)
    Q = check_spd(transition_cov, "transition_cov", d)
    msg = backward_filter(tree, y, obs_cov, Phi, beta, Q)
    n = tree.n_nodes
    Phi = _per_node(Phi, n, (d, d), "Phi")
    beta = _per_node(beta, n, (d,), "beta")
    co = edge_coefficients(msg.H, msg.F, msg.c, np.broadcast_to(Q, (n, d, d)))
    Q_inv = np.linalg.inv(Q)
    means = np.zeros((n, d))
    covs = np.zeros((n, d, d))
    r = tree.root
    P0_inv = np.linalg.inv(P0)
    Sr = np.linalg.inv(msg.H[r] + P0_inv)
    means[r] = Sr @ (msg.F[r] + P0_inv @ m0)
    covs[r] = _sym(Sr)
    for lev in tree.levels[1:]:
        par = tree.parent[lev]
        G = co.J_inv[lev] @ Q_inv @ Phi[lev]  # x_c = G x_p + J^{-1}(F + Q^{-1} beta) + N(0, J^{-1})
        off = np.einsum("nij,nj->ni", co.J_inv[lev], msg.F[lev] + beta[lev] @ Q_inv)
        means[lev] = np.einsum("nij,nj->ni", G, means[par]) + off
        covs[lev] = _sym(G @ covs[par] @ np.swapaxes(G, -1, -2) + co.J_inv[lev])
    return means, covs, root_log_evidence(msg, r, m0, P0)


def dense_gaussian_tree_posterior(
    parent: np.ndarray | Tree,
    y: np.ndarray,
    obs_cov: np.ndarray | float,
    Phi: np.ndarray,
    beta: np.ndarray,
    transition_cov: np.ndarray | float,
    root_mean: np.ndarray | float,
    root_cov: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Brute-force reference: build the joint Gaussian of all ``n d`` states and the observations, and
    condition directly (``O((n d)^3)``; for tests and small trees).

    Returns ``(means (n, d), covs (n, d, d), log_evidence)``.
    """
    tree = as_tree(parent)
    y = np.asarray(y, dtype=float)
    d = y.shape[-1] if y.ndim == 2 else 1
    y = check_observations(y, tree, d)
    n = tree.n_nodes
    Phi = _per_node(Phi, n, (d, d), "Phi")
    beta = _per_node(beta, n, (d,), "beta")
    R = check_spd(obs_cov, "obs_cov", d)
    Q = check_spd(transition_cov, "transition_cov", d)
    P0 = check_spd(root_cov, "root_cov", d)
    m0 = np.broadcast_to(np.asarray(root_mean, dtype=float), (d,))
    # x = B x + a + e  =>  x = (I - B)^{-1} (a + e)
    B = np.zeros((n * d, n * d))
    a = np.zeros(n * d)
    D = np.zeros((n * d, n * d))
    for node in range(n):
        s = slice(node * d, node * d + d)
        p = tree.parent[node]
        if p < 0:
            a[s], D[s, s] = m0, P0
        else:
            B[s, p * d : p * d + d] = Phi[node]
            a[s], D[s, s] = beta[node], Q
    M_inv = np.linalg.inv(np.eye(n * d) - B)
    mu = M_inv @ a
    S = M_inv @ D @ M_inv.T
    obs = np.flatnonzero(~np.isnan(y[:, 0]))
    idx = (obs[:, None] * d + np.arange(d)).ravel()
    S_yy = S[np.ix_(idx, idx)] + np.kron(np.eye(obs.size), R)
    S_xy = S[:, idx]
    resid = y[obs].ravel() - mu[idx]
    K = np.linalg.solve(S_yy, S_xy.T).T
    mean = mu + K @ resid
    cov = S - K @ S_xy.T
    sign, logdet = np.linalg.slogdet(S_yy)
    log_ev = -0.5 * (resid @ np.linalg.solve(S_yy, resid) + logdet + idx.size * _LOG2PI)
    covs = np.stack([cov[i * d : i * d + d, i * d : i * d + d] for i in range(n)])
    return mean.reshape(n, d), covs, float(log_ev)
