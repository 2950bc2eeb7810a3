"""MulTaBench: Benchmarking Multimodal Tabular Learning with Text and Image (arXiv 2605.10616), the text half.

Tabular learners see a text column through a frozen, generic sentence embedding; MulTaBench's point is that tuning
that encoder to the prediction target first (Target-Aware Representations, TAR) helps on tables that need it, and
its curation rule admits a table only when the joint signal and the task awareness are both there.

- :class:`TargetAwareTextEncoder`: a scikit-learn transformer. Each cell becomes ``"<column>: <value>"``; LoRA
  adapters (r = 16, alpha = 32, dropout 0.1 on query, key, value, attention-output, intermediate and output dense)
  on the top ``tuned_layers`` of all-MiniLM-L6-v2 and a linear head on the masked mean pool are trained by
  cross-entropy on the TRAINING labels (regression targets cut into 20 quantile bins from the training rows), with
  early stopping on a held-out share of the training rows; then every row is embedded (mean pool, L2 normalise)
  and each text column gets its own PCA(30) fitted on the training rows. ``tune=False`` is the frozen baseline.
- :func:`curation_rule`: admit when, for >= ``rho`` learners, Joint Frozen beats tab-only and text-only by
  >= ``delta`` (joint signal) and, for >= ``rho`` learners, Joint TAR beats Joint Frozen by >= ``delta``
  (task awareness); paper: delta = 0.001, rho = 3 of 5.
- :func:`make_text_table`: the digest's seeded task-aware and control text-tabular tables.

Scaled down from the paper [R]: all-MiniLM-L6-v2 (6 layers, offline wheel) replaces e5-small-v2 (12 layers); the
image half (DINOv3) is not built.
"""

from .curation import CurationDecision, curation_rule
from .synthetic import make_text_table
from .target_aware import TargetAwareTextEncoder

__all__ = [
    "TargetAwareTextEncoder",
    "CurationDecision",
    "curation_rule",
    "make_text_table",
]
