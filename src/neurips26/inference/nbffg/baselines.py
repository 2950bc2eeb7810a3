"""The digest's two further baselines for tree smoothing: mean-field Gaussian VI and BFFG-MCMC.

- :class:`MeanFieldGaussianVI`: ``q(x) = prod_v N(x_v; m_v, diag(s_v^2))`` over every node (no guide, no
  tree structure in ``q``), trained on the reverse-KL / negative ELBO ``E_q[log q(x) - log p(x, y)]`` with
  reparameterised samples and Adam; afterwards ``q`` is an importance proposal like NBFFG's (:meth:`sample`).
- :func:`bffg_mcmc`: BFFG-MCMC (van der Meulen and Schauer, arXiv 2010.03509): Metropolis-Hastings on the
  standard-normal innovations ``z`` that the guided proposal maps to a tree sample, ``x = T(z)``. The target in
  ``z`` is ``N(z; 0, I) p(T(z), y) / q(T(z))``, so the preconditioned Crank-Nicolson move
  ``z' = rho z + sqrt(1 - rho^2) w`` (which leaves ``N(0, I)`` invariant) is accepted with probability
  ``min(1, w(z') / w(z))``, ``w`` the BFFG importance weight. With ``residual=True`` the NBFFG proposal is the
  map (the digest's step 7). ``rho`` adapts towards 23% acceptance during burn-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .backward_filter import check_observations, check_spd
from .nbffg import NBFFG, _call_f, _check_f, _check_int, _generator, check_transition_cov
from .tree import Tree, as_tree

_DT = torch.float64
_LOG2PI = float(np.log(2.0 * np.pi))


def _gauss_logpdf(
    x: torch.Tensor, mean: torch.Tensor, L_inv: torch.Tensor, logdet: torch.Tensor
) -> torch.Tensor:
    """``log N(x; mean, C)`` over the last axis, batched, from ``L_inv = chol(C)^{-1}`` and ``logdet = log|C|/2``
    (precomputed once: the training loop evaluates it every step)."""
    r = (L_inv @ (x - mean).unsqueeze(-1)).squeeze(-1)
    return -0.5 * (r**2).sum(-1) - logdet - 0.5 * x.shape[-1] * _LOG2PI


def _factor(C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    L = torch.linalg.cholesky(C)
    eye = torch.eye(C.shape[-1], dtype=C.dtype).expand_as(C)
    return torch.linalg.solve_triangular(L, eye, upper=False), torch.log(
        torch.diagonal(L, dim1=-2, dim2=-1)
    ).sum(-1)


class MeanFieldGaussianVI:
    """Mean-field Gaussian variational posterior over all nodes of a tree model (the digest's VI baseline).

    Model as in :class:`~.nbffg.NBFFG`: ``x_root ~ N(m0, P0)``, ``x_c | x_p ~ N(f(x_p), Q_c)``,
    ``y_c = x_c + N(0, R)`` at observed nodes. Parameters: ``n_steps`` Adam steps of ``batch_size``
    reparameterised samples at ``learning_rate`` (cosine-decayed to 5%); means start at the observation (leaves)
    or the prior mean, scales at ``sqrt(diag Q)``.
    """

    def __init__(
        self,
        f: Callable[..., torch.Tensor],
        transition_cov: Any,
        root_mean: Any = 0.0,
        root_cov: Any = 1.0,
        obs_cov: Any = 0.01,
        *,
        n_steps: int = 1000,
        batch_size: int = 128,
        learning_rate: float = 1e-2,
        node_dependent: bool = False,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.f = f
        self.transition_cov = transition_cov
        self.root_mean = root_mean
        self.root_cov = root_cov
        self.obs_cov = obs_cov
        self.n_steps = n_steps
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.node_dependent = node_dependent
        self.random_state = random_state

    def fit(self, parent: np.ndarray | Tree, y: np.ndarray) -> MeanFieldGaussianVI:
        tree = as_tree(parent)
        y = np.asarray(y, dtype=float)
        y = check_observations(y[:, None] if y.ndim == 1 else y, tree)
        d = y.shape[1]
        _check_f(self.f, d, self.node_dependent)
        n_steps = _check_int(self.n_steps, "n_steps", 1)
        batch = _check_int(self.batch_size, "batch_size", 1)
        if not (
            isinstance(self.learning_rate, (int, float))
            and np.isfinite(self.learning_rate)
            and self.learning_rate > 0
        ):
            raise ValueError(f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        Q = check_transition_cov(self.transition_cov, tree, d)
        P0 = check_spd(self.root_cov, "root_cov", d)
        R = check_spd(self.obs_cov, "obs_cov", d)
        m0 = np.broadcast_to(np.asarray(self.root_mean, dtype=float), (d,)).copy()
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=float), dtype=_DT)  # noqa: E731
        self.tree_, self.d_ = tree, d
        self._child = torch.as_tensor(np.flatnonzero(np.arange(tree.n_nodes) != tree.root))
        self._par = torch.as_tensor(np.array(tree.parent))[self._child]
        self._Q_f = _factor(t(Q)[self._child])
        self._P0_f, self._m0 = _factor(t(P0)), t(m0)
        self._R_f = _factor(t(R))
        obs = np.flatnonzero(~np.isnan(y[:, 0]))
        self._obs, self._y = torch.as_tensor(obs), t(y[obs])
        init = np.broadcast_to(m0, (tree.n_nodes, d)).copy()
        init[obs] = y[obs]
        self.mean_ = t(init).requires_grad_(True)
        scale0 = np.sqrt(np.diagonal(Q[self._child.numpy()], axis1=1, axis2=2).mean(0))
        self.log_scale_ = torch.log(t(np.broadcast_to(scale0, (tree.n_nodes, d)).copy())).requires_grad_(True)
        gen = _generator(self.random_state)
        self._gen = gen
        opt = torch.optim.Adam([self.mean_, self.log_scale_], lr=float(self.learning_rate))
        hist = np.empty(n_steps)
        lrs = self.learning_rate * (0.05 + 0.95 * 0.5 * (1 + np.cos(np.pi * np.arange(n_steps) / n_steps)))
        for i in range(n_steps):
            for g in opt.param_groups:
                g["lr"] = float(lrs[i])
            eps = torch.randn(batch, tree.n_nodes, d, dtype=_DT, generator=gen)
            x = self.mean_ + torch.exp(self.log_scale_) * eps
            log_q = (-0.5 * eps**2 - self.log_scale_ - 0.5 * _LOG2PI).sum((-1, -2))
            loss = (log_q - self.log_joint(x)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            hist[i] = float(loss.detach())
        self.loss_history_ = hist
        return self

    def log_joint(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(x, y)`` for states ``x`` (n, n_nodes, d), vectorised over every edge at once."""
        n, d = x.shape[0], self.d_
        lp = _gauss_logpdf(x[:, self.tree_.root], self._m0, *self._P0_f)
        xp = x[:, self._par]
        nodes = self._child.repeat(n) if self.node_dependent else None
        fx = _call_f(self.f, xp.reshape(-1, d), nodes, self.node_dependent).reshape(xp.shape)
        lp = lp + _gauss_logpdf(x[:, self._child], fx, *self._Q_f).sum(1)
        return lp + _gauss_logpdf(self._y, x[:, self._obs], *self._R_f).sum(1)

    def sample(
        self, n_samples: int, *, random_state: int | np.random.Generator | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(x, log_w)``: draws from ``q`` and their log importance weights ``log p(x, y) - log q(x)``."""
        if not hasattr(self, "mean_"):
            raise RuntimeError(
                "this MeanFieldGaussianVI instance is not fitted yet; call fit(parent, y) first"
            )
        n_samples = _check_int(n_samples, "n_samples", 1)
        gen = _generator(random_state) if random_state is not None else self._gen
        with torch.no_grad():
            eps = torch.randn(n_samples, self.tree_.n_nodes, self.d_, dtype=_DT, generator=gen)
            x = self.mean_ + torch.exp(self.log_scale_) * eps
            log_q = (-0.5 * eps**2 - self.log_scale_ - 0.5 * _LOG2PI).sum((-1, -2))
            log_w = self.log_joint(x) - log_q
        return x.numpy(), log_w.numpy()


def bffg_mcmc(
    model: NBFFG,
    n_chains: int = 20,
    n_iter: int = 100,
    *,
    rho: float = 0.9,
    burn_in: float = 0.5,
    residual: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> dict[str, Any]:
    """BFFG-MCMC with preconditioned Crank-Nicolson moves on the guide's innovations (module docstring).

    ``n_chains`` chains run side by side for ``n_iter`` iterations (``n_chains * n_iter`` guided tree
    simulations in all); the first ``burn_in`` fraction adapts ``rho`` (Robbins-Monro on ``log(1 - rho)``,
    target acceptance 0.234) and is discarded. Returns ``means`` (n_nodes, d) over the kept states,
    ``acceptance`` (after burn-in), ``rho`` (the adapted value) and ``samples`` (kept, (k, n_nodes, d)).
    """
    if not isinstance(model, NBFFG) or not hasattr(model, "residual_"):
        raise ValueError("model must be a fitted NBFFG (its guide, or its residual proposal, is the map)")
    n_chains = _check_int(n_chains, "n_chains", 1)
    n_iter = _check_int(n_iter, "n_iter", 2)
    if not (isinstance(rho, (int, float)) and 0.0 <= rho < 1.0):
        raise ValueError(f"rho must lie in [0, 1), got {rho!r}")
    if not (isinstance(burn_in, (int, float)) and 0.0 <= burn_in < 1.0):
        raise ValueError(f"burn_in must lie in [0, 1), got {burn_in!r}")
    rng = np.random.default_rng(
        random_state if not isinstance(random_state, np.random.Generator) else random_state
    )
    shape = (n_chains, model.tree_.n_nodes, model.d_)
    z = rng.standard_normal(shape)
    x, lw = model.transform(z, residual=residual)
    n_burn = int(burn_in * n_iter)
    log_gap = np.log1p(-rho)
    kept, accepted, proposed = [], 0, 0
    for it in range(n_iter):
        r = 1.0 - np.exp(log_gap)
        z_new = r * z + np.sqrt(1.0 - r * r) * rng.standard_normal(shape)
        x_new, lw_new = model.transform(z_new, residual=residual)
        acc = np.log(rng.random(n_chains)) < lw_new - lw
        z[acc], x[acc], lw[acc] = z_new[acc], x_new[acc], lw_new[acc]
        if it < n_burn:
            log_gap += (acc.mean() - 0.234) / np.sqrt(it + 1.0)
            log_gap = min(log_gap, 0.0)
        else:
            accepted += int(acc.sum())
            proposed += n_chains
            kept.append(x.copy())
    samples = np.concatenate(kept, axis=0)
    return {
        "means": samples.mean(0),
        "acceptance": accepted / max(1, proposed),
        "rho": float(1.0 - np.exp(log_gap)),
        "samples": samples,
    }
