"""No One Knows the State of the Art in Geospatial Foundation Models (arXiv 2605.12678): the audit and a harness.

The paper audits 152 geospatial foundation-model (GFM) papers and finds their reported numbers cannot rank the
models: the same model, benchmark and protocol get numbers that differ by 10 points or more across papers (46
such keys), benchmark usage is spread thin (401 benchmarks, the top 3 cover 10.6 % of evaluations) and most
pretraining configurations are unique (94 of 126), so data, architecture and algorithm are never separated. It
proposes one shared evaluation harness with fixed protocols, splits and variance reporting.

Two tools for a practitioner:

**The auditor** (:class:`ResultsAuditor`) reads any results table (a DataFrame or CSV: ``paper, model,
benchmark, metric, value`` and optionally ``eval_strategy, train_regime, train_samples, provenance``):

- aliases canonicalised through explicit :class:`AliasTable` s, and names outside the tables that differ only in
  case, spaces, punctuation or a trailing "dataset" folded into one (``So2Sat`` / ``so2sat``; the same in
  :func:`benchmark_concentration` and :func:`pretraining_uniqueness`); evaluation strategies normalised to
  {finetune, linear, knn, zeroshot, fewshot, other, unknown} (:func:`normalize_protocol`; unknown strings never
  crash, they map to "unknown"); 0-1 metric values of percentage metrics rescaled to points;
- strict key (model, benchmark, metric, eval strategy, train regime), loose key (model, benchmark, metric);
- filters: baselines, detection mAP on DOTA/DIOR, copied numbers (provenance "copied" counts once, in the
  paper that measured it), keys with intra-paper duplicates, keys with restricted training samples, keys with
  one paper; per key ``spread = max - min`` and ``std``, flagged at spread >= 10 points;
- benchmark concentration (:func:`benchmark_concentration`): Gini :math:`\\sum_{ij}|c_i-c_j|/(2K^2\\bar c)`,
  HHI :math:`\\sum_k s_k^2`, top-3 share, with paper-level bootstrap intervals (basic, i.e. bias-reflected, by
  default: the plug-in Gini of sampled counts is biased upwards); per-paper overlap with the top-10;
- pretraining-configuration uniqueness (:func:`pretraining_uniqueness`) and release rates
  (:func:`release_rates`).

**The harness** (:class:`EvaluationHarness`): every backbone (``fit``/``transform``) on every benchmark under one
protocol (linear head / kNN / MLP head on frozen features), one fixed split, several seeds; the output has the
auditor's schema with ``std`` and ``n_seeds`` per cell and ``provenance = "rerun"``.

Reconstructed [R]: the corpus is synthetic (the paper's LLM-extracted corpus is not redistributable), so the
reproduction plants known disagreements in a generated literature and runs the harness on synthetic 13-band
land-cover patches (:func:`synthetic_eo_benchmark`) with PCA, random-convolution and tiny-CNN backbones.
"""

from .audit import (
    DEFAULT_BENCHMARK_ALIASES,
    DEFAULT_METRIC_ALIASES,
    PROTOCOLS,
    REQUIRED_COLUMNS,
    AliasTable,
    AuditReport,
    ResultsAuditor,
    Uniqueness,
    normalize_protocol,
    pretraining_uniqueness,
    read_results_csv,
    release_rates,
)
from .concentration import (
    Concentration,
    benchmark_concentration,
    bootstrap_ci,
    bootstrap_interval,
    concentration_bootstrap,
    concentration_intervals,
    gini,
    hhi,
    top_k_share,
)
from .harness import (
    PROTOCOL_NAMES,
    EvaluationHarness,
    PCABackbone,
    RandomConvBackbone,
    SoftmaxProbe,
    TinyCNNBackbone,
    evaluate_probe,
    fixed_split,
    kendall_tau_min,
    synthetic_eo_benchmark,
)
from .literature import SyntheticLiterature, benchmark_incidence, synthetic_literature, zipf_inclusion

__all__ = [
    "ResultsAuditor",
    "AuditReport",
    "normalize_protocol",
    "AliasTable",
    "read_results_csv",
    "benchmark_concentration",
    "gini",
    "hhi",
    "top_k_share",
    "bootstrap_ci",
    "pretraining_uniqueness",
    "release_rates",
    "EvaluationHarness",
    "PCABackbone",
    "RandomConvBackbone",
    "TinyCNNBackbone",
    "SoftmaxProbe",
    "synthetic_literature",
    "synthetic_eo_benchmark",
    "DEFAULT_BENCHMARK_ALIASES",
    "DEFAULT_METRIC_ALIASES",
    "PROTOCOLS",
    "PROTOCOL_NAMES",
    "REQUIRED_COLUMNS",
    "Concentration",
    "SyntheticLiterature",
    "Uniqueness",
    "benchmark_incidence",
    "bootstrap_interval",
    "concentration_bootstrap",
    "concentration_intervals",
    "evaluate_probe",
    "fixed_split",
    "kendall_tau_min",
    "zipf_inclusion",
]
