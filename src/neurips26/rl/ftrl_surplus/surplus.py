r"""Strategic surplus of a clairvoyant optimizer against an FTRL learner.

Su & Vlatakis-Gkaragkounis, *No Coin Left Behind: Maximizing Strategic Surplus Against No-Regret Dynamics*
(arXiv 2604.05129; v1 "On the Exploitability of FTRL Dynamics"). In a repeated zero-sum game ``A`` (row
player maximises ``x^T A y``) the learner runs constant-step FTRL (:mod:`.ftrl`) and the optimizer, who knows
the learner's rule, collects the surplus

.. math:: S_T = \sum_{t=1}^T x_t^\top A y_t - T v .

Two optimizers:

- **fixed max-min** (:func:`fixed_optimizer_dynamics`): ``x_t = x*``. The learner faces the constant loss
  ``l = A^T x*``, so ``L_t = (t-1) l`` and every ``y_t`` is computed at once (vectorised over time). The
  surplus per round is ``<l - v 1, y_t> >= 0``: the learner *sweeps* mass off its ``N`` suboptimal actions.
  Continuous-time closed forms (uniform start; derived by the digest authors, not taken from the paper [R]):
  Hedge ``eta S_inf = ln(1 + N/k)`` for any gaps (:func:`hedge_sweeping_surplus`); Euclidean with equal gaps
  ``D``: each suboptimal coordinate is ``1/n - eta t D k / n`` until it is eliminated at ``t* = 1/(eta D k)``,
  and ``eta S_inf = N / (2 n k)`` with ``n = k + N`` (:func:`euclidean_sweeping_surplus`).
- **alternating / best response** [R] (:func:`best_response_dynamics`): the clairvoyant optimizer computes
  ``y_t`` before moving and plays a pure best response ``e_i``, ``i = argmax_i (A y_t)_i``. This myopic
  instantiation is ours; the paper's alternating optimizer may be more elaborate. Vectorised over a batch of
  games of equal shape; the loop over rounds is inherently sequential.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ftrl import _check_eta, _check_regularizer, ftrl_log_strategy, ftrl_strategy
from .games import _check_payoff, _check_strategy, maxmin_strategy

__all__ = [
    "FixedOptimizerTrajectory",
    "BestResponseTrajectory",
    "fixed_optimizer_dynamics",
    "best_response_dynamics",
    "hedge_sweeping_surplus",
    "euclidean_sweeping_surplus",
    "euclidean_elimination_time",
    "elimination_round",
]


def _check_horizon(T: int) -> int:
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be an integer >= 1, got {T!r}")
    return int(T)


@dataclass(frozen=True)
class FixedOptimizerTrajectory:
    """Result of :func:`fixed_optimizer_dynamics` (round ``t = 1..T`` is stored at index ``t - 1``)."""

    round_surplus: np.ndarray  # (T,) x*^T A y_t - v
    cumulative_surplus: np.ndarray  # (T,) S_t
    log_suboptimal_mass: np.ndarray  # (T,) log sum_{j suboptimal} y_t[j]; -inf once exactly eliminated
    gaps: np.ndarray  # (m,) D_j = l_j - v
    value: float
    eta: float
    regularizer: str

    @property
    def surplus(self) -> float:
        """``S_T``."""
        return float(self.cumulative_surplus[-1])

    @property
    def remaining_surplus(self) -> np.ndarray:
        """``S_T - S_t`` for ``t = 1..T`` (the surplus still to come within the horizon)."""
        return self.cumulative_surplus[-1] - self.cumulative_surplus


@dataclass(frozen=True)
class BestResponseTrajectory:
    """Result of :func:`best_response_dynamics` for a batch of ``B`` games."""

    cumulative_surplus: np.ndarray  # (B, T) S_t
    regret: np.ndarray  # (B,) the learner's realised regret after T rounds
    values: np.ndarray  # (B,) game values
    eta: float
    regularizer: str


def fixed_optimizer_dynamics(
    A: np.ndarray,
    eta: float,
    T: int,
    regularizer: str = "entropy",
    *,
    x: np.ndarray | None = None,
    value: float | None = None,
    atol: float = 1e-9,
) -> FixedOptimizerTrajectory:
    """Play the fixed max-min optimizer ``x_t = x`` against FTRL for ``T`` rounds.

    Parameters
    ----------
    A : payoff matrix (n, m); the learner (columns) minimises.
    eta : FTRL step size > 0.
    T : number of rounds >= 1.
    regularizer : ``"entropy"``, ``"euclidean"``, ``"tsallis"`` or ``"log_barrier"``.
    x : the optimizer's strategy; default: the max-min strategy from :func:`.games.maxmin_strategy`.
    value : the game value; default: the LP value (or ``min_j (A^T x)_j`` when ``x`` is given).
    atol : gaps at most ``atol`` count as optimal (set to zero), absorbing LP round-off.

    Returns
    -------
    FixedOptimizerTrajectory
    """
    A = _check_payoff(A)
    eta = _check_eta(eta)
    T = _check_horizon(T)
    regularizer = _check_regularizer(regularizer)
    if x is None:
        x, lp_value = maxmin_strategy(A)
        value = lp_value if value is None else value
    else:
        x = _check_strategy(x, A.shape[0], "x")
    loss = A.T @ x
    v = float(loss.min()) if value is None else float(value)
    if not np.isfinite(v):
        raise ValueError(f"value must be finite, got {value!r}")
    gaps = loss - v
    gaps[np.abs(gaps) <= atol] = 0.0
    # L_t = (t - 1) l for t = 1..T; FTRL is invariant to a common shift, so use the gaps as the loss
    cum = np.arange(T, dtype=float)[:, None] * gaps[None, :]
    y = ftrl_strategy(cum, eta, regularizer)
    round_surplus = y @ gaps
    sub = gaps > 0
    if np.any(sub):
        logy = ftrl_log_strategy(cum, eta, regularizer)
        log_sub = np.logaddexp.reduce(logy[:, sub], axis=1)
    else:
        log_sub = np.full(T, -np.inf)
    return FixedOptimizerTrajectory(
        round_surplus=round_surplus,
        cumulative_surplus=np.cumsum(round_surplus),
        log_suboptimal_mass=log_sub,
        gaps=gaps,
        value=v,
        eta=eta,
        regularizer=regularizer,
    )


def elimination_round(trajectory: FixedOptimizerTrajectory) -> int | None:
    """First round ``t`` (1-based) with exactly zero suboptimal mass; ``None`` if none within the horizon."""
    hit = np.flatnonzero(np.isneginf(trajectory.log_suboptimal_mass))
    return int(hit[0]) + 1 if hit.size else None


def best_response_dynamics(
    A: np.ndarray, eta: float, T: int, regularizer: str = "entropy", *, values: np.ndarray | None = None
) -> BestResponseTrajectory:
    """Clairvoyant myopic best response ``x_t = e_{argmax A y_t}`` against FTRL, for one game or a batch.

    Parameters
    ----------
    A : payoff matrix (n, m) or a batch (B, n, m) of games of equal shape.
    eta, T, regularizer : as in :func:`fixed_optimizer_dynamics`.
    values : (B,) game values; default: computed by linear programming.

    Returns
    -------
    BestResponseTrajectory (batch axis of length 1 for a single game).
    """
    if hasattr(A, "payoff_matrices"):
        A = _check_payoff(A)
    A = np.asarray(A, dtype=float)
    if A.ndim == 2:
        A = A[None]
    if A.ndim != 3 or min(A.shape) < 1:
        raise ValueError(f"A must have shape (n, m) or (B, n, m) with all sizes >= 1, got {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("A must contain only finite values (no NaN or inf)")
    eta = _check_eta(eta)
    T = _check_horizon(T)
    regularizer = _check_regularizer(regularizer)
    B, n, m = A.shape
    if values is None:
        v = np.array([maxmin_strategy(a)[1] for a in A])
    else:
        v = np.asarray(values, dtype=float).reshape(-1)
        if v.shape != (B,) or not np.all(np.isfinite(v)):
            raise ValueError(f"values must be {B} finite game values, one per game")
    L = np.zeros((B, m))
    payoff = np.empty((B, T))
    rows = np.arange(B)
    for t in range(T):
        y = ftrl_strategy(L, eta, regularizer)
        Ay = np.einsum("bnm,bm->bn", A, y)
        i = np.argmax(Ay, axis=1)
        payoff[:, t] = Ay[rows, i]
        L += A[rows, i, :]
    total = payoff.sum(axis=1)
    return BestResponseTrajectory(
        cumulative_surplus=np.cumsum(payoff - v[:, None], axis=1),
        regret=total - L.min(axis=1),
        values=v,
        eta=eta,
        regularizer=regularizer,
    )


def _check_counts(n_suboptimal: int, n_optimal: int) -> tuple[int, int]:
    for name, val, lo in (("n_suboptimal", n_suboptimal, 0), ("n_optimal", n_optimal, 1)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
    return int(n_suboptimal), int(n_optimal)


def hedge_sweeping_surplus(n_suboptimal: int, n_optimal: int, eta: float) -> float:
    """Continuous-time Hedge surplus against the fixed max-min optimizer: ``ln(1 + N/k) / eta`` (any gaps)."""
    N, k = _check_counts(n_suboptimal, n_optimal)
    return float(np.log1p(N / k) / _check_eta(eta))


def euclidean_sweeping_surplus(n_suboptimal: int, n_optimal: int, eta: float) -> float:
    """Continuous-time Euclidean-FTRL surplus with equal gaps: ``N / (2 n k eta)``, ``n = k + N``."""
    N, k = _check_counts(n_suboptimal, n_optimal)
    return float(N / (2.0 * (N + k) * k * _check_eta(eta)))


def euclidean_elimination_time(gap: float, n_optimal: int, eta: float) -> float:
    """Continuous time ``t* = 1/(eta D k)`` at which Euclidean FTRL drops all (equal-gap) suboptimal mass."""
    _, k = _check_counts(0, n_optimal)
    if not (np.isfinite(gap) and gap > 0):
        raise ValueError(f"gap must be a finite number > 0, got {gap!r}")
    return float(1.0 / (_check_eta(eta) * gap * k))
