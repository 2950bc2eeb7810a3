"""Neural Backward Filtering Forward Guiding (NBFFG) on trees with discrete Gaussian edges.

Paper: G. Yang, F. van der Meulen and S. Sommer, "Neural Backward Filtering Forward Guiding", arXiv 2601.23030.
Only the abstract was available; the algorithm follows BFFG (van der Meulen and Schauer, arXiv 2010.03509) and
the digest. Model on a rooted tree::

    x_root ~ N(m0, P0),    x_c | x_p ~ N(f(x_p), Q)  (f nonlinear),    y_c = x_c + N(0, R)  at observed nodes.

1. Proxy: ``f(x) ≈ Phi x + beta`` (least-squares fit on prior samples, or given), covariance ``Q~``.
2. Backward filter (:mod:`.backward_filter`): canonical ``h~_c(x) = exp(c_c - x^T H_c x / 2 + F_c^T x)``.
3. Forward guiding: ``q°(x_c | x_p) ∝ p(x_c | x_p) h~_c(x_c) = N_can(H_c + Q^{-1}, F_c + Q^{-1} f(x_p))`` and
   root ``N_can(H_r + P0^{-1}, F_r + P0^{-1} m0)``; the importance weight factorises over edges,
   ``log p(x, y) - log q°(x) = log p~(y) + sum_e log w_e(x_p)`` with
   ``log w_e = log \\int p(x_c | x_p) h~_c(x_c) dx_c - log h~_{c->p}(x_p)`` (identically 0 for linear f).
4. Neural residual [R]: a conditional affine flow on the guided proposal's standard-normal noise,
   ``z' = z * exp(s) + t``, ``(s, t) = MLP(x_p, guided mean, log diag H_c, depth)``, so
   ``x_c = mu°(x_p) + chol(J_c^{-1}) z'``; the output layer starts at zero, so training starts at the guide.
   The root has its own unconditional affine residual. (The paper's flow architecture is unknown to us.)
5. Objective [R]: reverse KL / negative ELBO ``L = E_q[log q_phi(x) - log p(x, y)]`` with reparameterised
   samples. We use the "sticking-the-landing" gradient (Roeder et al., 2017: the flow's log-density is
   evaluated with detached parameters), whose gradient is exactly zero when ``q_phi`` equals the posterior,
   so for linear dynamics the residual stays at zero.
6. Unbiased path subsampling [R]: ``log q_phi(x) - log p(x, y) = -log p~(y) + r(x_root) + sum_e l_e(x_p, x_c)``
   where ``l_e = log q_phi,e(x_c | x_p) - log q°_e(x_c | x_p) - log w_e(x_p)``. Drawing one leaf uniformly
   and simulating only its root-to-leaf path, ``r + sum_{e in path} l_e / pi_e`` with
   ``pi_e = leaf_count(child) / n_leaves`` (Horvitz-Thompson) is unbiased for the full sum, and a training
   step costs O(depth) edges instead of O(n_nodes). The exact estimator is our reconstruction.
7. Inference: full-tree ancestral sampling from ``q_phi`` with self-normalised importance weights
   ``p(x, y) / q_phi(x)`` (:meth:`NBFFG.sample`, :meth:`NBFFG.importance_estimate`).

Everything runs in float64 torch on CPU.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as nnf

from .backward_filter import (
    backward_filter,
    check_observations,
    check_spd,
    edge_coefficients,
    root_log_evidence,
)
from .tree import Tree, as_tree

Tensor = torch.Tensor
_DT = torch.float64
_HALF_LOG2PI = 0.5 * float(np.log(2.0 * np.pi))


def _mv(M: Tensor, v: Tensor) -> Tensor:
    """Batched matrix-vector product ``M @ v`` over broadcast leading axes."""
    return (M @ v.unsqueeze(-1)).squeeze(-1)


def _std_normal_logpdf(z: Tensor) -> Tensor:
    return -0.5 * (z**2).sum(-1) - z.shape[-1] * _HALF_LOG2PI


def _call_f(f: Callable[..., Tensor], x: Tensor, nodes: Tensor | None, node_dependent: bool) -> Tensor:
    """``f(x)``, or ``f(x, nodes)`` (the child node of every row) for edge-dependent dynamics."""
    return f(x, nodes) if node_dependent else f(x)


def _check_f(f: Callable[..., Tensor], d: int, node_dependent: bool = False) -> None:
    if not callable(f):
        raise TypeError("f must be a callable mapping a (batch, d) float64 tensor to a (batch, d) tensor")
    probe = torch.linspace(-1.0, 1.0, 3 * d, dtype=_DT).reshape(3, d)
    out = _call_f(f, probe, torch.zeros(3, dtype=torch.long), node_dependent)
    if not isinstance(out, Tensor) or out.shape != probe.shape:
        raise ValueError(f"f must map a (batch, {d}) tensor to a (batch, {d}) tensor")
    if not torch.all(torch.isfinite(out)):
        raise ValueError("f must return finite values")


def check_transition_cov(Q: Any, tree: Tree, d: int) -> np.ndarray:
    """The transition covariance per node, (n_nodes, d, d): one shared matrix (scalar, (d,) diagonal or (d, d))
    or one per child node (n_nodes, d, d; the root's entry is unused and replaced by the identity)."""
    arr = np.asarray(Q, dtype=float)
    n = tree.n_nodes
    if arr.ndim == 3:
        if arr.shape != (n, d, d):
            raise ValueError(f"transition_cov per node must have shape ({n}, {d}, {d}), got {arr.shape}")
        out = np.array(arr)
        out[tree.root] = np.eye(d)
        for node in range(n):
            if node != tree.root:
                out[node] = check_spd(arr[node], f"transition_cov[{node}]", d)
        return out
    return np.broadcast_to(check_spd(Q, "transition_cov", d), (n, d, d)).copy()


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _generator(random_state: int | np.random.Generator | None) -> torch.Generator:
    if isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(2**62))
    elif random_state is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    elif (
        isinstance(random_state, (int, np.integer))
        and not isinstance(random_state, bool)
        and random_state >= 0
    ):
        seed = int(random_state)
    else:
        raise ValueError(
            f"random_state must be None, a non-negative int or a numpy Generator, got {random_state!r}"
        )
    return torch.Generator().manual_seed(seed)


class ConditionalAffineResidual(nn.Module):
    """Neural residual on top of the guide [R]: ``z' = z exp(s) + t``, ``(s, t) = MLP(context)``.

    The last layer is initialised at zero, so the residual starts as the identity (pure BFFG guide).
    ``shift_only=True`` keeps ``s = 0``: on an Euler-discretised diffusion edge the shift ``L t`` with
    ``L ≈ sigma sqrt(dt)`` is the controlled-SDE residual ``sigma u dt`` with ``u = t / sqrt(dt)``.
    ``root_shift`` and ``root_log_scale`` act on the root's guided noise.
    """

    def __init__(self, dim: int, context_dim: int, hidden_size: int = 32, shift_only: bool = False) -> None:
        super().__init__()
        self.dim = dim
        self.shift_only = shift_only
        self.net = nn.Sequential(
            nn.Linear(context_dim, hidden_size, dtype=_DT),
            nn.Tanh(),
            nn.Linear(hidden_size, hidden_size, dtype=_DT),
            nn.Tanh(),
            nn.Linear(hidden_size, 2 * dim, dtype=_DT),
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)
        self.root_shift = nn.Parameter(torch.zeros(dim, dtype=_DT))
        self.root_log_scale = nn.Parameter(torch.zeros(dim, dtype=_DT))

    def forward(self, context: Tensor, detach_params: bool = False) -> tuple[Tensor, Tensor]:
        """``(log_scale, shift)`` for each context row; ``detach_params`` evaluates the same function with
        the parameters cut from autograd (for the sticking-the-landing gradient)."""
        h = context
        layers = [m for m in self.net if isinstance(m, nn.Linear)]
        for i, layer in enumerate(layers):
            w, b = (
                (layer.weight.detach(), layer.bias.detach()) if detach_params else (layer.weight, layer.bias)
            )
            h = nnf.linear(h, w, b)
            if i < len(layers) - 1:
                h = torch.tanh(h)
        shift = h[..., self.dim :]
        return (torch.zeros_like(shift) if self.shift_only else h[..., : self.dim]), shift

    def root_params(self) -> tuple[Tensor, Tensor]:
        """``(log_scale, shift)`` of the root's residual."""
        s0 = torch.zeros_like(self.root_log_scale) if self.shift_only else self.root_log_scale
        return s0, self.root_shift


class NBFFG:
    """Neural BFFG variational posterior for a tree with Gaussian edges ``x_c | x_p ~ N(f(x_p), Q)``.

    Parameters
    ----------
    f : callable, the transition mean; maps a (batch, d) float64 tensor to (batch, d) (torch, differentiable).
        With ``node_dependent=True`` it is called as ``f(x, node)``, ``node`` the LongTensor of the child node
        of every row (edges of different lengths, such as a time-changed Euler grid of a diffusion edge).
    transition_cov : Q, scalar, (d,) diagonal, (d, d), or one per child node (n_nodes, d, d).
    root_mean, root_cov : root prior N(m0, P0).
    obs_cov : R of ``y = x + N(0, R)``.
    proxy : ``"lstsq"`` (least-squares fit of ``f`` on prior samples of the tree: one global fit, or one per
        edge when ``f`` is node-dependent) or a tuple ``(Phi, beta)`` / ``(Phi, beta, Q~)``, shared or per
        node; ``Q~`` defaults to ``Q``.
    residual : train the neural residual (False: plain BFFG guide).
    flow : ``"affine"`` (shift and log-scale) or ``"shift"`` (controlled-SDE style drift residual only).
    hidden_size : width of the residual MLP (>= 1).
    n_steps : Adam steps (>= 0).
    batch_size : Monte Carlo samples per step (>= 1).
    learning_rate : Adam step size (> 0).
    estimator : ``"path"`` (unbiased root-to-leaf subsampling) or ``"full"`` (whole tree every step).
    n_proxy_samples : prior tree samples for the least-squares proxy (>= 2).
    jitter : diagonal jitter in the backward filter's Cholesky solves (>= 0).
    node_dependent : call ``f(x, node)`` (see ``f``).
    random_state : seed (int), numpy Generator or None.

    Attributes (after :meth:`fit`)
    -------------------------------
    tree_ : the validated :class:`Tree`; ``y_`` (n_nodes, d) observations (NaN rows unobserved).
    Phi_, beta_, proxy_cov_ : the proxy; ``messages_`` the backward filter's canonical ``(H, F, c)``.
    log_evidence_proxy_ : ``log p~(y)``.
    residual_ : the trained :class:`ConditionalAffineResidual`.
    loss_history_ : per-step loss estimates; ``step_seconds_`` mean wall time of one training step.
    """

    def __init__(
        self,
        f: Callable[[Tensor], Tensor],
        transition_cov: Any,
        root_mean: Any = 0.0,
        root_cov: Any = 1.0,
        obs_cov: Any = 0.01,
        *,
        proxy: str | tuple = "lstsq",
        residual: bool = True,
        flow: str = "affine",
        hidden_size: int = 32,
        n_steps: int = 1000,
        batch_size: int = 128,
        learning_rate: float = 5e-3,
        estimator: str = "path",
        n_proxy_samples: int = 200,
        jitter: float = 0.0,
        node_dependent: bool = False,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.f = f
        self.transition_cov = transition_cov
        self.root_mean = root_mean
        self.root_cov = root_cov
        self.obs_cov = obs_cov
        self.proxy = proxy
        self.residual = residual
        self.flow = flow
        self.hidden_size = hidden_size
        self.n_steps = n_steps
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.estimator = estimator
        self.n_proxy_samples = n_proxy_samples
        self.jitter = jitter
        self.node_dependent = node_dependent
        self.random_state = random_state

    # ------------------------------------------------------------------------------------------ setup
    def _f(self, x: Tensor, nodes: Tensor | None) -> Tensor:
        return _call_f(self.f, x, nodes, self.node_dependent)

    def _validate(self, d: int) -> None:
        if not isinstance(self.node_dependent, (bool, np.bool_)):
            raise ValueError(f"node_dependent must be True or False, got {self.node_dependent!r}")
        _check_f(self.f, d, bool(self.node_dependent))
        _check_int(self.hidden_size, "hidden_size", 1)
        _check_int(self.n_steps, "n_steps", 0)
        _check_int(self.batch_size, "batch_size", 1)
        _check_int(self.n_proxy_samples, "n_proxy_samples", 2)
        if not (
            isinstance(self.learning_rate, (int, float))
            and np.isfinite(self.learning_rate)
            and self.learning_rate > 0
        ):
            raise ValueError(f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        if self.flow not in ("affine", "shift"):
            raise ValueError(f"flow must be 'affine' or 'shift', got {self.flow!r}")
        if self.estimator not in ("path", "full"):
            raise ValueError(f"estimator must be 'path' or 'full', got {self.estimator!r}")
        if not (np.isfinite(self.jitter) and self.jitter >= 0):
            raise ValueError(f"jitter must be a finite number >= 0, got {self.jitter!r}")

    def _fit_proxy(
        self, tree: Tree, d: int, Q: np.ndarray, m0: np.ndarray, P0: np.ndarray, gen: torch.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isinstance(self.proxy, tuple):
            if len(self.proxy) not in (2, 3):
                raise ValueError("proxy must be 'lstsq' or a tuple (Phi, beta) or (Phi, beta, proxy_cov)")
            Phi = np.asarray(self.proxy[0], dtype=float)
            beta = np.asarray(self.proxy[1], dtype=float)
            Phi = Phi.reshape(1, 1) if Phi.ndim == 0 and d == 1 else Phi
            beta = beta.reshape(1) if beta.ndim == 0 and d == 1 else beta
            if Phi.shape[-2:] != (d, d) or beta.shape[-1:] != (d,):
                raise ValueError(f"proxy: Phi must be ({d}, {d}) and beta ({d},) (or per node)")
            if not (np.all(np.isfinite(Phi)) and np.all(np.isfinite(beta))):
                raise ValueError("proxy: Phi and beta must be finite")
            Qt = check_transition_cov(self.proxy[2], tree, d) if len(self.proxy) == 3 else Q
            return Phi, beta, Qt
        if self.proxy != "lstsq":
            raise ValueError(f"proxy must be 'lstsq' or a tuple (Phi, beta[, proxy_cov]), got {self.proxy!r}")
        # least-squares fit of f on prior samples of the tree's internal nodes (the digest's proxy)
        with torch.no_grad():
            x = _simulate_prior(tree, self.f, Q, m0, P0, int(self.n_proxy_samples), gen, self.node_dependent)
        if self.node_dependent:  # one fit per edge: f(., c) on prior samples of c's parent
            child = np.flatnonzero(np.arange(tree.n_nodes) != tree.root)
            xp = x[:, tree.parent[child]]  # (S, m, d)
            nodes = torch.as_tensor(child).repeat(xp.shape[0])
            with torch.no_grad():
                fx = self._f(xp.reshape(-1, d), nodes).reshape(xp.shape).numpy()
            A = np.concatenate([xp.numpy(), np.ones(xp.shape[:2] + (1,))], axis=2).transpose(1, 0, 2)
            coef = np.linalg.solve(A.transpose(0, 2, 1) @ A, A.transpose(0, 2, 1) @ fx.transpose(1, 0, 2))
            Phi = np.broadcast_to(np.eye(d), (tree.n_nodes, d, d)).copy()
            beta = np.zeros((tree.n_nodes, d))
            Phi[child] = coef[:, :d].transpose(0, 2, 1)
            beta[child] = coef[:, d]
            return Phi, beta, Q
        xs = x[:, ~tree.is_leaf].reshape(-1, d)
        with torch.no_grad():
            fx = self.f(xs).numpy()
        X = np.hstack([xs.numpy(), np.ones((xs.shape[0], 1))])
        coef, *_ = np.linalg.lstsq(X, fx, rcond=None)
        return coef[:d].T.copy(), coef[d].copy(), Q

    def fit(self, parent: np.ndarray | Tree, y: np.ndarray) -> NBFFG:
        """Backward filter, then train the residual on the (subsampled) negative ELBO.

        ``parent``: parent-index array of the tree (validated: one root, no cycles). ``y``: observations,
        (n_nodes, d) with NaN rows at unobserved nodes or (n_leaves, d); every leaf must be observed.
        """
        tree = as_tree(parent)
        y = np.asarray(y, dtype=float)
        if y.ndim == 1:
            y = y[:, None]
        d = y.shape[-1]
        y = check_observations(y, tree, d)
        self._validate(d)
        Q = check_transition_cov(self.transition_cov, tree, d)
        P0 = check_spd(self.root_cov, "root_cov", d)
        R = check_spd(self.obs_cov, "obs_cov", d)
        m0 = np.asarray(self.root_mean, dtype=float)
        m0 = np.broadcast_to(m0, (d,)).copy() if m0.ndim == 0 or m0.shape == (d,) else None
        if m0 is None or not np.all(np.isfinite(m0)):
            raise ValueError(f"root_mean must be a finite scalar or a ({d},) vector")
        gen = _generator(self.random_state)
        init_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        Phi, beta, Qt = self._fit_proxy(tree, d, Q, m0, P0, gen)
        msg = backward_filter(tree, y, R, Phi, beta, Qt, jitter=float(self.jitter))
        self.tree_, self.y_, self.d_ = tree, y, d
        self.Phi_, self.beta_, self.proxy_cov_ = Phi, beta, Qt
        self.messages_ = msg
        self.log_evidence_proxy_ = root_log_evidence(msg, tree.root, m0, P0)
        self._prepare(Q, m0, P0)
        self._gen = gen
        with torch.random.fork_rng(devices=[]):  # seed the MLP's initialisation without touching global state
            torch.manual_seed(init_seed)
            self.residual_ = ConditionalAffineResidual(
                d, 3 * d + 1, int(self.hidden_size), shift_only=self.flow == "shift"
            )
        self._opt = None
        self.loss_history_ = np.zeros(0)
        self.n_skipped_steps_ = 0  # training steps dropped for a non-finite loss
        self.step_seconds_ = float("nan")
        if self.residual and self.n_steps > 0:
            self.train(int(self.n_steps))
        return self

    def _prepare(self, Q: np.ndarray, m0: np.ndarray, P0: np.ndarray) -> None:
        """Per-node tensors of the guided transitions and of the edge weights."""
        tree, msg, d = self.tree_, self.messages_, self.d_
        n = tree.n_nodes
        true = edge_coefficients(msg.H, msg.F, msg.c, Q, float(self.jitter))
        Qt = np.broadcast_to(self.proxy_cov_, (n, d, d))
        prox = edge_coefficients(msg.H, msg.F, msg.c, Qt, float(self.jitter))
        P0_inv = np.linalg.inv(P0)
        Jr_inv = np.linalg.inv(msg.H[tree.root] + P0_inv)
        t = lambda a: torch.from_numpy(np.array(a, dtype=np.float64))  # noqa: E731
        self._Q_inv = t(np.linalg.inv(Q))  # (n, d, d), per child node
        self._J_inv = t(true.J_inv)
        self._L = torch.linalg.cholesky(self._J_inv)
        self._F = t(msg.F)
        self._A, self._b, self._k = t(true.A), t(true.b), t(true.k)
        self._At, self._bt, self._kt = t(prox.A), t(prox.b), t(prox.k)
        self._Phi = t(np.broadcast_to(self.Phi_, (n, d, d)))
        self._beta = t(np.broadcast_to(self.beta_, (n, d)))
        self._logH = t(np.log1p(np.clip(np.diagonal(msg.H, axis1=1, axis2=2), 0, None)))
        self._depth = t(tree.depth / max(tree.max_depth, 1))
        self._root_mean = t(Jr_inv @ (msg.F[tree.root] + P0_inv @ m0))
        self._root_L = torch.linalg.cholesky(t(Jr_inv))
        # Horvitz-Thompson weight 1/pi_c; the root entry (0) masks padding rows of shallow leaves' paths
        self._ht = t(np.where(np.arange(n) == tree.root, 0.0, tree.n_leaves / tree.leaf_count))
        # proxy message as a quadratic in x_p: log h~_{c->p}(x_p) = kp - x^T Ap x / 2 + bp^T x
        PhiT = self._Phi.transpose(-1, -2)
        Ap = PhiT @ self._At @ self._Phi
        bp = _mv(PhiT, self._bt - _mv(self._At, self._beta))
        kp = (
            self._kt
            - 0.5 * (self._beta * _mv(self._At, self._beta)).sum(-1)
            + (self._bt * self._beta).sum(-1)
        )
        # one packed per-node table, so that each level of the forward pass gathers once
        parts = [
            ("J_inv", self._J_inv, (d, d)),
            ("Q_inv", self._Q_inv, (d, d)),
            ("L", self._L, (d, d)),
            ("F", self._F, (d,)),
            ("A", self._A, (d, d)),
            ("b", self._b, (d,)),
            ("k", self._k, ()),
            ("Ap", Ap, (d, d)),
            ("bp", bp, (d,)),
            ("dk", self._k - kp, ()),
            ("feat", torch.cat([self._logH, self._depth[:, None]], 1), (d + 1,)),
            ("ht", self._ht, ()),
        ]
        self._slices, cols, start = {}, [], 0
        for name, arr, shape in parts:
            size = int(np.prod(shape)) if shape else 1
            self._slices[name] = (start, start + size, shape)
            cols.append(arr.reshape(n, size))
            start += size
        self._table = torch.cat(cols, 1).contiguous()
        self._levels = [torch.from_numpy(np.array(lev)) for lev in tree.levels]
        self._parent_pos = [torch.as_tensor(tree.position[tree.parent[lev]]) for lev in tree.levels[1:]]
        self._paths = torch.as_tensor(np.array(tree.paths))

    def _check_fitted(self) -> None:
        if not hasattr(self, "residual_"):
            raise RuntimeError("this NBFFG instance is not fitted yet; call fit(parent, y) first")

    # ---------------------------------------------------------------------------------- forward pass
    def _gather(self, ids: Tensor) -> dict[str, Tensor]:
        rows = self._table[ids]
        out = {}
        for name, (a, b, shape) in self._slices.items():
            out[name] = rows[..., a:b].reshape(*ids.shape, *shape) if shape else rows[..., a]
        return out

    @staticmethod
    def _edge_log_weight(p: dict[str, Tensor], x_p: Tensor, fx: Tensor) -> Tensor:
        """``log w_e(x_p) = log g_c(x_p) - log h~_{c->p}(x_p)`` (step 3; the ``c_c`` constants cancel)."""
        quad = fx * (0.5 * _mv(p["A"], fx) - p["b"]) - x_p * (0.5 * _mv(p["Ap"], x_p) - p["bp"])
        return p["dk"] - quad.sum(-1)

    def _forward(
        self,
        n: int,
        *,
        leaves: Tensor | None,
        noise: Tensor | None,
        use_residual: bool,
        stl: bool,
        keep_states: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """Ancestral simulation, level by level, of the whole tree (``leaves=None``) or of one root-to-leaf
        path per sample; returns the per-sample loss estimate ``log q_phi(x) - log p(x, y)`` (Horvitz-Thompson
        weighted on paths) and optionally the states (full tree only, (n, n_nodes, d))."""
        d, tree = self.d_, self.tree_
        net = self.residual_
        rows = torch.arange(n)[:, None]

        def draw(ids: Tensor, width: int) -> Tensor:
            if noise is not None:
                return noise[rows, ids.expand(n, width)]
            return torch.randn(n, width, d, dtype=_DT, generator=self._gen)

        # root (level 0)
        root_ids = self._levels[0][None, :]
        z = draw(root_ids, 1)
        if use_residual:
            s0, t0 = net.root_params()
            zp = z * torch.exp(s0) + t0
            s0d = s0.detach() if stl else s0
            t0d = t0.detach() if stl else t0
            zt = (zp - t0d) * torch.exp(-s0d)
            loss = (_std_normal_logpdf(zt) - s0d.sum() - _std_normal_logpdf(zp))[:, 0]
        else:
            zp = z
            loss = torch.zeros(n, dtype=_DT)
        x = self._root_mean + _mv(self._root_L, zp)
        states = [x] if keep_states else None
        for k in range(1, tree.max_depth + 1):
            if leaves is None:
                ids = self._levels[k][None, :]
                x_p = x[:, self._parent_pos[k - 1], :]
            else:
                node = self._paths[leaves, k][:, None]
                ids = torch.where(node >= 0, node, self._levels[0][0])
                x_p = x
            p = self._gather(ids)
            width = ids.shape[1]
            nodes = ids.expand(n, width).reshape(-1) if self.node_dependent else None
            fx = self._f(x_p.reshape(-1, d), nodes).reshape(x_p.shape)
            mu = _mv(p["J_inv"], p["F"] + _mv(p["Q_inv"], fx))
            z = draw(ids, width)
            term = -self._edge_log_weight(p, x_p, fx)
            if use_residual:
                ctx = torch.cat([x_p, mu, p["feat"].expand(n, width, d + 1)], dim=-1)
                s, t = net(ctx)
                zp = z * torch.exp(s) + t
                sd, td = net(ctx, detach_params=True) if stl else (s, t)
                zt = (zp - td) * torch.exp(-sd)
                term = term + _std_normal_logpdf(zt) - sd.sum(-1) - _std_normal_logpdf(zp)
            else:
                zp = z
            x = mu + _mv(p["L"], zp)
            if leaves is not None:
                term = term * p["ht"]  # Horvitz-Thompson 1/pi_e; 0 on padding beyond a shallow leaf
            loss = loss + term.sum(1)
            if keep_states:
                states.append(x)
        loss = loss - self.log_evidence_proxy_
        if keep_states:
            full = torch.empty(n, tree.n_nodes, d, dtype=_DT)
            for lev, xs in zip(self._levels, states, strict=True):
                full[:, lev] = xs
            return loss, full
        return loss, None

    # ------------------------------------------------------------------------------------- training
    def train(self, n_steps: int) -> NBFFG:
        """Run ``n_steps`` more Adam steps on the negative ELBO (estimator as configured), with the step size
        decaying from ``learning_rate`` to 5% of it (cosine) over these steps."""
        self._check_fitted()
        n_steps = _check_int(n_steps, "n_steps", 1)
        opt = self._opt or torch.optim.Adam(self.residual_.parameters(), lr=self.learning_rate)
        self._opt = opt
        B, n_leaves = int(self.batch_size), self.tree_.n_leaves
        hist = np.zeros(n_steps)
        skipped = 0
        # cosine decay of the step size to 5% over this call: Adam otherwise keeps jittering at ~lr scale
        # around the optimum (for linear dynamics the exact posterior, where the STL gradient vanishes)
        lrs = self.learning_rate * (0.05 + 0.95 * 0.5 * (1.0 + np.cos(np.pi * np.arange(n_steps) / n_steps)))
        t0 = time.perf_counter()
        for i in range(n_steps):
            for group in opt.param_groups:
                group["lr"] = float(lrs[i])
            leaves = None
            if self.estimator == "path":
                leaves = torch.randint(0, n_leaves, (B,), generator=self._gen)
            loss, _ = self._forward(
                B, leaves=leaves, noise=None, use_residual=True, stl=True, keep_states=False
            )
            obj = loss.mean()
            opt.zero_grad(set_to_none=True)
            hist[i] = float(obj.detach())
            if not np.isfinite(hist[i]):
                # one sample from the residual's tail can overflow the dynamics (a cubic drift, say); its
                # gradient would turn every parameter into NaN, so the batch is dropped and training goes on
                skipped += 1
                continue
            obj.backward()
            opt.step()
        self.step_seconds_ = (time.perf_counter() - t0) / n_steps
        self.loss_history_ = np.concatenate([self.loss_history_, hist])
        self.n_skipped_steps_ += skipped
        if skipped:
            warnings.warn(
                f"NBFFG.train: {skipped} of {n_steps} steps had a non-finite loss and were skipped "
                "(see loss_history_); a smaller learning_rate or a larger batch_size may avoid them",
                RuntimeWarning,
                stacklevel=2,
            )
        return self

    # ------------------------------------------------------------------------------------ inference
    def loss_estimate(
        self, noise: np.ndarray | Tensor, leaves: np.ndarray | None = None, *, residual: bool = True
    ) -> np.ndarray:
        """Per-sample estimate of ``log q_phi(x) - log p(x, y)`` for given standard-normal noise.

        ``noise``: (n, n_nodes, d), the noise of every node (fixes the sample). ``leaves=None``: the full-tree
        value; ``leaves`` (n,) leaf positions in ``tree_.leaves``: the Horvitz-Thompson path estimate that
        simulates only each sample's root-to-leaf path (step 6). Averaging the path estimate over all leaves
        reproduces the full-tree value exactly.
        """
        self._check_fitted()
        noise = torch.as_tensor(np.asarray(noise, dtype=float), dtype=_DT)
        if noise.ndim != 3 or noise.shape[1:] != (self.tree_.n_nodes, self.d_) or noise.shape[0] < 1:
            raise ValueError(
                f"noise must have shape (n, {self.tree_.n_nodes}, {self.d_}), got {tuple(noise.shape)}"
            )
        if not torch.all(torch.isfinite(noise)):
            raise ValueError("noise must be finite")
        lv = None
        if leaves is not None:
            la = np.asarray(leaves)
            if la.shape != (noise.shape[0],) or not np.issubdtype(la.dtype, np.integer):
                raise ValueError(f"leaves must be an integer array of shape ({noise.shape[0]},)")
            if la.min() < 0 or la.max() >= self.tree_.n_leaves:
                raise ValueError(f"leaves must lie in [0, {self.tree_.n_leaves - 1}]")
            lv = torch.as_tensor(la, dtype=torch.long)
        with torch.no_grad():
            loss, _ = self._forward(
                noise.shape[0], leaves=lv, noise=noise, use_residual=residual, stl=False, keep_states=False
            )
        return loss.numpy()

    def transform(
        self, noise: np.ndarray | Tensor, *, residual: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """The full-tree sample ``x = T(noise)`` for given standard-normal ``noise`` (n, n_nodes, d), and its
        log importance weight ``log p(x, y) - log q(x)`` (the map BFFG-MCMC moves through)."""
        self._check_fitted()
        noise = torch.as_tensor(np.asarray(noise, dtype=float), dtype=_DT)
        if noise.ndim != 3 or noise.shape[1:] != (self.tree_.n_nodes, self.d_) or noise.shape[0] < 1:
            raise ValueError(
                f"noise must have shape (n, {self.tree_.n_nodes}, {self.d_}), got {tuple(noise.shape)}"
            )
        if not torch.all(torch.isfinite(noise)):
            raise ValueError("noise must be finite")
        with torch.no_grad():
            loss, x = self._forward(
                noise.shape[0], leaves=None, noise=noise, use_residual=residual, stl=False, keep_states=True
            )
        return x.numpy(), -loss.numpy()

    def sample(
        self, n_samples: int, *, residual: bool = True, random_state: int | np.random.Generator | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Full-tree ancestral samples from ``q_phi`` (``residual=False``: the BFFG guide ``q°``).

        Returns ``(x, log_w)``: states (n_samples, n_nodes, d) and log importance weights
        ``log p(x, y) - log q(x)``.
        """
        self._check_fitted()
        n_samples = _check_int(n_samples, "n_samples", 1)
        gen_backup = self._gen
        if random_state is not None:
            self._gen = _generator(random_state)
        try:
            with torch.no_grad():
                loss, x = self._forward(
                    n_samples, leaves=None, noise=None, use_residual=residual, stl=False, keep_states=True
                )
        finally:
            self._gen = gen_backup
        return x.numpy(), -loss.numpy()

    def importance_estimate(
        self, n_samples: int, *, residual: bool = True, random_state: int | np.random.Generator | None = None
    ) -> dict[str, Any]:
        """Self-normalised importance sampling with ``q_phi`` (or the guide): posterior means of every node,
        normalised ESS and ``log Z`` estimate."""
        x, log_w = self.sample(n_samples, residual=residual, random_state=random_state)
        return importance_summary(x, log_w)

    def residual_magnitude(self, n_samples: int = 256, random_state: int | None = 0) -> float:
        """Root-mean-square size of the residual's outputs ``(s, t)`` over guided samples (0 = pure guide)."""
        self._check_fitted()
        x, _ = self.sample(n_samples, residual=True, random_state=random_state)
        tree, d = self.tree_, self.d_
        with torch.no_grad():
            xt = torch.as_tensor(x, dtype=_DT)
            child = torch.as_tensor(np.flatnonzero(np.arange(tree.n_nodes) != tree.root))
            par = torch.from_numpy(np.array(tree.parent))[child]
            x_p = xt[:, par]
            n = x_p.shape[0]
            nodes = child.repeat(n) if self.node_dependent else None
            fx = self._f(x_p.reshape(-1, d), nodes).reshape(x_p.shape)
            ids = child[None, :]
            mu = _mv(self._J_inv[ids], self._F[ids] + _mv(self._Q_inv[ids], fx))
            n, w = x_p.shape[0], child.numel()
            feat = torch.cat([self._logH[ids], self._depth[ids][..., None]], -1)
            ctx = torch.cat([x_p, mu, feat.expand(n, w, d + 1)], -1)
            s, t = self.residual_(ctx)
            s0, t0 = self.residual_.root_params()
            sq = torch.cat([s, t, s0.expand(n, 1, d), t0.expand(n, 1, d)], 1)
        return float(torch.sqrt((sq**2).sum(-1).mean()))

    def guided_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Exact node means and covariances of the guide ``q°`` when ``f`` is affine (then ``q°`` is the
        posterior). Raises ValueError if ``f`` is not affine."""
        self._check_fitted()
        d, tree = self.d_, self.tree_
        if self.node_dependent:
            raise ValueError("guided_moments needs one affine f shared by all edges (node_dependent=False)")
        with torch.no_grad():
            beta = self.f(torch.zeros(1, d, dtype=_DT))[0]
            Phi = (self.f(torch.eye(d, dtype=_DT)) - beta).T
            probe = torch.randn(8, d, dtype=_DT, generator=torch.Generator().manual_seed(0)) * 3.0
            if not torch.allclose(self.f(probe), probe @ Phi.T + beta, rtol=1e-9, atol=1e-9):
                raise ValueError(
                    "f must be affine for guided_moments (the guide is exact only for linear dynamics)"
                )
        n = tree.n_nodes
        means = torch.zeros(n, d, dtype=_DT)
        covs = torch.zeros(n, d, d, dtype=_DT)
        means[tree.root] = self._root_mean
        covs[tree.root] = self._root_L @ self._root_L.T
        for k in range(1, tree.max_depth + 1):
            lev = self._levels[k]
            par = torch.from_numpy(np.array(tree.parent))[lev]
            G = self._J_inv[lev] @ self._Q_inv[lev] @ Phi
            means[lev] = torch.einsum("nij,nj->ni", G, means[par]) + torch.einsum(
                "nij,nj->ni", self._J_inv[lev], self._F[lev] + _mv(self._Q_inv[lev], beta.expand(len(lev), d))
            )
            covs[lev] = G @ covs[par] @ G.transpose(-1, -2) + self._J_inv[lev]
        return means.numpy(), covs.numpy()


def _simulate_prior(
    tree: Tree,
    f: Callable[..., Tensor],
    Q: np.ndarray,
    m0: np.ndarray,
    P0: np.ndarray,
    n: int,
    gen: torch.Generator,
    node_dependent: bool = False,
) -> Tensor:
    """Ancestral draws from the model; ``Q`` is (n_nodes, d, d) (see :func:`check_transition_cov`)."""
    d = m0.shape[0]
    LQ = torch.linalg.cholesky(torch.as_tensor(Q, dtype=_DT))
    x = torch.empty(n, tree.n_nodes, d, dtype=_DT)
    L0 = torch.linalg.cholesky(torch.as_tensor(P0, dtype=_DT))
    x[:, tree.root] = torch.as_tensor(m0, dtype=_DT) + torch.randn(n, d, dtype=_DT, generator=gen) @ L0.T
    for lev in tree.levels[1:]:
        ids = torch.as_tensor(np.array(lev))
        xp = x[:, torch.as_tensor(np.array(tree.parent[lev]))]
        noise = _mv(LQ[ids], torch.randn(n, lev.size, d, dtype=_DT, generator=gen))
        nodes = ids.repeat(n) if node_dependent else None
        x[:, ids] = _call_f(f, xp.reshape(-1, d), nodes, node_dependent).reshape(xp.shape) + noise
    return x


def simulate_tree(
    parent: np.ndarray | Tree,
    f: Callable[[Tensor], Tensor],
    transition_cov: Any,
    root_mean: Any,
    root_cov: Any,
    obs_cov: Any,
    n_samples: int = 1,
    random_state: int | np.random.Generator | None = None,
    node_dependent: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw states (n_samples, n_nodes, d) from the model and leaf observations (n_samples, n_leaves, d).

    ``transition_cov`` and ``node_dependent`` as in :class:`NBFFG`."""
    tree = as_tree(parent)
    m0 = np.atleast_1d(np.asarray(root_mean, dtype=float))
    d = m0.shape[0]
    _check_f(f, d, node_dependent)
    n_samples = _check_int(n_samples, "n_samples", 1)
    Q = check_transition_cov(transition_cov, tree, d)
    P0 = check_spd(root_cov, "root_cov", d)
    R = check_spd(obs_cov, "obs_cov", d)
    gen = _generator(random_state)
    with torch.no_grad():
        x = _simulate_prior(tree, f, Q, m0, P0, n_samples, gen, node_dependent)
        LR = torch.linalg.cholesky(torch.as_tensor(R, dtype=_DT))
        y = (
            x[:, torch.as_tensor(np.array(tree.leaves))]
            + torch.randn(n_samples, tree.n_leaves, d, dtype=_DT, generator=gen) @ LR.T
        )
    return x.numpy(), y.numpy()


def bootstrap_importance_sampling(
    parent: np.ndarray | Tree,
    y: np.ndarray,
    f: Callable[[Tensor], Tensor],
    transition_cov: Any,
    root_mean: Any,
    root_cov: Any,
    obs_cov: Any,
    n_samples: int,
    random_state: int | np.random.Generator | None = None,
    node_dependent: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap (prior-proposal) importance sampling: forward-simulate the tree, weight by the likelihood.

    Returns ``(x, log_w)`` with ``log_w = sum_observed log N(y_c; x_c, R)``.
    """
    tree = as_tree(parent)
    y = np.asarray(y, dtype=float)
    y = check_observations(y[:, None] if y.ndim == 1 else y, tree)
    d = y.shape[1]
    m0 = np.broadcast_to(np.asarray(root_mean, dtype=float), (d,)).copy()
    x, _ = simulate_tree(
        tree, f, transition_cov, m0, root_cov, obs_cov, n_samples, random_state, node_dependent
    )
    R = check_spd(obs_cov, "obs_cov", d)
    obs = np.flatnonzero(~np.isnan(y[:, 0]))
    r = x[:, obs] - y[obs]
    R_inv = np.linalg.inv(R)
    _, logdet = np.linalg.slogdet(R)
    log_w = (-0.5 * np.einsum("noi,ij,noj->no", r, R_inv, r) - 0.5 * (d * np.log(2 * np.pi) + logdet)).sum(1)
    return x, log_w


def importance_summary(x: np.ndarray, log_w: np.ndarray) -> dict[str, Any]:
    """Self-normalised estimates from weighted samples: ``means`` (n_nodes, d), ``ess`` (normalised,
    ``(sum w)^2 / (N sum w^2)``) and ``log_evidence`` (``log mean w``)."""
    log_w = np.asarray(log_w, dtype=float)
    x = np.asarray(x, dtype=float)
    if log_w.ndim != 1 or log_w.size == 0 or x.shape[0] != log_w.size:
        raise ValueError("log_w must be a non-empty 1-D array with one entry per sample of x")
    if np.any(np.isnan(log_w)):
        raise ValueError("log_w must not contain NaN")
    m = np.max(log_w)
    w = np.exp(log_w - m)
    wn = w / w.sum()
    return {
        "means": np.tensordot(wn, x, axes=1),
        "ess": float(1.0 / (np.sum(wn**2) * log_w.size)),
        "log_evidence": float(m + np.log(np.mean(w))),
    }


def linearised_proxy(
    parent: np.ndarray | Tree,
    y: np.ndarray,
    f: Callable[[Tensor], Tensor],
    transition_cov: Any,
    root_mean: Any,
    root_cov: Any,
    obs_cov: Any,
    n_iter: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-edge proxy from iterated local linearisation (an iterated extended smoother on the tree).

    Starting from ``Phi = I, beta = 0``, repeat ``n_iter`` times: smooth the current linear proxy exactly
    (:func:`gaussian_tree_smoother`) and relinearise ``f`` at each parent's smoothed mean ``m_p``:
    ``Phi_c = Df(m_p)``, ``beta_c = f(m_p) - Phi_c m_p``. This is a stronger proxy than the global
    least-squares fit (the hyperiax code linearises near filtered means too); the experiment reports the
    guide-only ESS under it. Returns per-node ``(Phi (n, d, d), beta (n, d))`` for ``NBFFG(proxy=...)``.
    """
    from .backward_filter import gaussian_tree_smoother

    tree = as_tree(parent)
    y = np.asarray(y, dtype=float)
    y = check_observations(y[:, None] if y.ndim == 1 else y, tree)
    d = y.shape[1]
    _check_f(f, d)
    n_iter = _check_int(n_iter, "n_iter", 1)
    Q = check_spd(transition_cov, "transition_cov (one shared matrix for the local linearisation)", d)
    n = tree.n_nodes
    Phi = np.broadcast_to(np.eye(d), (n, d, d)).copy()
    beta = np.zeros((n, d))
    child = np.flatnonzero(np.arange(n) != tree.root)
    jac = torch.func.vmap(torch.func.jacrev(lambda v: f(v[None])[0]))
    for _ in range(n_iter):
        means, _, _ = gaussian_tree_smoother(tree, y, obs_cov, Phi, beta, Q, root_mean, root_cov)
        mp = torch.as_tensor(means[tree.parent[child]], dtype=_DT)
        with torch.no_grad():
            fm = f(mp)
        J = jac(mp).detach()
        Phi[child] = J.numpy()
        beta[child] = (fm - _mv(J, mp)).numpy()
    return Phi, beta
