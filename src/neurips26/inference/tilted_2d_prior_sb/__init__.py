"""Annealed 2D-tilted diffusion prior vs the multi-marginal Schrödinger-bridge lift (NeurIPS 2026 abstract,
descriptive title; no arXiv id): a Gaussian sanity instance of the claimed rates
``KL(Pi_tau || P*) = O(N sigma^2)`` and ``TV = O(sqrt(N) sigma)`` [R: the Gaussian family is ours]."""

from .gaussian_tilt import (
    CorrectionField,
    GaussianTilt,
    ar1_slice_covariance,
    correction_field,
    edm_sigma_schedule,
    gaussian_kl,
    gaussian_sb_lift,
    ipf_ladder,
    ratio_tilt,
    scalar_field_kl,
    scalar_field_kl_mc,
    squared_exponential_pixel_cov,
    tilt_kl,
    tv_mc,
)

__all__ = [
    "GaussianTilt",
    "gaussian_sb_lift",
    "ratio_tilt",
    "ipf_ladder",
    "tilt_kl",
    "gaussian_kl",
    "correction_field",
    "CorrectionField",
    "ar1_slice_covariance",
    "edm_sigma_schedule",
    "scalar_field_kl",
    "scalar_field_kl_mc",
    "squared_exponential_pixel_cov",
    "tv_mc",
]
