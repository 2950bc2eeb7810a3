"""Mini-batch kernel k-means (Jourdan and Schwartzman, arXiv 2410.05902) and the full-batch baseline."""

from .kernel_kmeans import KernelKMeans, MiniBatchKernelKMeans, kernel_kmeans_plusplus
from .kernels import median_heuristic_gamma

__all__ = ["KernelKMeans", "MiniBatchKernelKMeans", "kernel_kmeans_plusplus", "median_heuristic_gamma"]
