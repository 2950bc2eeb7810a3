"""Statistical inference: grouped-feature FDR control, convMMD deconvolution, NBFFG, tilted 2D prior bounds."""

from .._lazy import attach

_EXPORTS = {
    "GroupedMirrorFDR": ".grouped_fdr_mirror",
    "NeuralBlockMirrorFDR": ".grouped_fdr_mirror",
    "block_mirror_statistics": ".grouped_fdr_mirror",
    "group_lasso_mirror_statistics": ".grouped_fdr_mirror",
    "gaussian_mirror_statistics": ".grouped_fdr_mirror",
    "mirror_threshold": ".grouped_fdr_mirror",
    "group_partial_f_pvalues": ".grouped_fdr_mirror",
    "benjamini_hochberg": ".grouped_fdr_mirror",
    "block_permutation_shap": ".grouped_fdr_mirror",
    "ConvMMDDeconvolver": ".convmmd_deconv",
    "ExtremeDeconvolution": ".convmmd_deconv",
    "mmd2_unbiased": ".convmmd_deconv",
    "multiscale_bandwidths": ".convmmd_deconv",
    "npmle_grid": ".convmmd_deconv",
    "grid_posterior_mean": ".convmmd_deconv",
    "NBFFG": ".nbffg",
    "MeanFieldGaussianVI": ".nbffg",
    "bffg_mcmc": ".nbffg",
    "diffusion_grid": ".nbffg",
    "grid_posterior_1d": ".nbffg",
    "bootstrap_importance_sampling": ".nbffg",
    "dense_gaussian_tree_posterior": ".nbffg",
    "GaussianTilt": ".tilted_2d_prior_sb",
    "gaussian_sb_lift": ".tilted_2d_prior_sb",
    "ratio_tilt": ".tilted_2d_prior_sb",
    "ipf_ladder": ".tilted_2d_prior_sb",
    "tilt_kl": ".tilted_2d_prior_sb",
    "gaussian_kl": ".tilted_2d_prior_sb",
    "correction_field": ".tilted_2d_prior_sb",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
