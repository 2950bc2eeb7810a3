"""Data filter that keeps the documents with the highest Kontoyiannis entropy-rate estimate H_K.

Per generation of a synthetic-data loop: score every document of the pool by H_K (model-free: it reads only
the text), keep the top ``keep_fraction`` and train the next model on them. Repetitive, looping text has long
matches and a small H_K, so the filter drops it first.

Pitfall handled here (digest): H_K is length-biased on short documents (the log2(i) normalisation converges
slowly), so by default (``length_adjust=True``) the ranking score is the residual of H_K after a least-squares
fit of H_K on log2(length) over the pool being filtered [R: the paper's exact normalisation is unknown].

A document with fewer than 2 tokens has no entropy-rate estimate. By default (``on_short="drop"``) it gets the
score NaN, is never kept, and a warning says how many there were; ``on_short="raise"`` raises instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .hk_estimator import UNITS, _as_ids, _check_window, _many_match_lengths, entropy_from_match_lengths

__all__ = ["EntropyRateFilter"]

ON_SHORT = ("drop", "raise")


def _check_documents(documents: Any) -> list[Any]:
    if isinstance(documents, (str, bytes)) or not isinstance(documents, (Sequence, np.ndarray)):
        raise TypeError(f"documents must be a sequence of documents, got {type(documents).__name__}")
    docs = list(documents)
    if len(docs) == 0:
        raise ValueError("documents is empty: pass at least one document")
    return docs


class EntropyRateFilter(TransformerMixin, BaseEstimator):
    """Keep the ``keep_fraction`` of documents with the highest H_K (entropy rate, bits/token).

    A scikit-learn transformer over a list of documents (str, token sequences or integer-id arrays), like
    ``CountVectorizer``: ``fit`` scores a pool and fixes a threshold, ``transform`` returns the documents that
    reach it, ``fit_transform`` the kept part of the pool itself. It composes in a ``Pipeline`` ahead of a
    vectorizer, and ``clone`` / ``get_params`` / ``set_params`` work.

    Parameters
    ----------
    keep_fraction : fraction q in (0, 1] of the pool to keep; ``fit_transform`` keeps ``max(1, round(q * D))``
        of the D scorable documents.
    variant, window, unit : passed to :func:`entropy_rate` (``"increasing"``, ``"bagrow"`` or ``"window"``).
    length_adjust : rank by the residual of H_K regressed on log2(document length) over the pool.
    on_short : ``"drop"`` (default; documents of fewer than 2 tokens score NaN and are never kept, with a
        warning) or ``"raise"``.

    Attributes
    ----------
    scores_ : H_K of each fitted document (NaN for a short one).
    ranking_scores_ : the score used for ranking (length-adjusted residual or ``scores_``).
    coef_ : (intercept, slope) of the H_K ~ log2(length) fit ((H mean, 0) without ``length_adjust``).
    selected_ : indices of the kept documents, ascending.
    threshold_ : smallest ranking score among the kept documents (used by ``transform`` on new data).
    n_short_ : number of fitted documents too short to score.

    Examples
    --------
    >>> docs = ["a b a b a b a b a b", "the cat sat on the mat with a hat", "x y x y x y x y"]
    >>> EntropyRateFilter(keep_fraction=0.34).fit_transform(docs)
    ['the cat sat on the mat with a hat']
    """

    def __init__(
        self,
        keep_fraction: float = 0.5,
        *,
        variant: str = "increasing",
        window: int | None = None,
        unit: str = "word",
        length_adjust: bool = True,
        on_short: str = "drop",
    ):
        self.keep_fraction = keep_fraction
        self.variant = variant
        self.window = window
        self.unit = unit
        self.length_adjust = length_adjust
        self.on_short = on_short

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.requires_fit = True
        return tags

    def _validate_params(self) -> None:
        q = self.keep_fraction
        if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not 0.0 < q <= 1.0:
            raise ValueError(f"keep_fraction must be a number in (0, 1], got {q!r}")
        _check_window(self.variant, self.window)
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")
        if not isinstance(self.length_adjust, (bool, np.bool_)):
            raise ValueError(f"length_adjust must be True or False, got {self.length_adjust!r}")
        if self.on_short not in ON_SHORT:
            raise ValueError(f"on_short must be one of {ON_SHORT}, got {self.on_short!r}")

    def entropy_rates(self, documents: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """H_K and token count of every document (H_K is NaN for a document of fewer than 2 tokens)."""
        self._validate_params()
        docs = _check_documents(documents)
        ids: list[np.ndarray | None] = []
        for k, doc in enumerate(docs):
            try:
                ids.append(_as_ids(doc, self.unit))
            except ValueError as err:
                short = "at least 2 tokens" in str(err) or "empty" in str(err)
                if not short or self.on_short == "raise":
                    raise ValueError(f"documents[{k}]: {err}") from None
                ids.append(None)
            except TypeError as err:
                raise TypeError(f"documents[{k}]: {err}") from None
        ok = [k for k, a in enumerate(ids) if a is not None]
        h = np.full(len(docs), np.nan)
        n = np.zeros(len(docs))
        window = self.window if self.variant == "window" else None
        for k, lam in zip(ok, _many_match_lengths([ids[k] for k in ok], window)):
            h[k] = entropy_from_match_lengths(lam, self.variant, self.window)
            n[k] = lam.size
        if len(ok) < len(docs):
            warnings.warn(
                f"{len(docs) - len(ok)} of {len(docs)} documents have fewer than 2 tokens: they score NaN and "
                "are never kept",
                UserWarning,
                stacklevel=3,
            )
        return h, n

    def _ranking(self, h: np.ndarray, n: np.ndarray) -> np.ndarray:
        intercept, slope = self.coef_
        with np.errstate(divide="ignore", invalid="ignore"):
            return h - (intercept + slope * np.log2(np.where(n > 0, n, np.nan)))

    def fit(self, X: Sequence[Any], y: Any = None) -> EntropyRateFilter:
        """Score the pool ``X`` (a list of documents) and select its top ``keep_fraction`` by H_K."""
        h, n = self.entropy_rates(X)
        valid = np.isfinite(h)
        if not valid.any():
            raise ValueError("documents: none has the 2 tokens an entropy-rate estimate needs")
        x = np.log2(n[valid])
        if self.length_adjust and valid.sum() >= 2 and np.ptp(x) > 0:
            slope, intercept = np.polyfit(x, h[valid], 1)
            self.coef_ = (float(intercept), float(slope))
        else:
            self.coef_ = (float(h[valid].mean()) if self.length_adjust else 0.0, 0.0)
        self.scores_ = h
        self.ranking_scores_ = self._ranking(h, n)
        self.n_short_ = int((~valid).sum())
        k = max(1, int(round(self.keep_fraction * valid.sum())))
        rank = np.where(valid, -self.ranking_scores_, np.inf)
        order = np.argsort(rank, kind="stable")
        self.selected_ = np.sort(order[:k])
        self.threshold_ = float(self.ranking_scores_[order[k - 1]])
        return self

    def fit_transform(self, X: Sequence[Any], y: Any = None, **fit_params: Any) -> list[Any]:
        """The kept documents of the pool (exactly ``max(1, round(q * D))`` of them), in their original order."""
        docs = _check_documents(X)
        self.fit(docs)
        return [docs[i] for i in self.selected_]

    def score_samples(self, X: Sequence[Any]) -> np.ndarray:
        """Ranking score of each document of ``X`` under the fitted length adjustment (higher = kept first)."""
        check_is_fitted(self, "threshold_")
        h, n = self.entropy_rates(_check_documents(X))
        return self._ranking(h, n)

    def transform(self, X: Sequence[Any]) -> list[Any]:
        """Documents of a new pool whose ranking score reaches the fitted ``threshold_``."""
        check_is_fitted(self, "threshold_")
        docs = _check_documents(X)
        keep = self.score_samples(docs) >= self.threshold_  # NaN (short documents) compares False
        return [d for d, k in zip(docs, keep) if k]
