"""A planted synthetic GFM literature: messy reported-results tables whose disagreements are known.

Ground truth: every (model, benchmark, protocol) has a true score; finetuning sits a model- and
benchmark-specific gap above linear probing, kNN below it. Each paper reports its own model and a few baselines
(re-run or copied from an earlier paper) on the benchmarks it chose, under one protocol. The generator plants
seed noise (sd 1), undisclosed deviations (a share of re-run rows shifted down by 10-25 points), messy protocol
strings (some unmappable), metric-scale and alias variants, intra-paper duplicates, few-shot rows mixed into
full-data keys, baseline models and detection rows. Benchmarks are chosen by independent inclusion with
Zipf-shaped probabilities q_k = min(q_max, a k^-s), so the expected usage share of benchmark k is
q_k / sum_j q_j exactly and the concentration indices have closed forms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .concentration import gini, hhi, top_k_share

ALIASED_BENCHMARKS = {
    "NWPU-RESISC45": ["RESISC-45", "RESISC45", "NWPU RESISC45"],
    "EuroSAT": ["Euro-SAT", "eurosat"],
    "BigEarthNet": ["BigEarthNet-S2", "Big Earth Net"],
    "fMoW": ["fMoW-RGB"],
    "UCMerced": ["UC Merced", "UCM"],
    "fMoW-Sentinel": ["fMoW Sentinel"],
    "DOTA": ["DOTA-v1.0"],
    "DIOR": ["DIOR dataset"],
}
DETECTION = ("DOTA", "DIOR")
PROTOCOL_STRINGS = {
    "linear": ["linear probing", "Linear probe", "frozen encoder", "LP", "frozen backbone + linear head"],
    "finetune": ["fine-tuning", "Full FT", "end-to-end finetuning", "fine-tune (all layers)"],
    "knn": ["kNN", "k-NN eval", "nearest neighbour"],
    "unknown": ["standard protocol", "see appendix", ""],
}
PRETRAINING_CORPORA = {
    "SSL4EO-S12": ["SSL4EO S12", "ssl4eo-s12"],
    "MillionAID": ["Million-AID", "Million AID"],
    "SatlasPretrain": ["Satlas Pretrain", "SatlasPretrain"],
    "SeCo": ["SeCo dataset"],
    "GeoPile": ["Geo-Pile"],
    "SEN12MS": ["SEN12-MS"],
    "fMoW-pretrain": ["fMoW pretrain"],
    "MDAS": ["MDAS"],
    "SkyScript": ["Sky-Script"],
    "RS5M": ["RS-5M"],
    "LAION-EO": ["LAION EO"],
    "MMEarth": ["MM-Earth"],
    "TreeSatAI-TS": ["TreeSatAI TS"],
    "FLAIR": ["FLAIR dataset"],
    "S2-100K": ["S2 100K"],
    "Major-TOM": ["MajorTOM", "Major TOM"],
    "GeoNet-PT": ["GeoNet PT"],
    "SAR-Pile": ["SAR Pile"],
    "HLS-Pretrain": ["HLS pretrain"],
    "Clay-v1": ["Clay v1"],
}
SENSOR_ENTRIES = ["Sentinel-2", "Landsat 8", "Sentinel-1", "NAIP"]
BASELINES = ["ImageNet-supervised ResNet-50", "Random init ViT-B", "Random Forest"]


@dataclass
class SyntheticLiterature:
    """The generated corpus and its planted truth."""

    results: pd.DataFrame  # the messy reported-numbers table (what an extractor would produce)
    records: pd.DataFrame  # one row per paper: paper, model, downstream, pretraining, code, weights
    benchmarks: list[str]  # canonical benchmark names, Zipf rank order
    inclusion: np.ndarray  # q_k, the per-paper inclusion probability of each benchmark
    truth: dict[str, set] = field(default_factory=dict)
    planted: dict[str, int] = field(default_factory=dict)

    @property
    def expected_shares(self) -> np.ndarray:
        return self.inclusion / self.inclusion.sum()

    def closed_form(self) -> dict[str, float]:
        """Population Gini / HHI / top-3 share of the generator's benchmark usage (from q, not from a sample)."""
        s = self.expected_shares
        return {"gini": gini(s), "hhi": hhi(s), "top3_share": top_k_share(s, 3)}

    @property
    def benchmark_aliases(self) -> dict[str, list[str]]:
        return {b: ALIASED_BENCHMARKS.get(b, []) for b in self.benchmarks}


def zipf_inclusion(n_benchmarks: int = 60, zipf_s: float = 0.8, q_max: float = 0.9) -> np.ndarray:
    """Per-paper inclusion probability of each benchmark: q_k = min(q_max, q_max * k^-s), k = 1..K."""
    if isinstance(n_benchmarks, bool) or not isinstance(n_benchmarks, (int, np.integer)) or n_benchmarks < 2:
        raise ValueError(f"n_benchmarks must be an integer >= 2, got {n_benchmarks!r}")
    if not 0 < q_max <= 1 or zipf_s < 0:
        raise ValueError("q_max must be in (0, 1] and zipf_s >= 0")
    return np.minimum(q_max, q_max * (np.arange(1, n_benchmarks + 1) ** -float(zipf_s)))


def benchmark_incidence(n_papers: int, inclusion: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Papers x benchmarks 0/1 matrix: paper i evaluates benchmark k independently with probability q_k."""
    return (rng.random((int(n_papers), len(inclusion))) < np.asarray(inclusion)[None, :]).astype(float)


def synthetic_literature(
    n_papers: int = 150,
    n_models: int = 30,
    n_benchmarks: int = 60,
    zipf_s: float = 0.8,
    q_max: float = 0.9,
    noise_sd: float = 1.0,
    deviation_rate: float = 0.10,
    deviation_range: tuple[float, float] = (10.0, 25.0),
    duplicate_rate: float = 0.04,
    fewshot_rate: float = 0.06,
    unknown_protocol_rate: float = 0.05,
    fraction_scale_rate: float = 0.10,
    copy_rate: float = 0.5,
    threshold: float = 10.0,
    seed: int = 0,
) -> SyntheticLiterature:
    """Generate a planted literature (see the module docstring); ``truth`` holds the keys an exact auditor finds.

    ``truth["strict"]``: strict keys (model, benchmark, metric, protocol, "full") whose NOISE-FREE values (true
    score + planted deviation) spread by >= ``threshold`` after the planted filters; ``truth["loose_only"]``:
    loose keys flagged only because linear and finetune numbers mix (no strict sub-key of theirs is flagged);
    ``truth["duplicate"]`` / ``truth["fewshot"]``: strict keys holding a planted intra-paper duplicate / a
    few-shot row.
    """
    for name, v in (("n_papers", n_papers), ("n_models", n_models), ("n_benchmarks", n_benchmarks)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
    if n_benchmarks < len(ALIASED_BENCHMARKS):
        raise ValueError(f"n_benchmarks must be >= {len(ALIASED_BENCHMARKS)}, got {n_benchmarks}")
    for name, v in (
        ("deviation_rate", deviation_rate),
        ("duplicate_rate", duplicate_rate),
        ("fewshot_rate", fewshot_rate),
        ("unknown_protocol_rate", unknown_protocol_rate),
        ("fraction_scale_rate", fraction_scale_rate),
        ("copy_rate", copy_rate),
    ):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    q = zipf_inclusion(n_benchmarks, zipf_s, q_max)
    rng = np.random.default_rng(seed)
    # benchmark names in Zipf rank order: the aliased real-world names at fixed ranks (DOTA/DIOR mid-table)
    ranks = {0: "NWPU-RESISC45", 1: "EuroSAT", 2: "BigEarthNet", 3: "UCMerced", 4: "fMoW", 6: "DOTA"}
    ranks.update({9: "fMoW-Sentinel", 12: "DIOR"})
    benchmarks = [ranks.get(k, f"SynBench-{k:02d}") for k in range(n_benchmarks)]
    models = [f"GFM-{i:02d}" for i in range(n_models)]
    # true scores: linear probe = difficulty + quality + interaction; finetune = linear + gap; kNN = linear - gap'
    difficulty = rng.uniform(50, 80, n_benchmarks)
    quality = rng.normal(0, 4, n_models)
    linear = difficulty[None, :] + quality[:, None] + rng.normal(0, 2, (n_models, n_benchmarks))
    true = {
        "linear": linear,
        "finetune": linear + rng.uniform(2, 18, (n_models, n_benchmarks)),
        "knn": linear - rng.uniform(2, 8, (n_models, n_benchmarks)),
    }
    true["unknown"] = true[
        "linear"
    ]  # an unlabelled protocol is linear probing in truth (its key stays apart)
    base_true = rng.uniform(30, 60, (len(BASELINES), n_benchmarks))

    rows: list[dict] = []
    records: list[dict] = []
    first_report: dict[tuple, float] = {}
    planted = {"deviations": 0, "duplicates": 0, "fewshot": 0, "copied": 0, "fraction_scale_papers": 0}
    truth_dup: set = set()
    truth_few: set = set()
    canon_pre: dict[str, tuple[str, ...]] = {}
    corpora = list(PRETRAINING_CORPORA)
    for p in range(n_papers):
        paper = f"paper-{p:03d}"
        own = int(rng.integers(n_models))
        proto = str(rng.choice(["linear", "finetune", "knn"], p=[0.45, 0.45, 0.10]))
        if rng.random() < unknown_protocol_rate:
            proto = "unknown"
        proto_text = str(rng.choice(PROTOCOL_STRINGS[proto]))
        fraction_scale = rng.random() < fraction_scale_rate
        planted["fraction_scale_papers"] += int(fraction_scale)
        chosen = np.flatnonzero(rng.random(n_benchmarks) < q)
        others = rng.choice([m for m in range(n_models) if m != own], size=2, replace=False)
        compared: list[tuple[str, int]] = [("gfm", own), *(("gfm", int(m)) for m in others)]
        if rng.random() < 0.3:
            compared.append(("baseline", int(rng.integers(len(BASELINES)))))
        paper_rows: list[dict] = []
        for b in chosen:
            bname = benchmarks[b]
            metric = "mAP" if bname in DETECTION else str(rng.choice(["Accuracy", "OA", "acc"]))
            raw_b = str(rng.choice([bname, *ALIASED_BENCHMARKS.get(bname, [])]))
            for kind, m in compared:
                name = models[m] if kind == "gfm" else BASELINES[m]
                clean = float(true[proto][m, b] if kind == "gfm" else base_true[m, b])
                key = (name, bname, "map" if bname in DETECTION else "accuracy", proto)
                provenance = "rerun"
                deviation = 0.0
                if m != own or kind == "baseline":
                    if key in first_report and rng.random() < copy_rate:
                        provenance = "copied"
                if provenance == "copied":
                    value = first_report[key]
                    planted["copied"] += 1
                else:
                    if rng.random() < deviation_rate:
                        deviation = -float(rng.uniform(*deviation_range))
                        planted["deviations"] += 1
                    value = clean + deviation + float(rng.normal(0, noise_sd))
                    first_report.setdefault(key, value)
                paper_rows.append(
                    {
                        "paper": paper,
                        "model": name if rng.random() < 0.7 else name.replace("-", " "),
                        "benchmark": raw_b,
                        "metric": metric,
                        "value": value,
                        "eval_strategy": proto_text,
                        "train_regime": str(rng.choice(["full", "", "100%"])),
                        "train_samples": "",
                        "provenance": provenance,
                        "_kind": kind,
                        "_clean": clean + deviation,
                        "_key": key,
                    }
                )
        # intra-paper duplicate: one re-run row reported twice with a different number
        reruns = [r for r in paper_rows if r["provenance"] == "rerun" and r["_kind"] == "gfm"]
        if reruns and rng.random() < duplicate_rate:
            r = dict(reruns[int(rng.integers(len(reruns)))])
            r["value"] = r["value"] + float(rng.uniform(1, 5))
            paper_rows.append(r)
            truth_dup.add(r["_key"])
            planted["duplicates"] += 1
        # few-shot row filed under the full-data protocol string (train_samples says otherwise)
        own_rows = [r for r in paper_rows if r["_key"][0] == models[own] and r["_key"][1] not in DETECTION]
        if own_rows and rng.random() < fewshot_rate:
            r = dict(own_rows[int(rng.integers(len(own_rows)))])
            r["value"] = r["value"] - float(rng.uniform(10, 30))
            r["_clean"] = r["_clean"] - 20.0
            r["train_samples"] = str(rng.choice(["10%", "100", "0.01"]))
            r["provenance"] = "rerun"
            paper_rows.append(r)
            truth_few.add(r["_key"])
            planted["fewshot"] += 1
        if fraction_scale:
            for r in paper_rows:
                r["value"] = r["value"] / 100.0
        rows.extend(paper_rows)
        # pretraining data: a fresh combination, or a copy of an earlier paper's set
        if rng.random() < 0.1:
            pre_canon: tuple[str, ...] = ()
            raw_pre = [str(rng.choice(SENSOR_ENTRIES))] if rng.random() < 0.5 else []
        else:
            if canon_pre and rng.random() < 0.25:
                pre_canon = canon_pre[str(rng.choice(sorted(canon_pre)))]
            else:
                k = int(rng.integers(1, 4))
                pre_canon = tuple(sorted(rng.choice(corpora, size=k, replace=False).tolist()))
            canon_pre[paper] = pre_canon
            raw_pre = [str(rng.choice([c, *PRETRAINING_CORPORA[c]])) for c in pre_canon]
            if rng.random() < 0.3:
                raw_pre.append(str(rng.choice(SENSOR_ENTRIES)))
            if rng.random() < 0.15:  # a downstream benchmark mis-listed as pretraining data
                raw_pre.append(str(rng.choice(["EuroSAT", "RESISC-45", "UC Merced", "BigEarthNet-S2"])))
            if rng.random() < 0.1:
                raw_pre.append(raw_pre[0])
            rng.shuffle(raw_pre)
        records.append(
            {
                "paper": paper,
                "model": models[own],
                "downstream": [
                    str(rng.choice([benchmarks[b], *ALIASED_BENCHMARKS.get(benchmarks[b], [])]))
                    for b in chosen
                ],
                "pretraining": raw_pre,
                "code": bool(rng.random() < 0.7),
                "weights": bool(rng.random() < 0.61),
            }
        )
    table = pd.DataFrame(rows)
    truth = _planted_truth(table, truth_dup, truth_few, threshold)
    counts: dict[tuple[str, ...], int] = {}
    for s in canon_pre.values():
        counts[s] = counts.get(s, 0) + 1
    planted["unique_pretraining"] = sum(1 for s in canon_pre.values() if counts[s] == 1)
    planted["papers_with_pretraining"] = len(canon_pre)
    public = table.drop(columns=["_kind", "_clean", "_key"])
    return SyntheticLiterature(public, pd.DataFrame(records), benchmarks, q, truth, planted)


def _planted_truth(table: pd.DataFrame, dup: set, few: set, threshold: float) -> dict[str, set]:
    """Keys an exact auditor must flag, from the generator's metadata and noise-free values."""
    t = table[(table["_kind"] == "gfm") & (table["provenance"] != "copied")]
    t = t[[k[1] not in DETECTION for k in t["_key"]]]
    strict: dict[tuple, dict[str, float]] = {}
    for key, paper, clean in zip(t["_key"], t["paper"], t["_clean"], strict=True):
        if key in dup or key in few:
            continue
        strict.setdefault(key, {})[paper] = clean
    flagged_strict = {k for k, v in strict.items() if len(v) >= 2 and np.ptp(list(v.values())) >= threshold}
    loose: dict[tuple, dict[str, float]] = {}
    bad_loose = {k[:3] for k in dup | few}
    for key, v in strict.items():
        for paper, clean in v.items():
            loose.setdefault(key[:3], {})[paper] = clean
    loose_flagged = {
        k
        for k, v in loose.items()
        if k not in bad_loose and len(v) >= 2 and np.ptp(list(v.values())) >= threshold
    }
    loose_only = {k for k in loose_flagged if not any(s[:3] == k for s in flagged_strict)}
    return {"strict": flagged_strict, "loose_only": loose_only, "duplicate": set(dup), "fewshot": set(few)}
