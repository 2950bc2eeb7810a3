"""Reinforcement learning and games: tabular MDP toolkit, Navigate-and-Stop, PMD with TD critics, FTRL surplus."""

from .._lazy import attach

_EXPORTS = {
    "NavigateAndStop": ".nas_bpi",
    "policy_mirror_descent": ".pmd_td",
    "oracle_allocation": ".nas_bpi",
    "characteristic_time": ".nas_bpi",
    "regularised_gap": ".pmd_td",
    "td_schedule": ".pmd_td",
    "TabularMDP": ".mdp",
    "random_mdp": ".mdp",
    "chain_mdp": ".mdp",
    "value_iteration": ".mdp",
    "soft_value_iteration": ".mdp",
    "policy_evaluation": ".mdp",
    "ftrl_strategy": ".ftrl_surplus",
    "maxmin_strategy": ".ftrl_surplus",
    "planted_game": ".ftrl_surplus",
    "random_gaussian_game": ".ftrl_surplus",
    "fixed_optimizer_dynamics": ".ftrl_surplus",
    "best_response_dynamics": ".ftrl_surplus",
    "hedge_sweeping_surplus": ".ftrl_surplus",
    "euclidean_sweeping_surplus": ".ftrl_surplus",
    "elimination_round": ".ftrl_surplus",
    "repeated_play": ".ftrl_surplus",
    "optimal_control_strategy": ".ftrl_surplus",
    "continuous_time_surplus": ".ftrl_surplus",
    "TabularEnv": ".nas_bpi",
    "soft_policy_iteration": ".pmd_td",
    "natural_policy_gradient": ".pmd_td",
    "softmax_policy_gradient": ".pmd_td",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
