"""Vision: LookWhen space-time token selection and SMFSR one-step super-resolution (shared torch blocks in
``neurips26.vision.modules``)."""

from .._lazy import attach

_EXPORTS: dict[str, str] = {}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
