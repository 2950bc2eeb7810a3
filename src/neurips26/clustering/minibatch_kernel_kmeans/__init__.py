"""Mini-batch kernel k-means (Jourdan and Schwartzman, arXiv 2410.05902) and the full-batch baseline."""

from .dask_fit import fit_dask_array, predict_dask_array
from .kernel_kmeans import KernelKMeans, MiniBatchKernelKMeans, kernel_kmeans_plusplus
from .kernels import HeatKernel, median_heuristic_gamma

__all__ = [
    "MiniBatchKernelKMeans",
    "KernelKMeans",
    "HeatKernel",
    "kernel_kmeans_plusplus",
    "median_heuristic_gamma",
    "fit_dask_array",
    "predict_dask_array",
]
