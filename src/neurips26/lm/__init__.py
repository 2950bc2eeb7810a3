"""Tiny-LM lab: a small GPT training stack that runs on a CPU, and the papers built on it.

The stack (documented in its modules):

- :mod:`.transformer`: :class:`GPTConfig`, :class:`GPT` (pre-norm decoder, SDPA causal attention, tied head) with
  a pluggable feed-forward slot (:class:`MLP`, :class:`SwiGLU`, or any registered module, :func:`register_ffn`);
- :mod:`.tokenizers`: :class:`ByteTokenizer`, :class:`CharTokenizer`, :class:`WordTokenizer`;
- :mod:`.corpora`: corpora from Python's own stdlib source, docstrings and docs, split by file
  (:func:`stdlib_corpus`), and the batch sources :class:`TokenStream` and :class:`SequenceDataset`;
- :mod:`.training`: :func:`train` (AdamW, warm-up + cosine, clipping, tokens/s), :func:`evaluate`, checkpoints.

Papers: ``cofrgenet`` (continued-fraction channel mixing), ``nextlat`` (next-latent prediction), ``nexus``
(the Nexus optimizer). Names load lazily, so ``import neurips26.lm`` does not import torch.
"""

from .._lazy import attach

_EXPORTS = {
    # the stack
    "GPT": ".transformer",
    "GPTConfig": ".transformer",
    "MLP": ".transformer",
    "SwiGLU": ".transformer",
    "register_ffn": ".transformer",
    "next_token_loss": ".transformer",
    "ByteTokenizer": ".tokenizers",
    "CharTokenizer": ".tokenizers",
    "WordTokenizer": ".tokenizers",
    "tokenizer_from_dict": ".tokenizers",
    "Document": ".corpora",
    "LMCorpus": ".corpora",
    "SequenceDataset": ".corpora",
    "TokenStream": ".corpora",
    "split_by_document": ".corpora",
    "stdlib_corpus": ".corpora",
    "stdlib_documents": ".corpora",
    "TrainConfig": ".training",
    "TrainResult": ".training",
    "evaluate": ".training",
    "load_checkpoint": ".training",
    "save_checkpoint": ".training",
    "train": ".training",
    "TorchEncoderLM": ".reference",
    "copy_weights": ".reference",
    # cofrgenet: continued-fraction channel mixing
    "Cffn": ".cofrgenet",
    "GatedCFFN": ".cofrgenet",
    "DyadicSchedule": ".cofrgenet",
    "continued_fraction": ".cofrgenet",
    "continuant": ".cofrgenet",
    "continuants": ".cofrgenet",
    "fraction_gradient": ".cofrgenet",
    # nextlat: next-latent prediction
    "NextLatModel": ".nextlat",
    "LatentDynamics": ".nextlat",
    "MultiTokenModel": ".nextlat",
    "SpeculativeResult": ".nextlat",
    "self_speculative_decode": ".nextlat",
    "greedy_decode": ".nextlat",
    "grid_walk": ".nextlat",
    "path_star": ".nextlat",
    "effective_rank": ".nextlat",
    "linear_probe_accuracy": ".nextlat",
    # nexus: the Nexus optimizer
    "Nexus": ".nexus",
    # post-training (h-post1): GRPO / Dr. GRPO / DAPO trainer
    "GRPOConfig": ".grpo",
    "GRPOTrainer": ".grpo",
    # residual-stream hooks (h-post1; SmolLM2 itself: neurips26.lm.smollm2.load())
    "record_residual": ".residual",
    "add_to_residual": ".residual",
    # rlvr-noisy-data (h-lmB): answer equivalence, re-verification, audit bound
    "reverify": ".rlvr_noisy",
    "equivalent_answers": ".rlvr_noisy",
    "parse_answer": ".rlvr_noisy",
    "clopper_pearson": ".rlvr_noisy",
    # medkit (h-lmB): clinical knowledge-update benchmark world and integration strategies
    "ClinicalWorld": ".medkit",
    "IntegrationConfig": ".medkit",
    "evaluate_families": ".medkit",
    # minsteer (h-lmA): one self-rewrite contrast as a steering direction, CAA / TwoSeq baselines
    "contrastive_rewrite_direction": ".minsteer",
    "contrastive_rewrite_directions": ".minsteer",
    "caa_direction": ".minsteer",
    "two_sequence_direction": ".minsteer",
    "random_direction": ".minsteer",
    "generate_steered": ".minsteer",
    "steer": ".minsteer",
    "RewriteContrast": ".minsteer",
    # pearl (h-lmA): prefix-expanded adversarial GRPO, modular-arithmetic model organisms
    "PEARLConfig": ".pearl",
    "PEARLTrainer": ".pearl",
    "ModArithWorld": ".pearl",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
