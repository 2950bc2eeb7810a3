"""Data filter that keeps the documents with the highest Kontoyiannis entropy-rate estimate H_K.

Per generation of a synthetic-data loop: score every document of the pool by H_K (model-free: it reads only
the text), keep the top ``keep_fraction`` and train the next model on them. Repetitive, looping text has long
matches and a small H_K, so the filter drops it first.

Pitfall handled here (digest): H_K is length-biased on short documents (the log2(i) normalisation converges
slowly), so by default (``length_adjust=True``) the ranking score is the residual of H_K after a least-squares
fit of H_K on log2(length) over the pool being filtered [R: the paper's exact normalisation is unknown].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .hk_estimator import UNITS, _as_ids, _check_window, _many_match_lengths, entropy_from_match_lengths

__all__ = ["EntropyRateFilter"]


def _check_documents(documents: Any) -> list[Any]:
    if isinstance(documents, (str, bytes)) or not isinstance(documents, (Sequence, np.ndarray)):
        raise TypeError(f"documents must be a sequence of documents, got {type(documents).__name__}")
    docs = list(documents)
    if len(docs) == 0:
        raise ValueError("documents is empty: pass at least one document")
    return docs


class EntropyRateFilter:
    """Keep the ``keep_fraction`` of documents with the highest H_K (entropy rate, bits/token).

    Parameters
    ----------
    keep_fraction : fraction q in (0, 1] of the pool to keep; ``fit_transform`` keeps round(q * D) >= 1.
    variant, window, unit : passed to :func:`entropy_rate` (``"increasing"``, ``"bagrow"`` or ``"window"``).
    length_adjust : rank by the residual of H_K regressed on log2(document length) over the pool.

    Attributes
    ----------
    scores_ : H_K of each fitted document.
    ranking_scores_ : the score used for ranking (length-adjusted residual or ``scores_``).
    coef_ : (intercept, slope) of the H_K ~ log2(length) fit ((H mean, 0) without ``length_adjust``).
    selected_ : indices of the kept documents, ascending.
    threshold_ : smallest ranking score among the kept documents (used by ``transform`` on new data).
    """

    def __init__(
        self,
        keep_fraction: float = 0.5,
        *,
        variant: str = "increasing",
        window: int | None = None,
        unit: str = "word",
        length_adjust: bool = True,
    ):
        self.keep_fraction = keep_fraction
        self.variant = variant
        self.window = window
        self.unit = unit
        self.length_adjust = length_adjust

    def _validate_params(self) -> None:
        q = self.keep_fraction
        if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not 0.0 < q <= 1.0:
            raise ValueError(f"keep_fraction must be a number in (0, 1], got {q!r}")
        _check_window(self.variant, self.window)
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")

    def score(self, documents: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """H_K and token count of every document (str, token sequence or integer-id array)."""
        self._validate_params()
        docs = _check_documents(documents)
        ids = []
        for k, doc in enumerate(docs):
            try:
                ids.append(_as_ids(doc, self.unit))
            except (TypeError, ValueError) as err:
                raise type(err)(f"documents[{k}]: {err}") from None
        window = self.window if self.variant == "window" else None
        lams = _many_match_lengths(ids, window)
        h = np.array([entropy_from_match_lengths(lam, self.variant, self.window) for lam in lams])
        return h, np.array([a.size for a in ids], dtype=np.float64)

    def _ranking(self, h: np.ndarray, n: np.ndarray) -> np.ndarray:
        intercept, slope = self.coef_
        return h - (intercept + slope * np.log2(n))

    def fit(self, documents: Sequence[Any]) -> EntropyRateFilter:
        """Score the pool and select its top ``keep_fraction`` by (length-adjusted) H_K."""
        h, n = self.score(documents)
        x = np.log2(n)
        if self.length_adjust and h.size >= 2 and np.ptp(x) > 0:
            slope, intercept = np.polyfit(x, h, 1)
            self.coef_ = (float(intercept), float(slope))
        else:
            self.coef_ = (float(h.mean()) if self.length_adjust else 0.0, 0.0)
        self.scores_ = h
        self.ranking_scores_ = self._ranking(h, n)
        k = max(1, int(round(self.keep_fraction * h.size)))
        order = np.argsort(-self.ranking_scores_, kind="stable")
        self.selected_ = np.sort(order[:k])
        self.threshold_ = float(self.ranking_scores_[order[k - 1]])
        self.n_features_in_ = 1
        return self

    def fit_transform(self, documents: Sequence[Any]) -> list[Any]:
        """The kept documents of the pool (exactly round(q * D) of them), in their original order."""
        docs = _check_documents(documents)
        self.fit(docs)
        return [docs[i] for i in self.selected_]

    def transform(self, documents: Sequence[Any]) -> list[Any]:
        """Documents of a new pool whose ranking score reaches the fitted ``threshold_``."""
        if not hasattr(self, "threshold_"):
            raise ValueError("this EntropyRateFilter is not fitted yet; call fit(documents) first")
        docs = _check_documents(documents)
        h, n = self.score(docs)
        keep = self._ranking(h, n) >= self.threshold_
        return [d for d, k in zip(docs, keep) if k]
