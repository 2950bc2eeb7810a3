"""Robotics: NoTVLA narrative action interfaces."""

from .._lazy import attach

_EXPORTS = {
    "NarrativeActionInterface": ".notvla",
    "NarrativeCodec": ".notvla",
    "SplineDetokenizer": ".notvla",
    "select_keyframes": ".notvla",
    "rdp": ".notvla",
    "PinholeCamera": ".notvla",
    "DCTActionCodec": ".notvla",
    "BinnedActionCodec": ".notvla",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
