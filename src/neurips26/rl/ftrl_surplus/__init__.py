"""Strategic surplus against FTRL learners in repeated zero-sum games.

Su & Vlatakis-Gkaragkounis, *No Coin Left Behind: Maximizing Strategic Surplus Against No-Regret Dynamics*
(arXiv 2604.05129). A clairvoyant optimizer plays a zero-sum matrix game against a constant-step FTRL learner
(Hedge, Euclidean/lazy projected GD, Tsallis-1/2, log-barrier) and collects ``S_T = sum_t x_t^T A y_t - T v``.
A fixed max-min optimizer gains ``Theta(1/eta)`` by sweeping the learner off its ``N`` suboptimal actions
(zero when ``N = 0``); a best-responding optimizer gains ``Theta(eta T)``; non-steep regularisers eliminate
suboptimal actions in finite time, steep ones leave a vanishing tail. The optimal-control reference of Assos,
Dagan & Daskalakis (the best constant plan against continuous-time FTRL) and :func:`repeated_play`, which runs any
optimizer (a strategy, a named one, or a user's callable) against FTRL on a payoff matrix or a zero-sum
``nashpy.Game``, are in :mod:`.optimizers`.
"""

from .ftrl import REGULARIZERS, STEEP, ftrl_log_strategy, ftrl_regret_bound, ftrl_strategy, project_simplex
from .games import (
    PlantedGame,
    circulant_game,
    learner_action_gaps,
    maxmin_strategy,
    payoff_matrix,
    planted_game,
    random_gaussian_game,
    rock_paper_scissors,
)
from .optimizers import (
    PlayTrajectory,
    continuous_time_surplus,
    optimal_control_strategy,
    regularizer_conjugate,
    repeated_play,
)
from .surplus import (
    BestResponseTrajectory,
    FixedOptimizerTrajectory,
    best_response_dynamics,
    elimination_round,
    euclidean_elimination_time,
    euclidean_sweeping_surplus,
    fixed_optimizer_dynamics,
    hedge_sweeping_surplus,
)

__all__ = [
    "ftrl_strategy",
    "maxmin_strategy",
    "planted_game",
    "random_gaussian_game",
    "fixed_optimizer_dynamics",
    "best_response_dynamics",
    "hedge_sweeping_surplus",
    "euclidean_sweeping_surplus",
    "elimination_round",
    "repeated_play",
    "optimal_control_strategy",
    "continuous_time_surplus",
    "REGULARIZERS",
    "STEEP",
    "BestResponseTrajectory",
    "FixedOptimizerTrajectory",
    "PlantedGame",
    "PlayTrajectory",
    "payoff_matrix",
    "regularizer_conjugate",
    "circulant_game",
    "euclidean_elimination_time",
    "ftrl_log_strategy",
    "ftrl_regret_bound",
    "learner_action_gaps",
    "project_simplex",
    "rock_paper_scissors",
]
