"""Tiny-LM lab: a small GPT training stack that runs on a CPU, and the papers built on it.

The stack (documented in its modules):

- :mod:`.transformer`: :class:`GPTConfig`, :class:`GPT` (pre-norm decoder, SDPA causal attention, tied head) with
  a pluggable feed-forward slot (:class:`MLP`, :class:`SwiGLU`, or any registered module, :func:`register_ffn`);
- :mod:`.tokenizers`: :class:`ByteTokenizer`, :class:`CharTokenizer`, :class:`WordTokenizer`;
- :mod:`.corpora`: corpora from Python's own stdlib source, docstrings and docs, split by file
  (:func:`stdlib_corpus`), and the batch sources :class:`TokenStream` and :class:`SequenceDataset`;
- :mod:`.training`: :func:`train` (AdamW, warm-up + cosine, clipping, tokens/s), :func:`evaluate`, checkpoints.

and post-training helpers (:mod:`.grpo`: GRPO / Dr. GRPO / DAPO; :mod:`.residual`: residual-stream hooks; SmolLM2
itself: ``neurips26.lm.smollm2.load()``, not re-exported).

Papers: ``cofrgenet``, ``medkit``, ``minsteer``, ``nextlat``, ``nexus``, ``pearl``, ``rlvr_noisy``. Every name in a
paper package's ``__all__`` and in the shared modules' ``__all__`` is re-exported here; names load lazily, so
``import neurips26.lm`` does not import torch.
"""

from .._lazy import attach, field_exports

# Every name in a paper package's `__all__`, and in the shared modules', read without importing them.
_EXPORTS, _PROBLEMS = field_exports(
    __name__,
    __file__,
    modules=(".transformer", ".tokenizers", ".corpora", ".training", ".reference", ".grpo", ".residual"),
)
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS, _PROBLEMS)
