"""The training loop of the small-LM stack: AdamW, warm-up + cosine schedule, gradient clipping, evaluation.

:func:`train` runs ``config.steps`` optimizer steps on batches drawn from a batch source (a
:class:`~neurips26.lm.corpora.TokenStream` or :class:`~neurips26.lm.corpora.SequenceDataset`, or anything with
``sample(batch_size, context, generator)``). The loss is ``model.training_loss(x, y) -> (loss, logs)`` when the
model defines it (a :class:`~neurips26.lm.GPT` does: next-token cross-entropy; NextLat adds its latent losses),
else next-token cross-entropy of ``model(x)``. It reports loss, bits per character and training tokens per second,
and is deterministic on one thread: batches come from a generator seeded with ``config.seed`` and nothing seeds
torch's global generator (seed it yourself before building the model).

Callbacks are objects with any of ``start(model)`` (called once before step 0), ``on_backward(step, model)`` (after
the backward pass), ``on_step_end(step, model)`` (after the optimizer step) and ``finish(model)`` (once after the
last step, also when training stops early or raises); CoFrGeNet's dyadic depth schedule is one.

:func:`save_checkpoint` / :func:`load_checkpoint` round-trip a :class:`~neurips26.lm.GPT` (config, weights,
optionally optimizer state and the tokenizer); the file loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import math
import pickle
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from .tokenizers import Tokenizer, tokenizer_from_dict
from .transformer import GPT, FFNFactory, GPTConfig, next_token_loss

__all__ = [
    "BatchSource",
    "TrainConfig",
    "TrainResult",
    "adamw_param_groups",
    "cosine_schedule",
    "evaluate",
    "load_checkpoint",
    "save_checkpoint",
    "train",
]

LN2 = math.log(2.0)
CHECKPOINT_FORMAT = "neurips26.lm.checkpoint/1"


class BatchSource(Protocol):
    chars_per_token: float

    def sample(
        self, batch_size: int, context: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def windows(
        self, context: int, batch_size: int = 32, max_tokens: int | None = None
    ) -> Iterable[tuple[torch.Tensor, torch.Tensor]]: ...


@dataclass
class TrainConfig:
    """Settings of :func:`train`.

    steps : optimizer steps. batch_size, context : batch shape (context None: the model's, or the dataset's).
    lr : peak learning rate; warmup_steps (None: 5% of the steps) of linear warm-up, then cosine decay to
        ``lr * min_lr_ratio``. weight_decay : AdamW decoupled decay on matrices (not on biases, norms, vectors).
    betas, eps : AdamW moments. grad_clip : global gradient-norm clip (None: off).
    eval_every : evaluate on ``val`` every this many steps (0: only at the end); eval_tokens caps the targets an
        evaluation reads (None: the whole validation stream).
    seed : seed of the batch-sampling generator (independent of torch's global generator).
    log_every : record the training loss in the history every this many steps.
    """

    steps: int = 1000
    batch_size: int = 32
    context: int | None = None
    lr: float = 3e-3
    warmup_steps: int | None = None
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    eval_every: int = 0
    eval_tokens: int | None = 65536
    eval_batch_size: int = 32
    seed: int = 0
    log_every: int = 10

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_batch_size", "log_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("context", "eval_tokens", "warmup_steps"):
            v = getattr(self, name)
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "warmup_steps" else 1)
            ):
                raise ValueError(f"{name} must be a positive integer or None, got {v!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be positive, got {self.lr!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be positive or None, got {self.grad_clip!r}")
        if isinstance(self.eval_every, bool) or not isinstance(self.eval_every, int) or self.eval_every < 0:
            raise ValueError(f"eval_every must be a non-negative integer, got {self.eval_every!r}")
        if not all(0.0 <= b < 1.0 for b in self.betas) or len(self.betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")

    @property
    def warmup(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else max(1, self.steps // 20)


@dataclass
class TrainResult:
    """What :func:`train` measured. ``history``: dicts with step, lr, loss (and val_loss at evaluations)."""

    steps: int
    train_loss: float  # mean training loss over the last 10% of steps
    val_loss: float | None
    val_bits_per_char: float | None
    tokens_per_second: float  # training tokens (inputs) per second of optimizer steps, evaluation excluded
    seconds: float
    tokens: int
    history: list[dict[str, float]] = field(default_factory=list)
    finite: bool = True  # False when the loss became NaN/inf (training stops there)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("history")
        return d


def cosine_schedule(step: int, total: int, warmup: int, min_ratio: float = 0.1) -> float:
    """Multiplier of the peak learning rate at ``step`` (0-based): linear warm-up, then cosine to ``min_ratio``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def adamw_param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices and embeddings (ndim >= 2), not biases, norm gains or other vectors (nanoGPT's split)."""
    decay, no_decay, seen = [], [], set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (decay if p.ndim >= 2 and not getattr(p, "_no_weight_decay", False) else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    fn = getattr(model, "training_loss", None)
    if fn is not None:
        return fn(x, y)
    loss = next_token_loss(model(x), y)
    return loss, {"ntp": float(loss.detach())}


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: BatchSource,
    context: int | None = None,
    batch_size: int = 32,
    max_tokens: int | None = None,
) -> dict[str, float]:
    """Mean next-token loss (nats per token) over contiguous windows of ``data``, and bits per character.

    Deterministic: it reads the first ``max_tokens`` targets of ``data`` in order.
    """
    context = context if context is not None else _default_context(model, data)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for x, y in data.windows(context, batch_size=batch_size, max_tokens=max_tokens):
        logits = model(x)
        n = int((y != -100).sum())
        if n == 0:
            continue
        total += float(next_token_loss(logits, y)) * n
        count += n
    model.train(was_training)
    loss = total / max(count, 1)
    return {"loss": loss, "bits_per_char": loss / (LN2 * data.chars_per_token), "tokens": count}


def _default_context(model: nn.Module, data: Any) -> int:
    length = getattr(data, "length", None)
    if length is not None:
        return int(length)
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "context"):
        raise ValueError("context must be given for a model without a config.context")
    return int(config.context)


def _progress_bar(enabled: bool | None, total: int, description: str) -> tuple[Any, Any]:
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None, None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        transient=True,
    )
    task = bar.add_task(description, total=total, info="")
    bar.start()
    return bar, task


def train(
    model: nn.Module,
    data: BatchSource,
    config: TrainConfig | None = None,
    *,
    val: BatchSource | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], tuple[torch.Tensor, Mapping[str, float]]]
    | None = None,
    callbacks: Sequence[Any] = (),
    progress: bool | None = None,
    description: str = "train",
) -> TrainResult:
    """Train ``model`` in place for ``config.steps`` steps (see the module docstring); returns a
    :class:`TrainResult`.

    ``optimizer`` defaults to AdamW over :func:`adamw_param_groups`; a given one is stepped as it is, with the
    cosine schedule applied to each group's ``initial_lr``. ``loss_fn(model, x, y) -> (loss, logs)`` overrides
    ``model.training_loss``. ``progress``: a rich progress bar (None: only when stderr is a terminal).
    """
    config = config or TrainConfig()
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not hasattr(data, "sample"):
        raise TypeError("data must be a batch source with sample(batch_size, context, generator)")
    context = config.context if config.context is not None else _default_context(model, data)
    if optimizer is None:
        optimizer = torch.optim.AdamW(
            adamw_param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas, eps=config.eps
        )
        for g in optimizer.param_groups:
            g["initial_lr"] = config.lr
    else:
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
    loss_of = loss_fn or _loss
    generator = torch.Generator().manual_seed(int(config.seed))
    params = [p for g in optimizer.param_groups for p in g["params"]]
    history: list[dict[str, float]] = []
    recent: list[float] = []
    tail = max(1, config.steps // 10)
    train_seconds, tokens, finite = 0.0, 0, True
    bar, task = _progress_bar(progress, config.steps, description)
    model.train()
    val_loss = val_bpc = None
    step = 0
    for cb in callbacks:
        if hasattr(cb, "start"):
            cb.start(model)
    try:
        for step in range(config.steps):
            t0 = time.perf_counter()
            x, y = data.sample(config.batch_size, context, generator)
            scale = cosine_schedule(step, config.steps, config.warmup, config.min_lr_ratio)
            for g in optimizer.param_groups:
                g["lr"] = g["initial_lr"] * scale
            optimizer.zero_grad(set_to_none=True)
            loss, logs = loss_of(model, x, y)
            value = float(loss.detach())
            if not math.isfinite(value):
                finite = False
                history.append({"step": step, "loss": value})
                break
            loss.backward()
            for cb in callbacks:
                if hasattr(cb, "on_backward"):
                    cb.on_backward(step, model)
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            optimizer.step()
            for cb in callbacks:
                if hasattr(cb, "on_step_end"):
                    cb.on_step_end(step, model)
            train_seconds += time.perf_counter() - t0
            tokens += x.numel()
            recent = (recent + [value])[-tail:]
            if step % config.log_every == 0 or step == config.steps - 1:
                history.append(
                    {"step": step, "lr": optimizer.param_groups[0]["lr"], "loss": value, **dict(logs)}
                )
            if (
                val is not None
                and config.eval_every
                and (step + 1) % config.eval_every == 0
                and step + 1 < config.steps
            ):
                ev = evaluate(model, val, context, config.eval_batch_size, config.eval_tokens)
                history.append({"step": step, "val_loss": ev["loss"]})
            if bar is not None:
                bar.update(task, advance=1, info=f"loss {value:.3f}")
    finally:
        if bar is not None:
            bar.stop()
        for cb in callbacks:
            if hasattr(cb, "finish"):
                cb.finish(model)
    if val is not None and finite:
        ev = evaluate(model, val, context, config.eval_batch_size, config.eval_tokens)
        val_loss, val_bpc = ev["loss"], ev["bits_per_char"]
        history.append({"step": step, "val_loss": val_loss})
    return TrainResult(
        steps=step + 1 if finite else step,
        train_loss=float(sum(recent) / len(recent)) if recent else math.nan,
        val_loss=val_loss,
        val_bits_per_char=val_bpc,
        tokens_per_second=tokens / train_seconds if train_seconds > 0 else math.nan,
        seconds=train_seconds,
        tokens=tokens,
        history=history,
        finite=finite,
    )


# --- checkpoints --------------------------------------------------------------------------------------------
def save_checkpoint(
    path: str | Path,
    model: GPT,
    optimizer: torch.optim.Optimizer | None = None,
    tokenizer: Tokenizer | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write config, weights (and optimizer state, tokenizer, ``extra`` plain values) to ``path``."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    payload: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "config": model.config.to_dict(),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "tokenizer": tokenizer.to_dict() if tokenizer is not None else None,
        "extra": dict(extra or {}),
    }
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)  # never a half-written checkpoint under the final name
    return path


def load_checkpoint(path: str | Path, ffn: FFNFactory | None = None) -> tuple[GPT, dict[str, Any]]:
    """(model, info) from :func:`save_checkpoint`'s file.

    ``info`` holds ``tokenizer`` (rebuilt, or None), ``extra`` and ``optimizer_state`` (pass it to the
    ``load_state_dict`` of an optimizer built over the returned model's parameters). ``ffn`` is needed when the
    model was built with an unregistered factory.
    """
    try:
        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path} is not a {CHECKPOINT_FORMAT} checkpoint ({err})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a {CHECKPOINT_FORMAT} checkpoint")
    model = GPT(GPTConfig.from_dict(payload["config"]), ffn=ffn)
    model.load_state_dict(payload["model"])
    tok = tokenizer_from_dict(payload["tokenizer"]) if payload["tokenizer"] else None
    return model, {"tokenizer": tok, "extra": payload["extra"], "optimizer_state": payload["optimizer"]}
