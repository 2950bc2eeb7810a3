r"""Optimizer strategies against an FTRL learner: the optimal-control reference and repeated play with any
user-supplied optimizer.

**Optimal control against continuous-time FTRL** (Assos, Dagan & Daskalakis, "Maximizing utility in multi-agent
environments by anticipating the behavior of other learners", NeurIPS 2024, arXiv 2407.04889, for the replicator
dynamics, i.e. continuous-time Hedge; the same argument holds for any regulariser [R]). In continuous time the
learner plays :math:`y(t) = \nabla h^*(-\eta L(t))` with :math:`L(t) = \int_0^t A^\top x(s)\,ds`, and

.. math:: \frac{d}{dt} h^*(-\eta L(t)) = -\eta\, x(t)^\top A\, y(t),

so the optimizer's total utility :math:`\int_0^T x^\top A y\,dt = \frac{1}{\eta}\big(h^*(0) - h^*(-\eta A^\top
X_T)\big)` depends on its strategies only through their sum :math:`X_T = \int_0^T x\,dt = T \bar x`. The best plan
over the horizon is therefore a *constant* strategy

.. math:: \bar x^{oc}(T) = \arg\min_{\bar x \in \Delta_n} h^*(-\eta T A^\top \bar x),

a convex program (:math:`h^*` is convex), solved here by SLSQP with the exact gradient
:math:`-\eta T A \nabla h^*`. Its continuous-time surplus is never below the max-min strategy's (which reaches
``ln(1 + N/k)/eta`` for Hedge). Played in discrete time (:func:`repeated_play` with ``"optimal_control"``), it is
the digest's strong reference; the discrete-time algorithm of Assos et al. against MWU is not reproduced.

:func:`repeated_play` runs any optimizer against FTRL round by round: a fixed mixed strategy, the named
strategies ``"maxmin"``, ``"best_response"``, ``"optimal_control"``, or a callable ``optimizer(t, y, cum_loss) ->
x`` (clairvoyant: it sees the learner's ``y_t`` before moving) returning a mixed strategy or a pure action.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from .ftrl import _check_eta, _check_regularizer, ftrl_strategy
from .games import _check_strategy, maxmin_strategy, payoff_matrix
from .surplus import _check_horizon

__all__ = [
    "PlayTrajectory",
    "regularizer_conjugate",
    "continuous_time_surplus",
    "optimal_control_strategy",
    "repeated_play",
]

NAMED_OPTIMIZERS = ("maxmin", "best_response", "optimal_control")


def _h(y: np.ndarray, regularizer: str) -> np.ndarray:
    """The regulariser ``h(y)`` (last axis), as in :mod:`.ftrl`."""
    if regularizer == "entropy":
        return np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0)), 0.0), axis=-1)
    if regularizer == "euclidean":
        return 0.5 * np.sum((y - 1.0 / y.shape[-1]) ** 2, axis=-1)
    if regularizer == "tsallis":
        return -2.0 * np.sum(np.sqrt(y), axis=-1)
    return -np.sum(np.log(y), axis=-1)  # log_barrier


def regularizer_conjugate(cum_loss: np.ndarray, eta: float, regularizer: str = "entropy") -> np.ndarray:
    """``h*(-eta L) = max_{y in simplex} <-eta L, y> - h(y)``, attained at the FTRL strategy ``y(L)``."""
    regularizer = _check_regularizer(regularizer)
    eta = _check_eta(eta)
    L = np.asarray(cum_loss, dtype=float)
    if regularizer == "entropy":
        return logsumexp(-eta * L, axis=-1)
    y = ftrl_strategy(L, eta, regularizer)
    return -eta * np.sum(L * y, axis=-1) - _h(y, regularizer)


def continuous_time_surplus(
    game, x: np.ndarray, eta: float, T: float, regularizer: str = "entropy", *, value: float | None = None
) -> float:
    """Surplus ``int_0^T x^T A y(t) dt - T v`` of the constant strategy ``x`` against continuous-time FTRL:
    ``(h*(0) - h*(-eta T A^T x)) / eta - T v`` (see the module docstring)."""
    A = payoff_matrix(game)
    x = _check_strategy(x, A.shape[0], "x")
    eta = _check_eta(eta)
    if not (np.isfinite(T) and T > 0):
        raise ValueError(f"T must be a finite number > 0, got {T!r}")
    v = maxmin_strategy(A)[1] if value is None else float(value)
    zero = regularizer_conjugate(np.zeros(A.shape[1]), eta, regularizer)
    return float((zero - regularizer_conjugate(T * (A.T @ x), eta, regularizer)) / eta - T * v)


def optimal_control_strategy(
    game, eta: float, T: float, regularizer: str = "entropy"
) -> tuple[np.ndarray, float]:
    """The optimal constant plan ``x_oc`` against continuous-time FTRL over ``[0, T]``, and its surplus.

    Minimises the convex ``h*(-eta T A^T x)`` over the simplex (SLSQP, exact gradient, started at the max-min
    strategy). Returns ``(x_oc, continuous-time surplus of x_oc)``.
    """
    A = payoff_matrix(game)
    regularizer = _check_regularizer(regularizer)
    eta = _check_eta(eta)
    if not (np.isfinite(T) and T > 0):
        raise ValueError(f"T must be a finite number > 0, got {T!r}")
    x0, v = maxmin_strategy(A)
    n = A.shape[0]
    scale = eta * T * max(1.0, float(np.abs(A).max()))  # keeps the objective of order one for SLSQP

    def f(x: np.ndarray) -> tuple[float, np.ndarray]:
        L = T * (A.T @ x)
        val = float(regularizer_conjugate(L, eta, regularizer))
        grad = -eta * T * (A @ ftrl_strategy(L, eta, regularizer))
        return val / scale, grad / scale

    if n == 1:
        x = np.ones(1)
    else:
        res = minimize(
            f,
            x0,
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * n,
            constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": lambda x: np.ones(n)}],
            options={"ftol": 1e-15, "maxiter": 500},
        )
        x = np.clip(res.x, 0.0, None)
        x /= x.sum()
        if f(x)[0] > f(x0)[0]:  # never worse than the start (SLSQP may stop early on flat objectives)
            x = x0
    return x, continuous_time_surplus(A, x, eta, T, regularizer, value=v)


@dataclass(frozen=True)
class PlayTrajectory:
    """Result of :func:`repeated_play` (round ``t = 1..T`` at index ``t - 1``)."""

    x: np.ndarray  # (T, n) the optimizer's mixed strategies
    y: np.ndarray  # (T, m) the learner's strategies
    payoff: np.ndarray  # (T,) x_t^T A y_t
    cumulative_surplus: np.ndarray  # (T,) S_t = sum_{s<=t} x_s^T A y_s - t v
    regret: float  # the learner's realised regret after T rounds
    value: float
    eta: float
    regularizer: str

    @property
    def surplus(self) -> float:
        return float(self.cumulative_surplus[-1])


def _as_strategy(out, n: int, t: int) -> np.ndarray:
    if isinstance(out, (int, np.integer)) and not isinstance(out, (bool, np.bool_)):
        if not 0 <= out < n:
            raise ValueError(
                f"optimizer returned the pure action {out} at round {t}; expected one in [0, {n - 1}]"
            )
        x = np.zeros(n)
        x[int(out)] = 1.0
        return x
    try:
        return _check_strategy(out, n, "optimizer output")
    except (ValueError, TypeError) as err:
        raise ValueError(f"optimizer returned an invalid strategy at round {t}: {err}") from None


def repeated_play(
    game,
    optimizer: str | np.ndarray | Callable[[int, np.ndarray, np.ndarray], np.ndarray | int],
    eta: float,
    T: int,
    regularizer: str = "entropy",
    *,
    value: float | None = None,
) -> PlayTrajectory:
    """Play ``T`` rounds of the zero-sum ``game`` between ``optimizer`` (row player, maximises) and FTRL.

    Parameters
    ----------
    game : payoff matrix ``A`` (n, m) or a zero-sum game object (``nashpy.Game(A)``).
    optimizer : a mixed strategy (n,) played every round; ``"maxmin"`` (the LP max-min strategy),
        ``"best_response"`` (clairvoyant myopic best response to ``y_t``), ``"optimal_control"`` (the optimal
        constant plan against continuous-time FTRL for this ``eta`` and ``T``); or a callable
        ``optimizer(t, y, cum_loss)`` with ``t`` the round (1-based), ``y`` the learner's strategy this round and
        ``cum_loss`` the learner's cumulative loss so far, returning a mixed strategy (n,) or a pure action.
    eta, T, regularizer : the learner's FTRL step, horizon and regulariser (see :mod:`.ftrl`).
    value : the game value (default: by linear programming).

    A fixed strategy (an array, ``"maxmin"``, ``"optimal_control"``) is played for all ``T`` rounds at once
    (the learner's cumulative loss is then known in advance); ``"best_response"`` and callables react to the
    learner's strategy each round and run round by round (:func:`.surplus.best_response_dynamics` batches
    best response over many games).
    """
    A = payoff_matrix(game)
    eta = _check_eta(eta)
    T = _check_horizon(T)
    regularizer = _check_regularizer(regularizer)
    n, m = A.shape
    x_star, v_lp = maxmin_strategy(A)
    v = v_lp if value is None else float(value)
    if not np.isfinite(v):
        raise ValueError(f"value must be finite, got {value!r}")
    if isinstance(optimizer, str):
        if optimizer not in NAMED_OPTIMIZERS:
            raise ValueError(
                f"optimizer must be one of {NAMED_OPTIMIZERS}, a strategy or a callable, got {optimizer!r}"
            )
        if optimizer == "maxmin":
            fixed = x_star
        elif optimizer == "optimal_control":
            fixed = optimal_control_strategy(A, eta, T, regularizer)[0]
        else:
            fixed = None
        choose = None
    elif callable(optimizer):
        fixed, choose = None, optimizer
    else:
        fixed, choose = _check_strategy(optimizer, n, "optimizer"), None
    if fixed is not None:
        # a fixed strategy: the learner's loss before round t is (t - 1) A^T x, so every round at once. The
        # running sum is accumulated in the loop's order (cumsum is sequential), so L_t is the loop's, bit for bit
        loss = A.T @ fixed
        L_all = np.cumsum(np.vstack([np.zeros(m), np.broadcast_to(loss, (T, m))]), axis=0)  # L_1 .. L_{T+1}
        ys = ftrl_strategy(L_all[:T], eta, regularizer)
        pay = ys @ (fixed @ A)
        return PlayTrajectory(
            x=np.broadcast_to(fixed, (T, n)).copy(),
            y=ys,
            payoff=pay,
            cumulative_surplus=np.cumsum(pay - v),
            regret=float(pay.sum() - L_all[T].min()),
            value=v,
            eta=eta,
            regularizer=regularizer,
        )
    # best response and callables: x_t depends on y_t, which depends on every earlier x, so round by round
    xs, ys, pay = np.empty((T, n)), np.empty((T, m)), np.empty(T)
    L = np.zeros(m)
    for t in range(T):
        y = ftrl_strategy(L, eta, regularizer)
        if choose is None:  # best response to the learner's current strategy
            x = np.zeros(n)
            x[int(np.argmax(A @ y))] = 1.0
        else:
            x = _as_strategy(choose(t + 1, y.copy(), L.copy()), n, t + 1)
        xs[t], ys[t] = x, y
        pay[t] = x @ A @ y
        L += A.T @ x
    return PlayTrajectory(
        x=xs,
        y=ys,
        payoff=pay,
        cumulative_surplus=np.cumsum(pay - v),
        regret=float(pay.sum() - L.min()),
        value=v,
        eta=eta,
        regularizer=regularizer,
    )
