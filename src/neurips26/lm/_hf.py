"""Hugging Face causal-LM plumbing shared by the GRPO sampler and the SmolLM2 decoder (KV cache across 5.x).

transformers 5.x renamed the forward argument ``past_key_values`` to ``cache`` (the old name is deprecated); these
helpers pass and read the cache under whichever name the installed version uses.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any

from torch import nn


def is_hf_causal_lm(model: nn.Module) -> bool:
    return hasattr(model, "prepare_inputs_for_generation")


@lru_cache(maxsize=8)
def _cache_name(cls: type) -> str:
    params = inspect.signature(cls.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def new_cache(model: nn.Module) -> Any:
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def cache_kwargs(model: nn.Module, cache: Any) -> dict[str, Any]:
    """``{name: cache, "use_cache": True}`` for ``model.forward``."""
    return {_cache_name(type(model)): cache, "use_cache": True}
