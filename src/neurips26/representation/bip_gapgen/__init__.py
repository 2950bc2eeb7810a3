"""Non-colliding virtual identity provisioning (BIP / GapGen; Ji, Shen, Jain, Liu, Liu, arXiv 2605.18238).

Repulsion-based allocation of virtual identities on the recognizer's hypersphere, inside the subspace occupied by
real identities, that never collide with an enrolled real identity nor with each other; plus the geometry tools
(impostor thresholds, exact collision counts, realisability) and the baselines. Virtual identities produced here are
synthetic and must be flagged as such wherever they are used.
"""

from .galleries import minilm_name_gallery, stdlib_names, synthetic_gallery
from .geometry import (
    RealSubspace,
    count_collisions,
    density_realisability,
    impostor_threshold,
    knn_cosines,
    real_subspace,
    realisability,
)
from .provisioning import IdentityProvisioner, RoundStats, provision_identities, uniform_sphere

__all__ = [
    "provision_identities",
    "IdentityProvisioner",
    "count_collisions",
    "density_realisability",
    "knn_cosines",
    "impostor_threshold",
    "real_subspace",
    "realisability",
    "synthetic_gallery",
    "minilm_name_gallery",
    "uniform_sphere",
    "RealSubspace",
    "RoundStats",
    "stdlib_names",
]
