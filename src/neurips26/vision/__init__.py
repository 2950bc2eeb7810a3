"""Vision: LookWhen space-time token selection and SMFSR one-step super-resolution (shared torch blocks in
``neurips26.vision.modules``)."""

from .._lazy import attach

_EXPORTS = {
    "LookWhen": ".lookwhen",
    "LookWhenClassifier": ".lookwhen",
    "make_moving_shapes": ".lookwhen",
    "token_uniqueness": ".lookwhen",
    "frame_normalise": ".lookwhen",
    "random_selection": ".lookwhen",
    "uniform_temporal_selection": ".lookwhen",
    "frame_difference_selection": ".lookwhen",
    "selection_overlap": ".lookwhen",
    "FlowSR": ".smfsr",
    "IntervalVelocityNet": ".smfsr",
    "splitmeanflow_loss": ".smfsr",
    "train_flow_matching": ".smfsr",
    "train_splitmeanflow": ".smfsr",
    "train_gan_refinement": ".smfsr",
    "train_regression": ".smfsr",
    "euler_sample": ".smfsr",
    "degrade": ".smfsr",
    "frechet_distance": ".smfsr",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
