"""convMMD: nonparametric deconvolution and denoising by simulation-based inference.

Vashistha, Sarkar and Farahi, "Nonparametric Deconvolution and Denoising using Simulation Based Inference",
arXiv 2606.21907. A GMM or flow sieve ``Q_theta`` is fitted by minimising the unbiased MMD^2 between the noisy
data and ``Z~ + eps~`` (``Z~ ~ Q_theta``, ``eps~`` from the known noise law); the fitted density is then the prior
of empirical-Bayes posterior means.
"""

from .deconvolution_kde import DeconvolutionKDE
from .deconvolver import ConvMMDDeconvolver, gmm_gaussian_posterior_mean
from .extreme_deconvolution import ExtremeDeconvolution
from .grid_bayes import grid_posterior_mean, npmle_grid
from .mmd import mmd2_unbiased, multiscale_bandwidths

__all__ = [
    "ConvMMDDeconvolver",
    "ExtremeDeconvolution",
    "mmd2_unbiased",
    "multiscale_bandwidths",
    "npmle_grid",
    "grid_posterior_mean",
    "gmm_gaussian_posterior_mean",
    "DeconvolutionKDE",
]
