"""Shared torch building blocks for the vision and medical-imaging papers (LookWhen, SMFSR, MedVTok).

One copy of each piece that more than one paper needs, in plain torch:

- input checks: :func:`as_image_tensor` (shape, dtype, finiteness, emptiness; the error names the parameter);
- positions and times: :func:`sinusoidal_embedding` (the transformer sinusoid, used for diffusion/flow times)
  and :func:`grid_position_embedding` (fixed sin-cos positions for a 1-D, 2-D or space-time token grid);
- tokens: :func:`patchify` (non-overlapping ``p x p`` patches of images or videos, token
  order ``(t, row, col)``) and :class:`PatchEmbed` (a linear map of flattened patches, which equals a strided
  convolution and can embed a gathered subset of patches);
- transformers (pre-norm, scaled-dot-product attention): :class:`Attention`, :class:`TransformerBlock`,
  :class:`TransformerEncoder` and :class:`DividedSpaceTimeBlock` (time attention, then space attention, then MLP: TimeSformer's factorisation);
- analytic cost: :func:`linear_flops`, :func:`transformer_flops`, :func:`divided_space_time_flops` count the
  multiply-adds of the matrix products (x2, as FLOPs), what ``torch.utils.flop_counter`` reports for the same
  products written out (it does not count CPU ``scaled_dot_product_attention``, so compare with
  ``Attention(..., need_weights=True)``);
- convolutional stacks for 2-D or 3-D data: :class:`ResBlock` (optional FiLM conditioning on an embedding),
  :class:`ConvEncoder`, :class:`ConvDecoder`, :class:`CNNClassifier` (with penultimate :meth:`features`), and
  :func:`train_classifier` (AdamW + cross-entropy, seeded) to fit one;
- image quality: :func:`psnr` and :func:`ssim` (the latter equals scikit-image's ``structural_similarity``
  defaults: 7 x 7 uniform window, K1 = 0.01, K2 = 0.03, sample covariance).

Nothing here seeds a global generator unless a function takes ``seed`` (then it uses its own generator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "Attention",
    "CNNClassifier",
    "ConvDecoder",
    "ConvEncoder",
    "DividedSpaceTimeBlock",
    "PatchEmbed",
    "ResBlock",
    "TransformerBlock",
    "TransformerEncoder",
    "as_image_tensor",
    "check_positive_int",
    "divided_space_time_flops",
    "fit_minibatches",
    "grid_position_embedding",
    "linear_flops",
    "patchify",
    "psnr",
    "sinusoidal_embedding",
    "ssim",
    "train_classifier",
    "transformer_flops",
]


# --- input checks --------------------------------------------------------------------------------------------
def check_positive_int(value: Any, name: str, low: int = 1) -> int:
    """``value`` as an int >= ``low``; ``ValueError`` naming ``name`` otherwise (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def as_image_tensor(
    x: Any,
    name: str = "x",
    ndim: int | Sequence[int] = 4,
    channels: int | None = None,
    channel_axis: int = 1,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Validate an image batch (numpy or torch) and return it as a float tensor.

    ``ndim`` is the accepted number of dimensions (or several), ``channels`` the required size of
    ``channel_axis``. Raises ``TypeError`` for non-numeric input and ``ValueError`` naming ``name`` for a wrong
    number of dimensions, a wrong channel count, an empty batch or NaN/inf values.
    """
    if isinstance(x, np.ndarray):
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            raise TypeError(f"{name} must be a numeric array, got dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x))
    elif not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")
    if x.is_complex():
        raise TypeError(f"{name} must be real-valued, got {x.dtype}")
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if x.ndim not in allowed:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(x.shape)}"
        )
    if x.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)}); it needs at least one element per axis")
    if channels is not None and x.shape[channel_axis] != channels:
        raise ValueError(
            f"{name} must have {channels} channel(s) on axis {channel_axis}, got shape {tuple(x.shape)}"
        )
    x = x.to(dtype)
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return x


# --- positions and times ---------------------------------------------------------------------------------------
def sinusoidal_embedding(x: Tensor, dim: int, max_period: float = 10_000.0) -> Tensor:
    """The transformer sinusoid: ``[cos(x w_k), sin(x w_k)]`` with ``w_k = max_period^(-k / (dim/2))``.

    ``x`` has any shape; the result has shape ``x.shape + (dim,)``. ``dim`` must be even.
    """
    dim = check_positive_int(dim, "dim", 2)
    if dim % 2:
        raise ValueError(f"dim must be even, got {dim}")
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angles = x.to(torch.float32)[..., None] * freqs
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def grid_position_embedding(grid: Sequence[int], dim: int) -> Tensor:
    """Fixed sin-cos positions for a token grid, shape ``(prod(grid), dim)``, rows in C (row-major) order.

    Each axis gets an even share of the ``dim`` channels (``2 floor(dim / (2 len(grid)))``, the first axis
    also takes what is left) holding :func:`sinusoidal_embedding` of its integer coordinate (max period 100,
    fine enough for grids up to a few hundred cells), concatenated. ``dim`` must be even and at least
    ``2 * len(grid)``.
    """
    grid = tuple(check_positive_int(g, "grid") for g in grid)
    if not grid:
        raise ValueError("grid must name at least one axis")
    if dim % 2 or dim < 2 * len(grid):
        raise ValueError(f"dim must be even and >= 2 * len(grid) = {2 * len(grid)}, got {dim}")
    share = 2 * (dim // (2 * len(grid)))
    widths = [dim - share * (len(grid) - 1)] + [share] * (len(grid) - 1)
    coords = torch.meshgrid(*[torch.arange(g, dtype=torch.float32) for g in grid], indexing="ij")
    parts = [sinusoidal_embedding(c.reshape(-1), w, max_period=100.0) for c, w in zip(coords, widths)]
    return torch.cat(parts, dim=-1)


# --- patches -----------------------------------------------------------------------------------------------------
def patchify(x: Tensor, patch: int) -> Tensor:
    """Non-overlapping ``patch x patch`` patches as token vectors.

    Images ``(B, C, H, W)`` give ``(B, (H/p)(W/p), p*p*C)``; videos ``(B, T, C, H, W)`` give
    ``(B, T (H/p)(W/p), p*p*C)`` with tokens ordered by ``(frame, row, column)``. Each vector lists the patch's
    pixels row-major with the channels innermost. ``H`` and ``W`` must be multiples of ``patch``.
    """
    patch = check_positive_int(patch, "patch")
    if x.ndim not in (4, 5):
        raise ValueError(f"x must be (B, C, H, W) or (B, T, C, H, W), got shape {tuple(x.shape)}")
    H, W = x.shape[-2:]
    if H % patch or W % patch:
        raise ValueError(f"image height and width ({H}, {W}) must be multiples of patch={patch}")
    lead, C = x.shape[:-3], x.shape[-3]
    h, w = H // patch, W // patch
    t = x.reshape(-1, C, h, patch, w, patch).permute(0, 2, 4, 3, 5, 1)  # (B*, h, w, p, p, C)
    t = t.reshape(*lead, h * w, patch * patch * C)
    if x.ndim == 5:
        t = t.reshape(lead[0], lead[1] * h * w, patch * patch * C)
    return t


class PatchEmbed(nn.Module):
    """Linear embedding of flattened ``patch x patch x C`` patches (equal to a stride-``patch`` convolution).

    ``forward`` takes images or videos (see :func:`patchify`); :meth:`embed_patches` takes already gathered patch
    vectors, so a model can embed only the tokens it keeps.
    """

    def __init__(self, in_channels: int, dim: int, patch: int) -> None:
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.patch = check_positive_int(patch, "patch")
        self.dim = check_positive_int(dim, "dim")
        self.proj = nn.Linear(self.patch * self.patch * self.in_channels, self.dim)

    def embed_patches(self, patches: Tensor) -> Tensor:
        return self.proj(patches)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-3] != self.in_channels:
            raise ValueError(f"x must have {self.in_channels} channels, got shape {tuple(x.shape)}")
        return self.proj(patchify(x, self.patch))

    def flops(self, n_tokens: int) -> int:
        return linear_flops(n_tokens, self.proj.in_features, self.proj.out_features)


# --- transformers ---------------------------------------------------------------------------------------------
class Attention(nn.Module):
    """Multi-head self-attention (pre-norm is the caller's); ``need_weights`` also returns the head-mean map."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        dim, heads = check_positive_int(dim, "dim"), check_positive_int(heads, "heads")
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        B, N, D = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        if need_weights:
            w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // self.heads), dim=-1)
            out = self.proj((w @ v).transpose(1, 2).reshape(B, N, D))
            return out, w.mean(1)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(B, N, D))


class MLP(nn.Sequential):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


class TransformerBlock(nn.Module):
    """Pre-norm block ``x + attn(norm(x))`` then ``x + mlp(norm(x))`` (ViT)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(round(mlp_ratio * dim)))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TransformerEncoder(nn.Module):
    """``depth`` :class:`TransformerBlock` s and a final LayerNorm over ``(B, N, dim)`` tokens."""

    def __init__(self, dim: int, depth: int, heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.dim, self.depth = check_positive_int(dim, "dim"), check_positive_int(depth, "depth")
        self.mlp_ratio = float(mlp_ratio)
        self.blocks = nn.ModuleList(TransformerBlock(dim, heads, mlp_ratio) for _ in range(self.depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def flops(self, n_tokens: int) -> int:
        return transformer_flops(n_tokens, self.dim, self.depth, self.mlp_ratio)


class DividedSpaceTimeBlock(nn.Module):
    """TimeSformer's divided attention on ``(B, T, S, dim)``: time attention per location, space attention per
    frame, then the MLP, each pre-norm with a residual."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.norm_t, self.attn_t = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm_s, self.attn_s = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2, self.mlp = nn.LayerNorm(dim), MLP(dim, int(round(mlp_ratio * dim)))

    def forward(self, x: Tensor) -> Tensor:
        B, T, S, D = x.shape
        xt = x.transpose(1, 2).reshape(B * S, T, D)
        x = x + self.attn_t(self.norm_t(xt)).view(B, S, T, D).transpose(1, 2)
        xs = x.reshape(B * T, S, D)
        x = x + self.attn_s(self.norm_s(xs)).view(B, T, S, D)
        return x + self.mlp(self.norm2(x))


# --- analytic cost ----------------------------------------------------------------------------------------------
def linear_flops(n: int, d_in: int, d_out: int) -> int:
    """FLOPs of ``n`` rows through a ``d_in -> d_out`` linear layer: ``2 n d_in d_out`` (bias not counted)."""
    return 2 * int(n) * int(d_in) * int(d_out)


def transformer_flops(n_tokens: int, dim: int, depth: int = 1, mlp_ratio: float = 4.0) -> int:
    """FLOPs of ``depth`` :class:`TransformerBlock` s on ``n_tokens`` tokens (matrix products only).

    Per block: QKV ``2 n 3d^2``, scores ``2 n^2 d``, weighted values ``2 n^2 d``, output ``2 n d^2``, MLP
    ``2 * 2 n d (r d)``. Norms, softmax and activations are O(n d) and left out (as ``torch.utils.flop_counter``
    does), so this is the count a FLOP counter reports for the block with the attention written out.
    """
    n, d, hidden = int(n_tokens), int(dim), int(round(mlp_ratio * dim))
    per_block = (
        linear_flops(n, d, 3 * d) + 4 * n * n * d + linear_flops(n, d, d) + 2 * linear_flops(n, d, hidden)
    )
    return int(depth) * per_block


def divided_space_time_flops(
    frames: int, tokens_per_frame: int, dim: int, depth: int = 1, mlp_ratio: float = 4.0
) -> int:
    """FLOPs of ``depth`` :class:`DividedSpaceTimeBlock` s on a ``frames x tokens_per_frame`` grid."""
    T, S, d = int(frames), int(tokens_per_frame), int(dim)
    n, hidden = T * S, int(round(mlp_ratio * dim))
    attn_linear = 2 * (linear_flops(n, d, 3 * d) + linear_flops(n, d, d))
    scores = (
        4 * S * T * T * d + 4 * T * S * S * d
    )  # time attention within each location, space within each frame
    return int(depth) * (attn_linear + scores + 2 * linear_flops(n, d, hidden))


# --- convolutional stacks ----------------------------------------------------------------------------------------
def _conv(dims: int) -> type[nn.Module]:
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, got {dims!r}")
    return nn.Conv2d if dims == 2 else nn.Conv3d


def _groups(channels: int) -> int:
    for g in (8, 4, 2):
        if channels % g == 0:
            return g
    return 1


class ResBlock(nn.Module):
    """``x + conv(act(norm(conv(act(norm(x)))) * (1 + scale) + shift))``: a residual conv block (2-D or 3-D).

    With ``emb_dim`` the block takes an embedding ``(B, emb_dim)`` (a time or interval embedding) and applies it
    as FiLM (a per-channel scale and shift) after the first convolution; the FiLM layer starts at zero so the
    block starts unconditioned.
    """

    def __init__(self, channels: int, dims: int = 2, emb_dim: int | None = None) -> None:
        super().__init__()
        conv = _conv(dims)
        channels = check_positive_int(channels, "channels")
        self.norm1 = nn.GroupNorm(_groups(channels), channels)
        self.conv1 = conv(channels, channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(_groups(channels), channels)
        self.conv2 = conv(channels, channels, 3, padding=1)
        self.film = None
        if emb_dim is not None:
            self.film = nn.Linear(check_positive_int(emb_dim, "emb_dim"), 2 * channels)
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)

    def forward(self, x: Tensor, emb: Tensor | None = None) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        if self.film is not None:
            if emb is None:
                raise ValueError("this ResBlock was built with emb_dim and needs an embedding")
            scale, shift = self.film(emb).chunk(2, dim=-1)
            shape = (x.shape[0], -1) + (1,) * (x.ndim - 2)
            h = h * (1 + scale.view(shape)) + shift.view(shape)
        return x + self.conv2(F.silu(self.norm2(h)))


class ConvEncoder(nn.Module):
    """Stem conv, then per stage ``blocks`` :class:`ResBlock` s, with a stride-2 conv between stages.

    Output channels ``widths[-1]``; spatial size divided by ``2 ** (len(widths) - 1)``. ``dims = 3`` for volumes.
    """

    def __init__(
        self,
        in_channels: int,
        widths: Sequence[int] = (32, 64),
        dims: int = 2,
        blocks: int = 1,
        emb_dim: int | None = None,
    ) -> None:
        super().__init__()
        conv = _conv(dims)
        widths = [check_positive_int(w, "widths") for w in widths]
        if not widths:
            raise ValueError("widths must name at least one stage")
        self.downsample = 2 ** (len(widths) - 1)
        self.stem = conv(check_positive_int(in_channels, "in_channels"), widths[0], 3, padding=1)
        self.stages = nn.ModuleList()
        self.downs = nn.ModuleList()
        for i, w in enumerate(widths):
            self.stages.append(nn.ModuleList(ResBlock(w, dims, emb_dim) for _ in range(blocks)))
            if i + 1 < len(widths):
                self.downs.append(conv(w, widths[i + 1], 3, stride=2, padding=1))
        self.out_channels = widths[-1]

    def forward(self, x: Tensor, emb: Tensor | None = None) -> Tensor:
        h = self.stem(x)
        for i, stage in enumerate(self.stages):
            for block in stage:
                h = block(h, emb)
            if i < len(self.downs):
                h = self.downs[i](h)
        return h


class ConvDecoder(nn.Module):
    """Mirror of :class:`ConvEncoder`: per stage ResBlocks, nearest x2 upsampling + conv between stages, then a
    GroupNorm-SiLU-conv head to ``out_channels``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        widths: Sequence[int] = (64, 32),
        dims: int = 2,
        blocks: int = 1,
    ) -> None:
        super().__init__()
        conv = _conv(dims)
        widths = [check_positive_int(w, "widths") for w in widths]
        if not widths:
            raise ValueError("widths must name at least one stage")
        self.dims = dims
        self.upsample = 2 ** (len(widths) - 1)
        self.stem = conv(check_positive_int(in_channels, "in_channels"), widths[0], 3, padding=1)
        self.stages = nn.ModuleList()
        self.ups = nn.ModuleList()
        for i, w in enumerate(widths):
            self.stages.append(nn.ModuleList(ResBlock(w, dims) for _ in range(blocks)))
            if i + 1 < len(widths):
                self.ups.append(conv(w, widths[i + 1], 3, padding=1))
        self.head = nn.Sequential(
            nn.GroupNorm(_groups(widths[-1]), widths[-1]),
            nn.SiLU(),
            conv(widths[-1], check_positive_int(out_channels, "out_channels"), 3, padding=1),
        )

    def forward(self, z: Tensor) -> Tensor:
        h = self.stem(z)
        for i, stage in enumerate(self.stages):
            for block in stage:
                h = block(h)
            if i < len(self.ups):
                h = self.ups[i](F.interpolate(h, scale_factor=2, mode="nearest"))
        return self.head(h)


class CNNClassifier(nn.Module):
    """:class:`ConvEncoder` -> global average pool -> ``feature_dim`` ReLU features -> linear logits.

    :meth:`features` gives the penultimate features (an in-experiment perceptual space for FID-style scores or a
    frozen "expert" representation). ``dims = 3`` classifies volumes ``(B, C, D, H, W)``.
    """

    def __init__(
        self,
        in_channels: int,
        n_classes: int,
        widths: Sequence[int] = (16, 32),
        dims: int = 2,
        feature_dim: int = 64,
    ) -> None:
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.n_classes = check_positive_int(n_classes, "n_classes", 2)
        self.dims = dims
        self.encoder = ConvEncoder(in_channels, widths, dims)
        self.fc = nn.Linear(self.encoder.out_channels, check_positive_int(feature_dim, "feature_dim"))
        self.head = nn.Linear(feature_dim, self.n_classes)

    def _check(self, x: Tensor) -> None:
        if x.ndim != self.dims + 2 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"x must be (B, {self.in_channels}, {'D, ' if self.dims == 3 else ''}H, W), got {tuple(x.shape)}"
            )

    def features(self, x: Tensor) -> Tensor:
        self._check(x)
        h = self.encoder(x).flatten(2).mean(-1)
        return F.relu(self.fc(h))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))


def fit_minibatches(
    params: Any,
    n: int,
    step: Any,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int = 0,
    weight_decay: float = 1e-4,
    one_cycle: bool = True,
    pct_start: float = 0.1,
) -> None:
    """The shared training loop: AdamW over ``params`` for ``epochs`` passes over ``n`` samples in a fresh random
    order each pass, with a one-cycle step size (``one_cycle=False``: constant ``lr``).

    ``step(idx, gen)`` returns the loss of the mini-batch ``idx`` (an index tensor); ``gen`` is the loop's seeded
    generator, the one that draws the order, for any further sampling the step needs.
    """
    epochs = check_positive_int(epochs, "epochs")
    batch_size = check_positive_int(batch_size, "batch_size")
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    sched = None
    if one_cycle:
        total = epochs * math.ceil(n / batch_size)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total, pct_start=pct_start)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, batch_size):
            loss = step(perm[i : i + batch_size], gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()


def train_classifier(
    model: nn.Module,
    X: Any,
    y: Any,
    *,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 2e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
) -> nn.Module:
    """Fit ``model`` (inputs -> logits) with AdamW and cross-entropy; returns it in eval mode.

    ``X`` is a float batch (first axis = samples), ``y`` integer labels in ``[0, n_classes)``. Batches are drawn
    by a generator seeded with ``seed``, so a fit is reproducible given the model's initial weights.
    """
    X = as_image_tensor(X, "X", ndim=(2, 3, 4, 5))
    y = torch.as_tensor(np.asarray(y))
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must be 1-D with one label per sample ({X.shape[0]}), got shape {tuple(y.shape)}"
        )
    if y.dtype.is_floating_point or y.dtype == torch.bool:
        raise ValueError("y must hold integer class labels")
    y = y.long()
    if y.min() < 0:
        raise ValueError("y must hold non-negative class labels")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    model.train()
    fit_minibatches(
        model.parameters(),
        X.shape[0],
        lambda idx, gen: F.cross_entropy(model(X[idx]), y[idx]),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        weight_decay=weight_decay,
        pct_start=0.15,
    )
    return model.eval()


# --- image quality ------------------------------------------------------------------------------------------------
def _pair(x: Any, y: Any) -> tuple[Tensor, Tensor]:
    x = as_image_tensor(x, "x", ndim=(3, 4), dtype=torch.float64)
    y = as_image_tensor(y, "y", ndim=(3, 4), dtype=torch.float64)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.ndim == 3:  # (B, H, W): one channel
        x, y = x[:, None], y[:, None]
    return x, y


def psnr(x: Any, y: Any, data_range: float) -> Tensor:
    """Peak signal-to-noise ratio per image, ``10 log10(data_range^2 / MSE)`` over ``(C, H, W)``.

    ``x``, ``y``: ``(B, H, W)`` or ``(B, C, H, W)``; returns ``(B,)`` in dB (``inf`` for identical images).
    """
    if not data_range > 0:
        raise ValueError(f"data_range must be > 0, got {data_range}")
    x, y = _pair(x, y)
    mse = (x - y).pow(2).flatten(1).mean(1)
    return 10 * torch.log10(data_range**2 / mse)


def ssim(x: Any, y: Any, data_range: float, win_size: int = 7) -> Tensor:
    """Structural similarity per image (mean over the valid region and channels), shape ``(B,)``.

    Equals ``skimage.metrics.structural_similarity`` with its defaults (uniform ``win_size`` window, K1 = 0.01,
    K2 = 0.03, sample covariance, the border of ``(win_size - 1) / 2`` pixels excluded from the mean).
    """
    if not data_range > 0:
        raise ValueError(f"data_range must be > 0, got {data_range}")
    win_size = check_positive_int(win_size, "win_size", 3)
    if win_size % 2 == 0:
        raise ValueError(f"win_size must be odd, got {win_size}")
    x, y = _pair(x, y)
    if min(x.shape[-2:]) < win_size:
        raise ValueError(f"images of size {tuple(x.shape[-2:])} are smaller than win_size={win_size}")
    B, C = x.shape[:2]
    x, y = x.reshape(B * C, 1, *x.shape[-2:]), y.reshape(B * C, 1, *y.shape[-2:])
    n_px = win_size * win_size
    cov_norm = n_px / (n_px - 1)

    def mean(t: Tensor) -> Tensor:
        return F.avg_pool2d(t, win_size, stride=1)

    ux, uy = mean(x), mean(y)
    vx = cov_norm * (mean(x * x) - ux * ux)
    vy = cov_norm * (mean(y * y) - uy * uy)
    vxy = cov_norm * (mean(x * y) - ux * uy)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return s.reshape(B, C, -1).mean(-1).mean(-1)
