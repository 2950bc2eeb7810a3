"""Peer benchmark: our sympy answer equivalence against math-verify on the same noisy annotations.

Same items (synthetic noisy annotations with known answer sets, 20% secretly correct), one process: recall and
precision of "this 'incorrect' annotation is actually correct", and CPU seconds per item (best of 3; our parse cache is cleared before each repeat).
"""

from __future__ import annotations

import numpy as np

from neurips26.harness import time_repeats

from .answers import _parse_cached, equivalent
from .data import noisy_math_items
from .reverify import math_verify_equivalent, reverify


def _score(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    tp = float((pred & truth).sum())
    return tp / max(truth.sum(), 1), (tp / pred.sum() if pred.sum() else 1.0)


def main(quick: bool = True) -> list[dict]:
    items = noisy_math_items(140 if quick else 1400, seed=0)
    truth = np.array([it.planted_correct for it in items])

    def ours_all() -> np.ndarray:
        _parse_cached.cache_clear()  # time real parsing, not the cache
        return np.array([any(bool(equivalent(it.annotation, g)) for g in it.answer_set) for it in items])

    def pipeline() -> np.ndarray:
        _parse_cached.cache_clear()
        return np.array(
            [reverify(it.problem, it.annotation, it.answer_set).verdict == "correct" for it in items]
        )

    def peer() -> np.ndarray:
        return np.array(
            [any(bool(math_verify_equivalent(g, it.annotation)) for g in it.answer_set) for it in items]
        )

    rows = []
    base = None
    for name, fn in [
        ("ours (sympy equivalence)", ours_all),
        ("ours (reverify pipeline)", pipeline),
        ("math-verify", peer),
    ]:
        pred = fn()
        sec = time_repeats(fn, repeat=3, warmup=0, clock="cpu")["min"]
        rec, prec = _score(pred, truth)
        base = sec if base is None else base
        rows.append(
            {
                "method": name,
                "items": len(items),
                "recall": float(rec),
                "precision": float(prec),
                "seconds_per_item": sec / len(items),
                "time_ratio_vs_ours": sec / base,
            }
        )
    return rows
