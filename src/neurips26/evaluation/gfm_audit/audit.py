"""The auditor: how much do reported results for the SAME model, benchmark and protocol disagree across papers?

A results table has one row per reported number: ``paper, model, benchmark, metric, value`` and, when known,
``eval_strategy``, ``train_regime``, ``train_samples`` and ``provenance`` (``rerun`` | ``copied``). The auditor

1. canonicalises model and benchmark aliases (explicit tables: RESISC-45 aliases are one data set, fMoW and
   fMoW-Sentinel are two), normalises evaluation-strategy strings to {finetune, linear, knn, zeroshot, fewshot,
   other, unknown} (linear includes frozen-encoder probing), unifies 0-1 and 0-100 metric scales;
2. groups rows by the strict key (model, benchmark, metric, eval strategy, train regime) or the loose key
   (model, benchmark, metric);
3. applies the paper's filters: baseline models dropped, detection mAP on DOTA/DIOR dropped, copied numbers
   dropped (they repeat another paper's measurement), keys where one paper reports several different values
   dropped, keys where any row uses a restricted number of training samples dropped, keys with fewer than two
   distinct papers dropped;
4. reports per key n, papers, min, max, spread = max - min, std, and flags spread >= threshold (10 points).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("paper", "model", "benchmark", "metric", "value")
OPTIONAL_COLUMNS = ("eval_strategy", "train_regime", "train_samples", "provenance")
PROTOCOLS = ("finetune", "linear", "knn", "zeroshot", "fewshot", "other", "unknown")

# Order matters: the first pattern that matches decides ("few-shot linear probe" is few-shot).
_PROTOCOL_PATTERNS: tuple[tuple[str, str], ...] = (
    ("fewshot", r"few[\s_-]*shot|\d+[\s_-]*shot\b|one[\s_-]*shot"),
    ("zeroshot", r"zero[\s_-]*shot|training[\s_-]*free|\b0[\s_-]*shot"),
    ("knn", r"\bk[\s_-]*nn\b|nearest[\s_-]*neighbou?r|\bknn\b"),
    (
        "linear",
        r"linear|\blp\b|frozen|freeze|probe|probing|fixed[\s_-]*(backbone|encoder|features)|feature[\s_-]*extract",
    ),
    (
        "finetune",
        r"fine[\s_-]*tun|\bft\b|full[\s_-]*(tuning|training)|end[\s_-]*to[\s_-]*end|unfrozen|finetun",
    ),
    ("other", r"\b(adapter|lora|prompt|peft|partial)\b"),
)

DEFAULT_BASELINE_PATTERNS = (
    r"\brandom\b",
    r"scratch",
    r"imagenet",
    r"supervised",
    r"\brf\b|random[\s_-]*forest",
    r"xgboost|lightgbm",
    r"\bsvm\b",
    r"\bknn\b|k[\s_-]*nn",
)
PERCENT_METRICS = ("acc", "accuracy", "oa", "f1", "miou", "iou", "map", "precision", "recall", "kappa", "auc")


def _slug(name: str) -> str:
    """Lower case, punctuation and spaces removed: the comparison form of a name."""
    return re.sub(r"[^a-z0-9+]", "", name.lower())


def normalize_protocol(text: Any) -> str:
    """Map a free-text evaluation strategy to one of ``PROTOCOLS`` (anything unrecognised -> ``"unknown"``)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return "unknown"
    s = str(text).strip().lower()
    if not s:
        return "unknown"
    if _slug(s) in PROTOCOLS:
        return _slug(s)
    for name, pattern in _PROTOCOL_PATTERNS:
        if re.search(pattern, s):
            return name
    return "unknown"


@dataclass
class AliasTable:
    """Explicit alias table: ``canonical(name)`` returns the canonical spelling of a known alias.

    ``aliases`` maps canonical name -> list of aliases; matching ignores case, spaces and punctuation. Names not
    in the table are returned stripped (``strict=False``) or as None (``strict=True``).
    """

    aliases: Mapping[str, Iterable[str]] = field(default_factory=dict)
    strict: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.aliases, Mapping):
            raise TypeError("aliases must be a mapping canonical name -> aliases")
        self._lookup: dict[str, str] = {}
        for canon, alist in self.aliases.items():
            if isinstance(alist, str):
                raise TypeError(f"aliases of {canon!r} must be a list of names, not a string")
            for a in (canon, *alist):
                key = _slug(str(a))
                if key in self._lookup and self._lookup[key] != canon:
                    raise ValueError(f"alias {a!r} maps to both {self._lookup[key]!r} and {canon!r}")
                self._lookup[key] = canon

    def canonical(self, name: Any) -> str | None:
        if name is None or (isinstance(name, float) and math.isnan(name)):
            return None
        s = str(name).strip()
        if not s:
            return None
        hit = self._lookup.get(_slug(s))
        if hit is not None:
            return hit
        return None if self.strict else s

    def __contains__(self, name: str) -> bool:
        return _slug(str(name)) in self._lookup


DEFAULT_BENCHMARK_ALIASES = AliasTable(
    {
        "NWPU-RESISC45": ["RESISC-45", "RESISC45", "NWPU RESISC45", "resisc_45", "NWPU-RESISC-45"],
        "EuroSAT": ["Euro-SAT", "eurosat", "EuroSat"],
        "BigEarthNet": ["BigEarthNet-S2", "BEN", "Big Earth Net"],
        "fMoW": ["fMoW-RGB", "Functional Map of the World"],
        "fMoW-Sentinel": ["fMoW Sentinel", "fmow-s2"],
        "UCMerced": ["UC Merced", "UCM", "UC-Merced Land Use"],
        "DOTA": ["DOTA-v1.0", "DOTA v1"],
        "DIOR": ["DIOR dataset"],
    }
)
DEFAULT_METRIC_ALIASES = AliasTable(
    {
        "accuracy": ["acc", "acc.", "oa", "overall accuracy", "top-1", "top1 accuracy", "top-1 accuracy"],
        "miou": ["mIoU", "mean IoU", "mean intersection over union"],
        "f1": ["F1 score", "F1-score", "macro F1"],
        "map": ["mAP", "mean average precision", "mAP@0.5"],
    }
)


def _restricted_samples(value: Any) -> bool:
    """True when a training-sample entry says fewer than all labels were used (a count, a fraction < 1, 'x%')."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value) != 1.0  # a fraction below 1 or an explicit sample count
    s = str(value).strip().lower()
    if s in ("", "full", "all", "100%", "100 %", "1.0", "1", "nan", "none"):
        return False
    return True


def _regime(value: Any) -> str:
    s = (
        ""
        if value is None or (isinstance(value, float) and math.isnan(value))
        else str(value).strip().lower()
    )
    if s in ("", "full", "all", "100%", "standard", "default", "nan", "none"):
        return "full"
    if re.search(r"few|shot|limited|low[\s_-]*data|subset|\d+\s*%|fraction", s):
        return "limited"
    return "unknown"


@dataclass
class AuditReport:
    """What :meth:`ResultsAuditor.audit` found."""

    rows: pd.DataFrame  # the normalised rows that survived the row filters
    keys: (
        pd.DataFrame
    )  # one row per key that survived every filter: n, n_papers, min, max, spread, std, flagged
    dropped: dict[str, int]  # how many rows / keys each filter removed
    key: str
    threshold: float

    @property
    def disagreements(self) -> pd.DataFrame:
        """The keys whose spread reaches the threshold."""
        return self.keys[self.keys["flagged"]].reset_index(drop=True)

    def count_at(self, threshold: float) -> int:
        """How many surviving keys have spread >= ``threshold``."""
        return int((self.keys["spread"] >= threshold).sum())


class ResultsAuditor:
    """Quantify cross-paper disagreement in a results table.

    Parameters
    ----------
    key : "strict" = (model, benchmark, metric, eval strategy, train regime) or "loose" = (model, benchmark,
        metric).
    threshold : spread (max - min, in percentage points) at or above which a key is flagged (10).
    min_papers : keep keys reported by at least this many distinct papers (2).
    model_aliases, benchmark_aliases, metric_aliases : :class:`AliasTable` s (defaults: none for models, a small
        geospatial benchmark table, the common accuracy / mIoU / F1 / mAP spellings).
    baseline_patterns : regular expressions; models matching any are dropped as baselines (random init,
        scratch, ImageNet-supervised, RF/XGBoost/SVM/kNN...). ``()`` keeps every model.
    drop_detection : drop mAP rows on DOTA/DIOR (detection numbers are not comparable across heads).
    full_regime_only : count only full-training-regime keys (strict key).
    """

    def __init__(
        self,
        key: str = "strict",
        threshold: float = 10.0,
        min_papers: int = 2,
        model_aliases: AliasTable | None = None,
        benchmark_aliases: AliasTable | None = None,
        metric_aliases: AliasTable | None = None,
        baseline_patterns: Iterable[str] = DEFAULT_BASELINE_PATTERNS,
        drop_detection: bool = True,
        full_regime_only: bool = True,
    ) -> None:
        if key not in ("strict", "loose"):
            raise ValueError(f"key must be 'strict' or 'loose', got {key!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold > 0:
            raise ValueError(f"threshold must be a positive number of points, got {threshold!r}")
        if isinstance(min_papers, bool) or not isinstance(min_papers, int) or min_papers < 2:
            raise ValueError(f"min_papers must be an integer >= 2, got {min_papers!r}")
        for name, table in (
            ("model_aliases", model_aliases),
            ("benchmark_aliases", benchmark_aliases),
            ("metric_aliases", metric_aliases),
        ):
            if table is not None and not isinstance(table, AliasTable):
                raise TypeError(f"{name} must be an AliasTable, got {type(table).__name__}")
        self.key = key
        self.threshold = float(threshold)
        self.min_papers = min_papers
        self.model_aliases = model_aliases or AliasTable()
        self.benchmark_aliases = benchmark_aliases or DEFAULT_BENCHMARK_ALIASES
        self.metric_aliases = metric_aliases or DEFAULT_METRIC_ALIASES
        self.baseline_patterns = tuple(baseline_patterns)
        self._baseline_re = [re.compile(p, re.IGNORECASE) for p in self.baseline_patterns]
        self.drop_detection = bool(drop_detection)
        self.full_regime_only = bool(full_regime_only)

    @property
    def key_columns(self) -> list[str]:
        base = ["model", "benchmark", "metric"]
        return base + ["eval_strategy", "train_regime"] if self.key == "strict" else base

    # ----------------------------------------------------------------------------------------------------
    def normalize(self, table: pd.DataFrame) -> pd.DataFrame:
        """Canonical names, protocols, regimes and percentage scale; rows without a number are dropped."""
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
        missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
        if missing:
            raise ValueError(f"results table is missing required column(s): {', '.join(missing)}")
        df = pd.DataFrame(
            {
                "paper": table["paper"].astype(object).map(lambda s: str(s).strip()),
                "model": table["model"].astype(object).map(self.model_aliases.canonical),
                "benchmark": table["benchmark"].astype(object).map(self.benchmark_aliases.canonical),
                "metric": table["metric"]
                .astype(object)
                .map(lambda s: _slug(self.metric_aliases.canonical(s) or "")),
                "value": pd.to_numeric(table["value"].astype(object), errors="coerce"),
            }
        )
        df["eval_strategy"] = (
            table["eval_strategy"].astype(object).map(normalize_protocol)
            if "eval_strategy" in table
            else "unknown"
        )
        df["train_regime"] = (
            table["train_regime"].astype(object).map(_regime) if "train_regime" in table else "full"
        )
        df["restricted_samples"] = (
            table["train_samples"].astype(object).map(_restricted_samples)
            if "train_samples" in table
            else False
        )
        df["provenance"] = (
            table["provenance"].astype(object).map(lambda s: str(s).strip().lower() if s == s else "unknown")
            if "provenance" in table
            else "unknown"
        )
        keep = (
            df["value"].notna() & np.isfinite(df["value"]) & df["model"].notna() & df["benchmark"].notna()
        ).astype(bool)
        df = df[keep]
        df = df.copy()
        # percentage scale: a 0-1 value of a percentage metric is a fraction
        pct = df["metric"].map(lambda m: any(m.startswith(p) for p in PERCENT_METRICS)).astype(bool)
        frac = pct & (df["value"].abs() <= 1.0)
        df.loc[frac, "value"] = df.loc[frac, "value"] * 100.0
        return df.reset_index(drop=True)

    def is_baseline(self, model: str) -> bool:
        return any(r.search(model) for r in self._baseline_re)

    def audit(self, table: pd.DataFrame) -> AuditReport:
        """Normalise, filter, group by the key and measure each key's spread."""
        df = self.normalize(table)
        dropped: dict[str, int] = {"rows_without_value": int(len(table) - len(df))}
        base = df["model"].map(self.is_baseline).astype(bool)
        dropped["baseline_rows"] = int(base.sum())
        df = df[~base]
        if self.drop_detection:
            det = (
                df["metric"].map(lambda m: m.startswith("map"))
                & df["benchmark"].map(lambda b: _slug(b).startswith(("dota", "dior")))
            ).astype(bool)
            dropped["detection_rows"] = int(det.sum())
            df = df[~det]
        copied = df["provenance"] == "copied"
        dropped["copied_rows"] = int(copied.sum())
        df = df[~copied]
        if self.key == "strict" and self.full_regime_only:
            lim = df["train_regime"] != "full"
            dropped["non_full_regime_rows"] = int(lim.sum())
            df = df[~lim]
        df = df.reset_index(drop=True)
        cols = self.key_columns
        key_cols = [*cols, "n_papers", "min", "max", "spread", "std", "flagged"]
        if df.empty:
            dropped.update(keys_restricted_samples=0, keys_intra_paper_duplicates=0, keys_single_paper=0)
            return AuditReport(df, pd.DataFrame(columns=key_cols), dropped, self.key, self.threshold)
        key_id = df.groupby(cols, sort=True, dropna=False).ngroup()
        df = df.assign(_key=key_id.to_numpy())
        restricted = df.groupby("_key")["restricted_samples"].any()
        per_paper = df.groupby(["_key", "paper"])["value"].agg(["min", "max"])
        dup = (per_paper["max"] - per_paper["min"] > 1e-9).groupby(level=0).any()
        # one number per paper (exact repeats inside a paper collapse)
        vals = per_paper["min"].groupby(level=0)
        stats = pd.DataFrame(
            {
                "n_papers": vals.size(),
                "min": vals.min(),
                "max": vals.max(),
                "std": vals.std(ddof=1),
                "restricted": restricted,
                "duplicate": dup,
            }
        )
        first = df.groupby("_key")[cols].first()
        stats = first.join(stats)
        dropped["keys_restricted_samples"] = int(stats["restricted"].sum())
        stats = stats[~stats["restricted"]]
        dropped["keys_intra_paper_duplicates"] = int(stats["duplicate"].sum())
        stats = stats[~stats["duplicate"]]
        dropped["keys_single_paper"] = int((stats["n_papers"] < self.min_papers).sum())
        stats = stats[stats["n_papers"] >= self.min_papers].copy()
        stats["spread"] = stats["max"] - stats["min"]
        stats["flagged"] = stats["spread"] >= self.threshold
        keys_df = stats[key_cols].reset_index(drop=True)
        df = df.drop(columns="_key")
        return AuditReport(df, keys_df, dropped, self.key, self.threshold)


def read_results_csv(path: str | Path, **kwargs: Any) -> pd.DataFrame:
    """Read a results table from CSV (every column as text, so messy strings survive), checking the columns."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path {str(path)!r} is not a file")
    df = pd.read_csv(path, dtype=str, keep_default_na=False, **kwargs)
    df.columns = [c.strip().lower() for c in df.columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"results table {path.name} is missing required column(s): {', '.join(missing)}")
    return df


# --- pretraining-configuration uniqueness and release rates ---------------------------------------------------

DEFAULT_SENSOR_TERMS = (
    r"^sentinel[\s_-]*\d?[a-z]?$",
    r"^landsat[\s_-]*\d*$",
    r"^modis$",
    r"^naip$",
    r"^worldview[\s_-]*\d*$",
    r"^planetscope$",
    r"^gaofen[\s_-]*\d*$",
    r"^sar$",
    r"^rgb$",
    r"^multispectral$",
    r"^hyperspectral$",
)


@dataclass
class Uniqueness:
    sets: dict[str, tuple[str, ...]]  # paper -> its canonical full pretraining set (papers with data only)
    unique: list[str]  # papers whose set no other paper shares
    n_with_data: int

    @property
    def n_unique(self) -> int:
        return len(self.unique)


def pretraining_uniqueness(
    pretraining_per_paper: Mapping[str, Iterable[str]],
    aliases: AliasTable | None = None,
    downstream_benchmarks: Iterable[str] = (),
    sensor_patterns: Iterable[str] = DEFAULT_SENSOR_TERMS,
) -> Uniqueness:
    """Which papers have a pretraining configuration no other paper shares.

    A paper's full set is its canonical, de-duplicated data-set names, skipping sensor-only entries
    ("Sentinel-2", "Landsat 8") and downstream benchmarks mis-listed as pretraining data; papers with no entry
    left have no extractable pretraining data and are not counted. Two sets are identical when they hold the
    same names (order ignored).
    """
    if not isinstance(pretraining_per_paper, Mapping):
        raise TypeError("pretraining_per_paper must be a mapping paper -> data-set names")
    if aliases is not None and not isinstance(aliases, AliasTable):
        raise TypeError(f"aliases must be an AliasTable, got {type(aliases).__name__}")
    table = aliases or AliasTable()
    sensors = [re.compile(p, re.IGNORECASE) for p in sensor_patterns]
    down = {_slug(b) for b in downstream_benchmarks}
    down |= {_slug(c) for b in downstream_benchmarks if (c := DEFAULT_BENCHMARK_ALIASES.canonical(b))}
    sets: dict[str, tuple[str, ...]] = {}
    for paper, names in pretraining_per_paper.items():
        if isinstance(names, str):
            raise TypeError(f"pretraining data of paper {paper!r} must be a list of names, not a string")
        out = []
        for raw in names or ():
            if not isinstance(raw, str) or not raw.strip():
                continue
            if any(r.search(raw.strip()) for r in sensors):
                continue
            c = table.canonical(raw)
            if c is None or _slug(c) in down or _slug(raw) in down:
                continue
            out.append(c)
        if out:
            sets[str(paper)] = tuple(sorted(set(out)))
    counts: dict[tuple[str, ...], int] = {}
    for s in sets.values():
        counts[s] = counts.get(s, 0) + 1
    unique = sorted(p for p, s in sets.items() if counts[s] == 1)
    return Uniqueness(sets, unique, len(sets))


def release_rates(records: pd.DataFrame) -> dict[str, float]:
    """Shares of papers releasing code, weights, and neither (columns ``code``, ``weights``: truthy/falsy)."""
    if not isinstance(records, pd.DataFrame):
        raise TypeError(f"records must be a pandas DataFrame, got {type(records).__name__}")
    missing = [c for c in ("code", "weights") if c not in records.columns]
    if missing:
        raise ValueError(f"records is missing required column(s): {', '.join(missing)}")
    if len(records) == 0:
        raise ValueError("records must be non-empty")

    def truthy(v: Any) -> bool:
        if isinstance(v, str):
            return v.strip().lower() in ("1", "true", "yes", "y", "released", "available")
        return bool(v) and v == v

    code = records["code"].map(truthy)
    weights = records["weights"].map(truthy)
    return {
        "code": float(code.mean()),
        "weights": float(weights.mean()),
        "no_weights": float(1 - weights.mean()),
        "neither": float((~code & ~weights).mean()),
    }
