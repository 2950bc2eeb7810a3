"""Two-player zero-sum matrix games for the FTRL-surplus study.

Every entry point takes the payoff matrix ``A`` or a nashpy-style zero-sum game object (``nashpy.Game(A)``, or
anything with ``payoff_matrices = (A, -A)``); see :func:`payoff_matrix`.

Convention (as in Su & Vlatakis-Gkaragkounis, arXiv 2604.05129): the optimizer is the *row* player and
maximises ``x^T A y``; the learner is the *column* player and minimises it. The game value is
``v = max_x min_y x^T A y``; a max-min strategy ``x*`` attains it. Against ``x*`` the learner faces the
constant loss vector ``l = A^T x*``; column ``j`` is *optimal* when ``l_j = v`` and *suboptimal* when
``l_j > v`` (gap ``D_j = l_j - v``). ``N`` counts suboptimal and ``k`` optimal columns.

Generators:

- :func:`planted_game` builds a game whose max-min strategy, value, ``k``, ``N`` and gaps are known by
  construction (a ``k x k`` circulant block with a fully mixed equilibrium, plus suboptimal columns whose loss
  under ``x*`` is exactly ``v + D_j``, plus dominated extra rows). This construction is ours [R].
- :func:`circulant_game` (``N = 0``: every column is optimal), :func:`rock_paper_scissors`,
  :func:`random_gaussian_game`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linprog
from sklearn.utils import check_random_state

__all__ = [
    "payoff_matrix",
    "PlantedGame",
    "maxmin_strategy",
    "learner_action_gaps",
    "planted_game",
    "circulant_game",
    "rock_paper_scissors",
    "random_gaussian_game",
]


def payoff_matrix(game: Any, name: str = "A") -> np.ndarray:
    """The row player's payoff matrix of a zero-sum ``game``: a 2-D array, or a nashpy-style game object
    (anything with ``payoff_matrices = (A, B)``, e.g. ``nashpy.Game(A)``) whose ``B`` must equal ``-A``."""
    if hasattr(game, "payoff_matrices"):
        mats = game.payoff_matrices
        if not (isinstance(mats, (tuple, list)) and len(mats) == 2):
            raise ValueError(f"{name}: a game object's payoff_matrices must be a pair (A, B), got {mats!r}")
        A, B = (np.asarray(m, dtype=float) for m in mats)
        if A.shape != B.shape or not np.allclose(
            A, -B, rtol=0, atol=1e-12 * max(1.0, float(np.abs(A).max(initial=0)))
        ):
            raise ValueError(
                f"{name} must be a zero-sum game (B == -A): strategic surplus is defined against the game value "
                "of a zero-sum game"
            )
        return _check_payoff(A, name)
    return _check_payoff(game, name)


def _check_payoff(A: np.ndarray, name: str = "A") -> np.ndarray:
    if hasattr(A, "payoff_matrices"):
        return payoff_matrix(A, name)
    if isinstance(A, (str, bytes)) or A is None:
        raise TypeError(
            f"{name} must be a 2-D array of payoffs or a zero-sum game object, got {type(A).__name__}"
        )
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-D array (n rows x m columns), got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must contain only finite values (no NaN or inf)")
    return A


def _generator(random_state: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(check_random_state(random_state).randint(2**31 - 1))


def _check_strategy(x: np.ndarray, size: int, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x < -1e-12) or abs(x.sum() - 1.0) > 1e-8:
        raise ValueError(f"{name} must be a probability vector (entries >= 0 summing to 1)")
    return np.clip(x, 0.0, None) / np.clip(x, 0.0, None).sum()


def maxmin_strategy(A: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Max-min strategy of the row player and the game value, by linear programming.

    Solves :math:`\max_{x \in \Delta_n, v} v` s.t. :math:`A^\top x \ge v \mathbf 1` with HiGHS
    (``scipy.optimize.linprog``). The solver is deterministic, so degenerate games get a reproducible ``x*``.

    Parameters
    ----------
    A : array of shape (n, m), payoff to the (maximising) row player, or a zero-sum game object
        (``nashpy.Game(A)``).

    Returns
    -------
    x_star : array of shape (n,), a max-min strategy.
    value : float, the game value ``v``.
    """
    A = _check_payoff(A)
    n, m = A.shape
    # variables z = (x_1..x_n, v); minimise -v
    c = np.zeros(n + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-A.T, np.ones((m, 1))])  # v - (A^T x)_j <= 0
    A_eq = np.hstack([np.ones((1, n)), np.zeros((1, 1))])
    bounds = [(0.0, None)] * n + [(None, None)]
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(m), A_eq=A_eq, b_eq=[1.0], bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - a finite matrix game always has a solution
        raise RuntimeError(f"max-min LP failed: {res.message}")
    x = np.clip(res.x[:n], 0.0, None)
    x /= x.sum()
    value = float(np.min(A.T @ x))
    return x, value


def learner_action_gaps(
    A: np.ndarray, x: np.ndarray, value: float | None = None, *, atol: float = 1e-7
) -> tuple[np.ndarray, int, int]:
    """Gaps ``D_j = (A^T x)_j - v`` of the learner's actions against a fixed optimizer strategy ``x``.

    Parameters
    ----------
    A : array (n, m).
    x : array (n,), the optimizer's (max-min) strategy.
    value : the game value; defaults to ``min_j (A^T x)_j`` (correct when ``x`` is max-min).
    atol : gaps at most ``atol`` count as zero (optimal actions).

    Returns
    -------
    gaps : array (m,), zero on optimal actions.
    n_suboptimal : ``N``, the number of actions with gap > ``atol``.
    n_optimal : ``k``, the number of the others.
    """
    A = _check_payoff(A)
    x = _check_strategy(x, A.shape[0], "x")
    if not (np.isfinite(atol) and atol >= 0):
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    loss = A.T @ x
    v = float(loss.min()) if value is None else float(value)
    if not np.isfinite(v):
        raise ValueError("value must be finite")
    gaps = loss - v
    gaps[np.abs(gaps) <= atol] = 0.0
    n_sub = int(np.sum(gaps > atol))
    return gaps, n_sub, int(A.shape[1] - n_sub)


@dataclass(frozen=True)
class PlantedGame:
    """A game with a planted max-min strategy (see :func:`planted_game`)."""

    A: np.ndarray
    x_star: np.ndarray
    value: float
    gaps: np.ndarray  # (m,) gap of each learner action; 0 on the k optimal ones

    @property
    def n_suboptimal(self) -> int:
        return int(np.sum(self.gaps > 0))

    @property
    def n_optimal(self) -> int:
        return int(np.sum(self.gaps == 0))


def planted_game(
    n_optimal: int,
    gaps: np.ndarray | list[float],
    *,
    n_extra_rows: int = 1,
    value: float = 0.0,
    shuffle: bool = True,
    random_state: int | np.random.Generator | None = None,
) -> PlantedGame:
    """A zero-sum game with known max-min strategy, value, ``k`` optimal and ``N`` suboptimal learner actions.

    Construction [R]: the first ``k = n_optimal`` rows and columns form a circulant block ``C`` with random
    first row shifted to mean ``value``; uniform play on the block is an equilibrium of the block and, ``C``
    being invertible, ``x*`` = uniform on the ``k`` block rows is the unique max-min strategy. Each suboptimal
    column ``j`` has block entries ``value + D_j + w_j`` with ``w_j`` orthogonal to ``x*``, so its loss under
    ``x*`` is exactly ``value + D_j``. ``n_extra_rows`` dominated rows (payoff below ``value`` against the
    learner's equilibrium) make ``n != k``; they never enter a max-min strategy.

    Parameters
    ----------
    n_optimal : k >= 1.
    gaps : the ``N >= 0`` positive gaps ``D_j`` of the suboptimal columns.
    n_extra_rows : number of dominated optimizer rows (>= 0).
    value : game value.
    shuffle : permute rows and columns at random (so that nothing depends on the planted order).
    random_state : seed or generator.
    """
    if isinstance(n_optimal, bool) or not isinstance(n_optimal, (int, np.integer)) or n_optimal < 1:
        raise ValueError(f"n_optimal must be an integer >= 1, got {n_optimal!r}")
    if isinstance(n_extra_rows, bool) or not isinstance(n_extra_rows, (int, np.integer)) or n_extra_rows < 0:
        raise ValueError(f"n_extra_rows must be an integer >= 0, got {n_extra_rows!r}")
    D = np.atleast_1d(np.asarray(gaps, dtype=float))
    if D.ndim != 1 or not np.all(np.isfinite(D)) or np.any(D <= 0):
        raise ValueError("gaps must be a 1-D array of finite values > 0")
    if not np.isfinite(value):
        raise ValueError(f"value must be finite, got {value!r}")
    gen = _generator(random_state)
    k, N = int(n_optimal), D.size
    n, m = k + int(n_extra_rows), k + N
    A = np.empty((n, m))
    if k == 1:
        block = np.zeros((1, 1))
    else:
        while True:
            # mean-zero circulant: its left null space must be exactly span(1), i.e. every non-constant
            # Fourier mode of c is non-zero; then uniform play is the unique max-min strategy of the block
            c = gen.normal(size=k)
            c -= c.mean()
            if np.min(np.abs(np.fft.fft(c)[1:])) > 0.2:
                break
        block = np.array([np.roll(c, i) for i in range(k)])
    A[:k, :k] = block + value
    for j in range(N):
        w = gen.normal(scale=0.5, size=k)
        A[:k, k + j] = value + D[j] + (w - w.mean())
    if n_extra_rows:
        extra = gen.normal(scale=0.5, size=(n_extra_rows, m))
        # dominated: against the learner's equilibrium (uniform on the block) they pay strictly less than v
        extra[:, :k] += value - 0.5 - extra[:, :k].mean(axis=1, keepdims=True)
        A[k:, :] = extra
    x_star = np.zeros(n)
    x_star[:k] = 1.0 / k
    col_gaps = np.concatenate([np.zeros(k), D])
    if shuffle:
        rp, cp = gen.permutation(n), gen.permutation(m)
        A, x_star, col_gaps = A[rp][:, cp], x_star[rp], col_gaps[cp]
    return PlantedGame(A=A, x_star=x_star, value=float(value), gaps=col_gaps)


def circulant_game(
    n: int, *, value: float = 0.0, random_state: int | np.random.Generator | None = None
) -> np.ndarray:
    """A random ``n x n`` circulant game: uniform play is an equilibrium, every column is optimal (N = 0)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    gen = _generator(random_state)
    c = gen.normal(size=n)
    c += value - c.mean()
    return np.array([np.roll(c, i) for i in range(n)])


def rock_paper_scissors() -> np.ndarray:
    """Rock-paper-scissors (row player's payoff); value 0, uniform equilibrium, N = 0."""
    return np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])


def random_gaussian_game(
    n: int, m: int, *, random_state: int | np.random.Generator | None = None
) -> np.ndarray:
    """An ``n x m`` game with i.i.d. standard normal payoffs."""
    for name, val in (("n", n), ("m", m)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {val!r}")
    gen = _generator(random_state)
    return gen.normal(size=(n, m))
