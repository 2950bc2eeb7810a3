"""MedKIT: Medical Knowledge Integration and Transfer benchmark (anonymous NeurIPS 2026 submission; data card
``medkit-anon/MedKIT``; the paper's text was not available, so the design below is reconstructed).

Clinical evidence changes; an updated model should not only recall a new trial result but use it under
paraphrase, reversed relations, multi-step reasoning and clinical recommendations, without disturbing unrelated
knowledge. Here:

- :mod:`.world`: a synthetic clinical-update world with MedKIT's record schema (:class:`UpdateRecord`), relation
  algebra (:func:`flip`, :func:`compose`), chronological updates with conflicting edits (the latest wins) and
  the probe families (original, lexical, relational, compositional, operational, locality);
- :mod:`.integrate`: a tiny transformer classifier pre-trained on the base facts, fine-tuning strategies
  (question only, + paraphrases, + swaps, + replay), BM25 retrieval-in-context, per-family scoring.

Usage::

    from neurips26.lm.medkit import ClinicalWorld, IntegrationConfig, pretrain, integrate, probe_set, evaluate_families
    world = ClinicalWorld.generate(n_base=400, n_updates=120, seed=0)
    model, enc, items = pretrain(world, IntegrationConfig())
    probes = probe_set(world)
    edited = integrate(model, enc, world, "ft_paraphrase_swap", replay=items)
    evaluate_families(edited, enc, probes)      # {'original': ..., 'lexical': ..., 'locality': ...}
"""

from .integrate import (
    FT_STRATEGIES,
    STRATEGIES,
    BM25Retriever,
    IntegrationConfig,
    ProbeClassifier,
    evaluate_families,
    integrate,
    leaked_probes,
    pretrain,
    pretraining_items,
    probe_set,
    update_items,
)
from .world import FAMILIES, RELATIONS, ClinicalWorld, Comparison, Example, UpdateRecord, compose, flip

__all__ = [
    "ClinicalWorld",
    "IntegrationConfig",
    "evaluate_families",
    "FAMILIES",
    "FT_STRATEGIES",
    "RELATIONS",
    "STRATEGIES",
    "BM25Retriever",
    "Comparison",
    "Example",
    "ProbeClassifier",
    "UpdateRecord",
    "compose",
    "flip",
    "integrate",
    "leaked_probes",
    "pretrain",
    "pretraining_items",
    "probe_set",
    "update_items",
]
