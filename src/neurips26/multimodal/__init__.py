"""Multimodal learning: target-aware text columns for tabular learners (MulTaBench), medical visual tokenizers
(MedVTok), observability-gated cross-source alignment (ObsAlign)."""

from .._lazy import attach

# One line per public name: "Name": ".<paper package>". Each paper's engineer edits only their own lines.
_EXPORTS: dict[str, str] = {
    # multabench
    "TargetAwareTextEncoder": ".multabench",
    "CurationDecision": ".multabench",
    "curation_rule": ".multabench",
    "make_text_table": ".multabench",
    # medvtok
    "MedVTokenizer": ".medvtok",
    "VectorQuantizer": ".medvtok",
    "CausalSliceConv": ".medvtok",
    "MultiExpertAlignment": ".medvtok",
    "slice_differential_loss": ".medvtok",
    "inter_slice_difference_error": ".medvtok",
    "train_tokenizer": ".medvtok",
    "codebook_usage": ".medvtok",
    # obsalign
    "ObsAlign": ".obsalign",
    "Source": ".obsalign",
    "SourceSketch": ".obsalign",
    "Observability": ".obsalign",
    "compute_sketch": ".obsalign",
    "observability": ".obsalign",
    "make_planted_sources": ".obsalign",
    "make_bundled_sources": ".obsalign",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
