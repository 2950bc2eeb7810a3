"""Read and add to the residual stream of a decoder LM at any layer (forward hooks, removed on exit).

Layer ``l`` (``0 <= l < n_layers(model)``) names the residual stream at the **output of decoder block l** (what
block ``l + 1`` reads; CAA and repeng use the same convention). Works with a Hugging Face Llama-style causal LM
(``model.model.layers``, e.g. SmolLM2) and with the tiny stack's :class:`~neurips26.lm.GPT` (``model.blocks``).

Positions: a hook sees the absolute position of each token it processes, from the ``position_ids`` the block
receives (Hugging Face models: KV-cached decoding and left padding with explicit ``position_ids`` included) or
``0..T-1`` (the tiny GPT, which re-reads the whole sequence). ``start`` restricts steering to positions
``>= start`` (one int, or one per batch row)::

    with record_residual(model, [10, 15]) as rec:
        model(ids)
    h = rec.hidden(10)                                  # (B, T, d): layer 10's residual for that call
    with add_to_residual(model, 15, vector, start=prompt_len - 1):
        ...                                             # every forward adds vector at positions >= start

Nesting is allowed; additions at the same layer add up, in entry order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = ["ResidualRecord", "add_to_residual", "decoder_layers", "n_layers", "record_residual"]


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder blocks of ``model`` in order (Hugging Face ``model.model.layers`` or the GPT's ``blocks``)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None) if inner is not None else None
    if layers is None:
        layers = getattr(model, "blocks", None)
    if layers is None:
        layers = getattr(model, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(
            f"cannot find the decoder blocks of {type(model).__name__} (expected model.model.layers or model.blocks)"
        )
    return layers


def n_layers(model: nn.Module) -> int:
    return len(decoder_layers(model))


def _layer(model: nn.Module, layer: Any) -> nn.Module:
    layers = decoder_layers(model)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(layers):
        raise ValueError(f"layer must be an integer in [0, {len(layers) - 1}], got {layer!r}")
    return layers[layer]


def _hidden(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _positions(kwargs: dict[str, Any], hidden: torch.Tensor) -> torch.Tensor:
    pos = kwargs.get("position_ids")
    B, T = hidden.shape[:2]
    if pos is None:
        cache_pos = kwargs.get("cache_position")
        pos = cache_pos[None, :] if cache_pos is not None else torch.arange(T, device=hidden.device)[None, :]
    return pos.expand(B, T)


@dataclass
class ResidualRecord:
    """What :func:`record_residual` captured: per layer, one ``(hidden, positions)`` pair per forward call."""

    calls: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)

    def hidden(self, layer: int, call: int = -1) -> torch.Tensor:
        """Layer ``layer``'s residual (B, T, d) from one forward call (default: the last)."""
        if layer not in self.calls or not self.calls[layer]:
            raise KeyError(f"layer {layer} recorded nothing (recorded: {sorted(self.calls)})")
        return self.calls[layer][call][0]

    def concat(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """All calls at ``layer`` joined along the sequence: hidden (B, sum T, d) and positions (B, sum T)."""
        if layer not in self.calls or not self.calls[layer]:
            raise KeyError(f"layer {layer} recorded nothing (recorded: {sorted(self.calls)})")
        hs, ps = zip(*self.calls[layer])
        return torch.cat(hs, dim=1), torch.cat(ps, dim=1)

    def clear(self) -> None:
        for v in self.calls.values():
            v.clear()


@contextmanager
def record_residual(model: nn.Module, layers: int | Sequence[int]) -> Iterator[ResidualRecord]:
    """Capture the residual stream (detached float copies) at ``layers`` during every forward inside the block."""
    layers = [layers] if isinstance(layers, int) and not isinstance(layers, bool) else list(layers)
    if not layers:
        raise ValueError("layers must name at least one layer")
    modules = [_layer(model, layer) for layer in layers]
    record = ResidualRecord({layer: [] for layer in layers})
    handles = []
    for layer, module in zip(layers, modules):

        def hook(mod: nn.Module, args: Any, kwargs: dict[str, Any], output: Any, _l: int = layer) -> None:
            h = _hidden(output)
            record.calls[_l].append((h.detach().float().clone(), _positions(kwargs, h).detach().clone()))

        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        yield record
    finally:
        for h in handles:
            h.remove()


@contextmanager
def add_to_residual(
    model: nn.Module, layer: int, vector: torch.Tensor, start: int | torch.Tensor | None = None
) -> Iterator[None]:
    """Add ``vector`` to the residual stream at the output of block ``layer`` while the block is open.

    ``vector``: (d,) for every row, or (B, d), one per batch row (several steering settings in one batch).
    ``start``: None adds at every position; an int (or a (B,) tensor, one per row) adds only at absolute
    positions ``>= start``. Gradients flow through the addition (a trainable vector can be optimised).
    """
    module = _layer(model, layer)
    if not isinstance(vector, torch.Tensor):
        raise TypeError(f"vector must be a torch.Tensor, got {type(vector).__name__}")
    if vector.ndim not in (1, 2):
        raise ValueError(f"vector must have shape (d_model,) or (B, d_model), got {tuple(vector.shape)}")
    if not torch.isfinite(vector).all():
        raise ValueError("vector must be finite")
    if start is not None and not isinstance(start, torch.Tensor):
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start must be None, a non-negative int or a (B,) tensor, got {start!r}")

    def hook(mod: nn.Module, args: Any, kwargs: dict[str, Any], output: Any) -> Any:
        h = _hidden(output)
        if vector.shape[-1] != h.shape[-1]:
            raise ValueError(f"vector has {vector.shape[-1]} entries, the residual stream has {h.shape[-1]}")
        if vector.ndim == 2 and vector.shape[0] != h.shape[0]:
            raise ValueError(f"vector has {vector.shape[0]} rows, the batch has {h.shape[0]}")
        v = vector.to(h.dtype) if vector.ndim == 1 else vector.to(h.dtype)[:, None, :]
        if start is None:
            new = h + v
        else:
            pos = _positions(kwargs, h)
            s = torch.as_tensor(start, device=h.device).reshape(-1, 1)
            on = (pos >= s).to(h.dtype)[..., None]
            new = h + on * v
        return (new, *output[1:]) if isinstance(output, tuple) else new

    handle = module.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
