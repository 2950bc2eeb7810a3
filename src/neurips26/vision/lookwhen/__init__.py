"""LookWhen: learned space-time token selection for fast video recognition (arXiv 2605.06809).

A shallow selector scores every space-time token from a downscaled clip; a deep extractor runs only on the top-K
tokens. See :mod:`.model` for the method and equations, :mod:`.training` for the teachers and the recipe and
:mod:`.videos` for the moving-shapes benchmark.
"""

from .model import (
    LookWhen,
    frame_difference_selection,
    frame_normalise,
    random_selection,
    selection_kl_loss,
    selection_overlap,
    token_uniqueness,
    uniform_temporal_selection,
)
from .training import ImageTeacher, LookWhenClassifier, VideoTeacher, compute_targets, finetune, pretrain
from .videos import MovingShapes, make_moving_shapes

__all__ = [
    "LookWhen",
    "LookWhenClassifier",
    "make_moving_shapes",
    "token_uniqueness",
    "frame_normalise",
    "random_selection",
    "uniform_temporal_selection",
    "frame_difference_selection",
    "selection_overlap",
    "ImageTeacher",
    "MovingShapes",
    "VideoTeacher",
    "compute_targets",
    "finetune",
    "pretrain",
    "selection_kl_loss",
]
