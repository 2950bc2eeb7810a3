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

# word edges are written as "no letter/digit around" rather than \b, so that snake_case ("Random_init_ViT") and
# joined spellings ("RandomInit") are caught too
DEFAULT_BASELINE_PATTERNS = (
    r"(?<![a-z0-9])random(?:[\s_-]*init\w*)?(?![a-z])",
    r"scratch",
    r"imagenet",
    # supervised baselines, not self-, semi- or weakly supervised (nor unsupervised) foundation models
    r"(?<![a-z])(?<!self[\s_-])(?<!semi[\s_-])(?<!weakly[\s_-])supervised",
    r"(?<![a-z0-9])rf(?![a-z0-9])|random[\s_-]*forest",
    r"xgboost|lightgbm",
    r"(?<![a-z0-9])svm(?![a-z0-9])",
    r"(?<![a-z0-9])k[\s_-]*nn(?![a-z0-9])",
)
PERCENT_METRICS = ("acc", "accuracy", "oa", "f1", "miou", "iou", "map", "precision", "recall", "kappa", "auc")


def _slug(name: str) -> str:
    """Lower case, punctuation and spaces removed: the comparison form of a name."""
    return re.sub(r"[^a-z0-9+]", "", name.lower())


def _fold_key(name: str) -> str:
    """Comparison form of a name outside the alias tables: case, spaces and punctuation ignored, and a trailing
    "dataset" / "data set" dropped ("So2Sat", "so2sat", "SO2SAT dataset" are one name)."""
    key = _slug(name)
    if key.endswith("dataset") and len(key) > len("dataset"):
        key = key[: -len("dataset")]
    return key


def fold_spellings(names: Iterable[str], preferred: Iterable[str] = ()) -> dict[str, str]:
    """Map every spelling in ``names`` to one representative of its class of spellings that differ only in case,
    spaces, punctuation or a trailing "dataset".

    The representative is a ``preferred`` name of that class when there is one (e.g. an alias table's canonical
    names; preferred names are never merged with each other), else the most frequent spelling in ``names``,
    ties broken by length, then alphabetically. Returns ``{spelling: representative}``.
    """
    counts: dict[str, int] = {}
    for n in names:
        if isinstance(n, str):
            counts[n] = counts.get(n, 0) + 1
    pref = sorted({p for p in preferred if isinstance(p, str)})
    pref_by_key: dict[str, str] = {}
    for p in pref:
        pref_by_key.setdefault(_fold_key(p), p)
    groups: dict[str, list[str]] = {}
    for n in counts:
        groups.setdefault(_fold_key(n), []).append(n)
    out: dict[str, str] = {}
    for key, members in groups.items():
        rep = pref_by_key.get(key) or min(members, key=lambda m: (-counts[m], len(m), m))
        for m in members:
            out[m] = m if m in pref else rep
    return out


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

    ``aliases`` maps canonical name -> list of aliases; matching ignores case, spaces, punctuation and a trailing
    "dataset". Names not in the table are returned stripped (``strict=False``) or as None (``strict=True``); the
    auditor then folds unlisted spellings of one name together (:func:`fold_spellings`).
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
        if hit is None:
            hit = self._lookup.get(_fold_key(s))  # "DOTA-v1.0 dataset" is the listed "DOTA-v1.0"
        if hit is not None:
            return hit
        return None if self.strict else s

    def __contains__(self, name: str) -> bool:
        return _slug(str(name)) in self._lookup

    @property
    def canonical_names(self) -> list[str]:
        """The table's canonical spellings."""
        return sorted(set(self._lookup.values()))


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
    fold_unlisted : names outside the alias tables that differ only in case, spaces, punctuation or a trailing
        "dataset" are one name (:func:`fold_spellings`; the alias tables' canonical spellings win, else the most
        frequent spelling in the table). ``False`` compares them as typed.
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
        fold_unlisted: bool = True,
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
        if isinstance(baseline_patterns, str):
            raise TypeError("baseline_patterns must be an iterable of regular expressions, not one string")
        self.model_aliases = model_aliases or AliasTable()
        self.benchmark_aliases = benchmark_aliases or DEFAULT_BENCHMARK_ALIASES
        self.metric_aliases = metric_aliases or DEFAULT_METRIC_ALIASES
        self.baseline_patterns = tuple(baseline_patterns)
        self._baseline_re = [re.compile(p, re.IGNORECASE) for p in self.baseline_patterns]
        self.drop_detection = bool(drop_detection)
        self.full_regime_only = bool(full_regime_only)
        self.fold_unlisted = bool(fold_unlisted)

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
        if self.fold_unlisted:
            for col, table in (("model", self.model_aliases), ("benchmark", self.benchmark_aliases)):
                fold = fold_spellings(df[col], preferred=table.canonical_names)
                df[col] = df[col].map(fold).astype(object)
        # percentage scale: a 0-1 value of a percentage metric is a fraction
        pct = np.array([any(m.startswith(p) for p in PERCENT_METRICS) for m in df["metric"]], dtype=bool)
        frac = pct & (df["value"].abs() <= 1.0)
        df.loc[frac, "value"] = df.loc[frac, "value"] * 100.0
        return df.reset_index(drop=True)

    def is_baseline(self, model: str) -> bool:
        return any(r.search(model) for r in self._baseline_re)

    def audit(self, table: pd.DataFrame) -> AuditReport:
        """Normalise, filter, group by the key and measure each key's spread."""
        df = self.normalize(table)
        dropped: dict[str, int] = {"rows_without_value": int(len(table) - len(df))}
        # row masks as plain bool arrays: on an empty table pandas infers string dtypes that `&` rejects
        base = np.array([self.is_baseline(m) for m in df["model"]], dtype=bool)
        dropped["baseline_rows"] = int(base.sum())
        df = df[~base]
        if self.drop_detection:
            det = np.array(
                [
                    m.startswith("map") and _slug(b).startswith(("dota", "dior"))
                    for m, b in zip(df["metric"], df["benchmark"], strict=True)
                ],
                dtype=bool,
            )
            dropped["detection_rows"] = int(det.sum())
            df = df[~det]
        copied = np.array([p == "copied" for p in df["provenance"]], dtype=bool)
        dropped["copied_rows"] = int(copied.sum())
        df = df[~copied]
        if self.key == "strict" and self.full_regime_only:
            lim = np.array([r != "full" for r in df["train_regime"]], dtype=bool)
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


_SENSOR_SUFFIX = re.compile(r"[\s_-]*(dataset|data[\s_-]*set|data|imagery|images)$", re.IGNORECASE)


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
    fold_unlisted: bool = True,
) -> Uniqueness:
    """Which papers have a pretraining configuration no other paper shares.

    A paper's full set is its canonical, de-duplicated data-set names, skipping sensor-only entries
    ("Sentinel-2", "Landsat 8", also with a trailing "dataset", "data" or "imagery") and downstream benchmarks mis-listed as pretraining data; papers with no entry
    left have no extractable pretraining data and are not counted. Two sets are identical when they hold the
    same names (order ignored). With ``fold_unlisted`` names outside ``aliases`` that differ only in case, spaces,
    punctuation or a trailing "dataset" are one name (:func:`fold_spellings`), and a pretraining entry is a
    mis-listed downstream benchmark when it folds to one of ``downstream_benchmarks`` or to its canonical name in
    :data:`DEFAULT_BENCHMARK_ALIASES`.
    """
    if not isinstance(pretraining_per_paper, Mapping):
        raise TypeError("pretraining_per_paper must be a mapping paper -> data-set names")
    if aliases is not None and not isinstance(aliases, AliasTable):
        raise TypeError(f"aliases must be an AliasTable, got {type(aliases).__name__}")
    table = aliases or AliasTable()
    sensors = [re.compile(p, re.IGNORECASE) for p in sensor_patterns]
    if isinstance(downstream_benchmarks, str):
        raise TypeError("downstream_benchmarks must be an iterable of names, not one string")
    key = _fold_key if fold_unlisted else _slug
    downstream = [b for b in downstream_benchmarks if isinstance(b, str) and b.strip()]
    down = {key(b) for b in downstream}
    down |= {key(c) for b in downstream if (c := DEFAULT_BENCHMARK_ALIASES.canonical(b))}

    def is_downstream(raw: str, canon: str) -> bool:
        bench = DEFAULT_BENCHMARK_ALIASES.canonical(raw)
        return key(canon) in down or key(raw) in down or (bench is not None and key(bench) in down)

    entries: dict[str, list[str]] = {}
    for paper, names in pretraining_per_paper.items():
        if isinstance(names, str):
            raise TypeError(f"pretraining data of paper {paper!r} must be a list of names, not a string")
        out = []
        for raw in names or ():
            if not isinstance(raw, str) or not raw.strip():
                continue
            bare = _SENSOR_SUFFIX.sub(
                "", raw.strip()
            )  # "Landsat 8 dataset", "Sentinel-2 imagery" name a sensor
            if any(r.search(raw.strip()) or r.search(bare) for r in sensors):
                continue
            c = table.canonical(raw)
            if c is None or is_downstream(raw, c):
                continue
            out.append(c)
        if out:
            entries[str(paper)] = out
    fold = (
        fold_spellings([n for v in entries.values() for n in v], preferred=table.canonical_names)
        if fold_unlisted
        else {}
    )
    sets = {p: tuple(sorted({fold.get(n, n) for n in v})) for p, v in entries.items()}
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
