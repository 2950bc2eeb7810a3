"""Forecasting: Njord probabilistic graph ensembles for ocean forecasting."""

from .._lazy import attach

_EXPORTS = {
    "GraphForecaster": ".njord",
    "ForecastData": ".njord",
    "train_forecaster": ".njord",
    "rollout": ".njord",
    "kmeans_mesh": ".njord",
    "regular_mesh": ".njord",
    "SeaMesh": ".njord",
    "crps_ensemble": ".njord",
    "crps_gaussian": ".njord",
    "spread_skill_ratio": ".njord",
    "make_sea_mask": ".njord",
    "simulate_ocean": ".njord",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
