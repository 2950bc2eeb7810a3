"""SMFSR: noise-started one-step super-resolution by an LR-conditioned SplitMeanFlow (arXiv 2605.09328).

See :mod:`.flows` for the method and equations and :mod:`.degradation` for the degradation chain and the
Frechet distance.
"""

from .degradation import degrade, degrade_mean, frechet_distance
from .flows import (
    FlowSR,
    IntervalVelocityNet,
    euler_sample,
    splitmeanflow_loss,
    train_flow_matching,
    train_gan_refinement,
    train_regression,
    train_splitmeanflow,
    upsample_condition,
)

__all__ = [
    "FlowSR",
    "IntervalVelocityNet",
    "splitmeanflow_loss",
    "train_flow_matching",
    "train_splitmeanflow",
    "train_gan_refinement",
    "train_regression",
    "euler_sample",
    "degrade",
    "frechet_distance",
    "degrade_mean",
    "upsample_condition",
]
