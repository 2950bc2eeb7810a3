"""PEARL: prefix-expanded adversarial GRPO for durable behaviour suppression (reconstructed; see :mod:`.pearl`)."""

from .organisms import ModArithWorld, Sample, evaluate_rates, greedy_responses, sft_steps
from .pearl import PEARLConfig, PEARLTrainer

__all__ = [
    "ModArithWorld",
    "PEARLConfig",
    "PEARLTrainer",
    "Sample",
    "evaluate_rates",
    "greedy_responses",
    "sft_steps",
]
