"""MedVTok: one discrete tokenizer for 2-D medical images and 3-D volumes (NeurIPS 2026; reconstructed).

See :mod:`.tokenizer` for the design: per-slice encoder with causal slice convolution, multi-codebook EMA vector
quantisation, slice-differential regularisation and multi-expert representation alignment.
"""

from .experts import CNNExpert, fit_expert, texture_features
from .phantoms import make_phantoms, make_textured_disks
from .tokenizer import (
    CausalSliceConv,
    MedVTokenizer,
    MultiExpertAlignment,
    VectorQuantizer,
    codebook_usage,
    inter_slice_difference_error,
    slice_differential_loss,
    train_tokenizer,
)

__all__ = [
    "CNNExpert",
    "CausalSliceConv",
    "MedVTokenizer",
    "MultiExpertAlignment",
    "VectorQuantizer",
    "codebook_usage",
    "fit_expert",
    "inter_slice_difference_error",
    "make_phantoms",
    "make_textured_disks",
    "slice_differential_loss",
    "texture_features",
    "train_tokenizer",
]
