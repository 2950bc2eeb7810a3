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
    "MedVTokenizer",
    "VectorQuantizer",
    "CausalSliceConv",
    "MultiExpertAlignment",
    "slice_differential_loss",
    "inter_slice_difference_error",
    "train_tokenizer",
    "codebook_usage",
    "CNNExpert",
    "fit_expert",
    "make_phantoms",
    "make_textured_disks",
    "texture_features",
]
