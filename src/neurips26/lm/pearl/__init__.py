"""PEARL: prefix-expanded adversarial GRPO for durable behaviour suppression (reconstructed; see :mod:`.pearl`)."""

from .organisms import DESIGN_HACK_RATE, ModArithWorld, Sample, evaluate_rates, greedy_responses, sft_steps
from .pearl import PEARLConfig, PEARLTrainer

__all__ = [
    "PEARLConfig",
    "PEARLTrainer",
    "ModArithWorld",
    "DESIGN_HACK_RATE",
    "Sample",
    "evaluate_rates",
    "greedy_responses",
    "sft_steps",
]
