"""Kontoyiannis entropy-rate (H_K) filtering against model collapse (NeurIPS 2026; real title not found).

The H_K estimator of Kontoyiannis, Algoet, Suhov and Wyner (1998) scores each document by its match-length
entropy rate; :class:`EntropyRateFilter` keeps the highest-scoring fraction of a synthetic pool, a model-free
data filter for single-lineage self-training loops. See :mod:`.hk_estimator` (estimator, O(n log n) via suffix
arrays), :mod:`.filter`, :mod:`.ngram_lm` (the small trigram LM of the scaled-down collapse loop) and
:mod:`.experiment` (the reproduction). Reconstructed parts are listed in each module's docstring.
"""

from .filter import EntropyRateFilter
from .hk_estimator import (
    entropy_from_match_lengths,
    entropy_rate,
    match_lengths,
    naive_match_lengths,
    tokenize,
)
from .ngram_lm import TrigramLM
from .stdlib_corpus import stdlib_docstrings

__all__ = [
    "entropy_rate",
    "EntropyRateFilter",
    "match_lengths",
    "entropy_from_match_lengths",
    "naive_match_lengths",
    "stdlib_docstrings",
    "TrigramLM",
    "tokenize",
]
