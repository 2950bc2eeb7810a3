"""Tree ensembles: spectral distillation of random forests and boosting."""

from .._lazy import attach

_EXPORTS = {
    "SpectralForestDistiller": ".spectral_forests",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
