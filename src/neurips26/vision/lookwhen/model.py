"""LookWhen: a cheap selector picks space-time tokens, a deep extractor runs only on them.

*LookWhen? Fast Video Recognition by Learning When, Where, and What to Compute* (Salamatian, Fuller, Sarkar,
Green, Sigal, Shelhamer; arXiv 2605.06809), the video successor of LookWhere (arXiv 2505.18051).

A video of ``T`` frames is cut into ``N = T (H/p)(W/p)`` space-time tokens (``p x p`` patches, order
``(frame, row, column)``).

- **Selector** (shallow video ViT on the clip downscaled ``r`` times in space): its low-res tokens
  ``(T, H/(rp), W/(rp))`` go through ``selector_depth`` divided space-time blocks [R: the block type]; an MLP
  head gives an ``r x r`` sub-grid of scores per low-res token, i.e. one score ``s_i`` per high-res token, and
  the mean token is its CLS (prefix) feature.
- **Extractor** (deep ViT): the patch embeddings of the top-``K`` tokens by ``s`` (``K = k_ratio N``) plus
  the full grid's fixed positions gathered with them, after the selector's CLS (projected); it returns a CLS
  feature and ``K`` patch features. A linear head on the CLS classifies.
- **Selection target** (uniqueness): for a teacher's token features ``h_i`` over all ``N`` tokens,
  ``u_i = min_{j != i} ||h_i - h_j||`` (the digest assumes the cosine distance, also available; see
  :func:`token_uniqueness` for why the Euclidean one is the default); the selector is trained with
  ``KL(softmax(z(u) / tau) || softmax(s))`` where ``z`` standardises ``u`` within the clip [R: loss form].
- **Extraction targets**: (a) the video teacher's CLS and token features at the kept positions;
  (b) an image teacher run frame by frame, its token features normalised across frames per spatial location,
  ``(f_t - mean_t f) / std_t f``, so that what is left is what changes [R]. Each target is matched through
  its own linear projection with the cosine distance [R]. The loss is
  ``L_select + L_video + image_weight * L_image``; top-K is not differentiable, so the selector learns only
  from ``L_select`` (as in LookWhere).
- **Fine-tuning**: selector frozen, extractor + linear head trained with cross-entropy.

Cost per clip (:meth:`LookWhen.flops`): the selector on ``N / r^2`` tokens plus the extractor on ``K + 1``
tokens, counted analytically (matrix products, as ``torch.utils.flop_counter`` reports them).

[R] marks what the digest reconstructs (the video paper's full text was not available). The teachers here are
small convolutional networks trained in the run (see :mod:`.training`), not InternVideo2 / DINO.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..modules import (
    DividedSpaceTimeBlock,
    PatchEmbed,
    TransformerEncoder,
    as_image_tensor,
    check_positive_int,
    divided_space_time_flops,
    grid_position_embedding,
    linear_flops,
    patchify,
    transformer_flops,
)

__all__ = [
    "LookWhen",
    "frame_difference_selection",
    "frame_normalise",
    "random_selection",
    "selection_overlap",
    "selection_kl_loss",
    "token_uniqueness",
    "uniform_temporal_selection",
]


def as_video(video: Any, name: str = "video", channels: int | None = None) -> Tensor:
    """Validate a batch of clips ``(B, T, C, H, W)`` (float in [0, 1] or uint8) and return float32.

    A float clip outside ``[0, 1]`` (0..255 values stored as floats, or mean-subtracted frames) is rejected
    rather than silently read as ``[0, 1]`` data.
    """
    is_uint8 = (isinstance(video, np.ndarray) and video.dtype == np.uint8) or (
        isinstance(video, Tensor) and video.dtype == torch.uint8
    )
    x = as_image_tensor(video, name, ndim=5, channels=channels, channel_axis=2)
    if is_uint8:
        return x / 255.0
    lo, hi = float(x.min()), float(x.max())
    if lo < -1e-6 or hi > 1.0 + 1e-6:
        raise ValueError(
            f"{name} must hold float values in [0, 1] (or uint8 in 0..255), got values in [{lo:.4g}, {hi:.4g}]"
        )
    return x


# --- targets and losses --------------------------------------------------------------------------------------
def token_uniqueness(features: Tensor, metric: str = "euclidean") -> Tensor:
    """Nearest-neighbour distance of each token to every other token of its clip.

    ``features``: ``(B, N, d)``; returns ``u`` of shape ``(B, N)`` with ``u_i = min_{j != i} dist(h_i, h_j)``.
    ``metric``: ``"euclidean"`` (``||h_i - h_j||``) or ``"cosine"`` (``1 - cos(h_i, h_j)``, in ``[0, 2]``).
    The digest assumes the cosine; the Euclidean distance is the default because a small teacher trained on
    labels gives static background tokens small feature vectors whose directions its input noise turns at
    will, so under the cosine a static token looks unique (see the experiment's ``cosine_target_overlap``).
    ``N >= 2``.
    """
    if features.ndim != 3 or features.shape[1] < 2:
        raise ValueError(f"features must be (B, N >= 2, d), got shape {tuple(features.shape)}")
    if metric not in ("euclidean", "cosine"):
        raise ValueError(f"metric must be 'euclidean' or 'cosine', got {metric!r}")
    h = features.float()
    if metric == "cosine":
        h = F.normalize(h, dim=-1)
        sim = h @ h.transpose(1, 2)
        sim.diagonal(dim1=1, dim2=2).fill_(-float("inf"))
        return (1.0 - sim.max(dim=-1).values).clamp_min(0.0)
    dist = torch.cdist(h, h)
    dist.diagonal(dim1=1, dim2=2).fill_(float("inf"))
    return dist.min(dim=-1).values


def selection_kl_loss(scores: Tensor, target: Tensor, tau: float = 0.5) -> Tensor:
    """``KL(softmax(z(target) / tau) || softmax(scores))`` averaged over clips; ``z`` = per-clip z-score [R]."""
    if scores.shape != target.shape or scores.ndim != 2:
        raise ValueError(
            f"scores and target must both be (B, N), got {tuple(scores.shape)}, {tuple(target.shape)}"
        )
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    z = (target - target.mean(1, keepdim=True)) / (target.std(1, keepdim=True) + 1e-6)
    p = torch.softmax(z / tau, dim=1)
    return F.kl_div(torch.log_softmax(scores, dim=1), p, reduction="batchmean")


def frame_normalise(features: Tensor, eps: float = 1e-5) -> Tensor:
    """Per spatial location, subtract the mean over frames and divide by the std over frames [R].

    ``features``: ``(B, T, S, d)`` (an image teacher's token features frame by frame); same shape back. A
    location whose feature never changes maps to zero.
    """
    if features.ndim != 4 or features.shape[1] < 2:
        raise ValueError(f"features must be (B, T >= 2, S, d), got shape {tuple(features.shape)}")
    mean = features.mean(1, keepdim=True)
    std = features.std(1, keepdim=True, unbiased=False)
    return (features - mean) / (std + eps)


def _cosine_distance(a: Tensor, b: Tensor) -> Tensor:
    return (1.0 - F.cosine_similarity(a, b, dim=-1)).mean()


# --- selection rules (the digest's baselines) -------------------------------------------------------------------
def _check_k(k: int, n: int) -> int:
    k = check_positive_int(k, "k")
    if k > n:
        raise ValueError(f"k must be <= the number of tokens ({n}), got {k}")
    return k


def random_selection(batch: int, n_tokens: int, k: int, generator: torch.Generator | None = None) -> Tensor:
    """``k`` distinct token indices per clip, uniformly at random, sorted; ``(batch, k)``."""
    k = _check_k(k, n_tokens)
    keys = torch.rand(check_positive_int(batch, "batch"), n_tokens, generator=generator)
    return keys.topk(k, dim=1).indices.sort(dim=1).values


def uniform_temporal_selection(batch: int, frames: int, tokens_per_frame: int, k: int) -> Tensor:
    """Every token of evenly spaced frames: ``ceil(k / S)`` frames, then the first ``k`` tokens in (frame, row,
    column) order, so the budget is exactly ``k``; ``(batch, k)``."""
    frames, S = check_positive_int(frames, "frames"), check_positive_int(tokens_per_frame, "tokens_per_frame")
    k = _check_k(k, frames * S)
    n_frames = math.ceil(k / S)
    picked = np.unique(
        np.floor(np.arange(n_frames) * frames / n_frames + (frames / n_frames - 1) / 2).astype(int)
    )
    idx = (torch.as_tensor(picked)[:, None] * S + torch.arange(S)[None]).reshape(-1)[:k]
    return idx[None].expand(check_positive_int(batch, "batch"), k).clone()


def frame_difference_selection(video: Any, patch: int, k: int) -> Tensor:
    """Motion-saliency heuristic: the ``k`` tokens with the largest mean absolute change from the previous frame
    (frame 0 uses the change to frame 1); ``(B, k)`` sorted indices."""
    x = as_video(video)
    diff = (x[:, 1:] - x[:, :-1]).abs()
    diff = torch.cat([diff[:, :1], diff], dim=1)
    per_token = patchify(diff, patch).mean(-1)
    k = _check_k(k, per_token.shape[1])
    return per_token.topk(k, dim=1).indices.sort(dim=1).values


def selection_overlap(indices: Any, token_masks: Any) -> np.ndarray:
    """Fraction of the selected tokens that touch the object, per clip: ``mean_j mask[idx_j]``."""
    idx = torch.as_tensor(np.asarray(indices)).long()
    masks = torch.as_tensor(np.asarray(token_masks)).bool()
    if idx.ndim != 2 or masks.ndim != 2 or idx.shape[0] != masks.shape[0]:
        raise ValueError(
            f"indices (B, K) and token_masks (B, N) disagree: {tuple(idx.shape)}, {tuple(masks.shape)}"
        )
    return masks.gather(1, idx).float().mean(1).numpy()


# --- the model ---------------------------------------------------------------------------------------------------
class Selector(nn.Module):
    """Shallow video ViT on the ``r``-times downscaled clip: a CLS feature and one score per high-res token.

    Its blocks are divided space-time blocks (attention over time at each location, then over space in each
    frame; TimeSformer's factorisation): a token compares itself with the same place in other frames in one
    step, which is what ranking tokens by space-time uniqueness needs. CLS is the normed mean of its tokens.
    """

    def __init__(
        self,
        frames: int,
        size: int,
        channels: int,
        patch: int,
        downscale: int,
        dim: int,
        depth: int,
        heads: int,
    ) -> None:
        super().__init__()
        self.r, self.patch, self.dim = downscale, patch, dim
        self.low = (frames, size // (downscale * patch), size // (downscale * patch))
        self.embed = PatchEmbed(channels, dim, patch)
        self.register_buffer("pos", grid_position_embedding(self.low, dim), persistent=False)
        self.blocks = nn.ModuleList(DividedSpaceTimeBlock(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, downscale * downscale))

    def forward(self, video: Tensor) -> tuple[Tensor, Tensor]:
        B, T, C, H, W = video.shape
        low = F.avg_pool2d(video.reshape(B * T, C, H, W), self.r).reshape(B, T, C, H // self.r, W // self.r)
        t, h, w = self.low
        x = (self.embed(low) + self.pos).view(B, t, h * w, self.dim)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x).reshape(B, t * h * w, self.dim)
        cls, sub = x.mean(1), self.head(x)  # sub: (B, T*h*w, r*r)
        r = self.r
        scores = sub.view(B, t, h, w, r, r).permute(0, 1, 2, 4, 3, 5).reshape(B, t * h * r * w * r)
        return cls, scores

    def flops(self) -> int:
        t, h, w = self.low
        n, d = t * h * w, self.dim
        blocks = divided_space_time_flops(t, h * w, d, len(self.blocks))
        return self.embed.flops(n) + blocks + linear_flops(n, d, d) + linear_flops(n, d, self.r * self.r)


class LookWhen(nn.Module):
    """Selector + top-K extractor + linear head for clips ``(B, T, C, H, W)``.

    Parameters
    ----------
    frames, size, channels : clip geometry (square frames of ``size`` pixels).
    n_classes : classes of the linear head.
    patch : token size in pixels (``size`` must be a multiple of ``patch * downscale``).
    k_ratio : fraction of the ``N`` tokens the extractor sees (LookWhere's examples use 0.1).
    downscale : spatial downscaling of the selector's input.
    selector_dim, selector_depth : width and blocks of the selector ViT.
    dim, depth, heads : width, blocks and heads of the extractor ViT (the selector uses ``heads`` too).
    """

    def __init__(
        self,
        frames: int,
        size: int,
        n_classes: int,
        *,
        channels: int = 3,
        patch: int = 4,
        k_ratio: float = 0.125,
        downscale: int = 2,
        selector_dim: int = 32,
        selector_depth: int = 1,
        dim: int = 64,
        depth: int = 4,
        heads: int = 4,
    ) -> None:
        super().__init__()
        self.frames = check_positive_int(frames, "frames", 2)
        self.size = check_positive_int(size, "size")
        self.channels = check_positive_int(channels, "channels")
        self.patch = check_positive_int(patch, "patch")
        self.downscale = check_positive_int(downscale, "downscale")
        if self.size % (self.patch * self.downscale):
            raise ValueError(f"size ({size}) must be a multiple of patch * downscale ({patch * downscale})")
        if not 0 < k_ratio <= 1:
            raise ValueError(f"k_ratio must be in (0, 1], got {k_ratio}")
        self.n_classes = check_positive_int(n_classes, "n_classes", 2)
        self.grid = (self.frames, self.size // self.patch, self.size // self.patch)
        self.n_tokens = math.prod(self.grid)
        self.k_ratio = float(k_ratio)
        self.selector = Selector(
            self.frames,
            self.size,
            self.channels,
            self.patch,
            self.downscale,
            check_positive_int(selector_dim, "selector_dim"),
            check_positive_int(selector_depth, "selector_depth"),
            heads,
        )
        self.dim = check_positive_int(dim, "dim")
        self.embed = PatchEmbed(self.channels, self.dim, self.patch)
        self.register_buffer("pos", grid_position_embedding(self.grid, self.dim), persistent=False)
        self.prefix = nn.Linear(selector_dim, self.dim)
        self.extractor = TransformerEncoder(self.dim, check_positive_int(depth, "depth"), heads)
        self.head = nn.Linear(self.dim, self.n_classes)

    @property
    def k(self) -> int:
        return max(1, round(self.k_ratio * self.n_tokens))

    def _video(self, video: Any) -> Tensor:
        x = as_video(video, channels=self.channels)
        if tuple(x.shape[1:]) != (self.frames, self.channels, self.size, self.size):
            raise ValueError(
                f"video must be (B, {self.frames}, {self.channels}, {self.size}, {self.size}), got {tuple(x.shape)}"
            )
        return x

    def scores(self, video: Any) -> Tensor:
        """Selector scores ``(B, N)`` for the high-res tokens (higher = keep)."""
        return self.selector(self._video(video))[1]

    def select(self, video: Any, k: int | None = None) -> Tensor:
        """Sorted indices ``(B, k)`` of the top-``k`` tokens by selector score (default ``k = k_ratio N``)."""
        k = self.k if k is None else _check_k(k, self.n_tokens)
        return self.scores(video).topk(k, dim=1).indices.sort(dim=1).values

    def extract(self, video: Any, indices: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Run the extractor on the chosen tokens: ``(cls (B, dim), patch features (B, K, dim), indices)``.

        ``indices`` (``(B, K)`` token indices) overrides the selector, so the same extractor runs any
        selection rule (random, uniform temporal, frame difference, all tokens).
        """
        x = self._video(video)
        cls_sel, scores = self.selector(x)
        if indices is None:
            indices = scores.topk(self.k, dim=1).indices.sort(dim=1).values
        else:
            indices = torch.as_tensor(indices).long()
            if indices.ndim != 2 or indices.shape[0] != x.shape[0]:
                raise ValueError(f"indices must be (B={x.shape[0]}, K), got {tuple(indices.shape)}")
            if indices.numel() and (indices.min() < 0 or indices.max() >= self.n_tokens):
                raise ValueError(f"indices must lie in [0, {self.n_tokens})")
        patches = patchify(x, self.patch)
        gathered = patches.gather(1, indices[..., None].expand(-1, -1, patches.shape[-1]))
        tok = self.embed.embed_patches(gathered) + self.pos[indices]
        out = self.extractor(torch.cat([self.prefix(cls_sel)[:, None], tok], dim=1))
        return out[:, 0], out[:, 1:], indices

    def forward(self, video: Any, indices: Tensor | None = None) -> Tensor:
        """Class logits ``(B, n_classes)``."""
        return self.head(self.extract(video, indices)[0])

    @torch.no_grad()
    def predict(self, video: Any, batch_size: int = 256) -> np.ndarray:
        was = self.training
        self.eval()
        x = self._video(video)
        out = [self(x[i : i + batch_size]).argmax(1) for i in range(0, len(x), batch_size)]
        self.train(was)
        return torch.cat(out).numpy()

    def flops(self, k: int | None = None, with_selector: bool = True) -> dict[str, int]:
        """Analytic FLOPs per clip: ``selector``, ``extractor`` (patch embedding + ViT on ``k + 1`` tokens),
        ``head`` and ``total``."""
        k = self.k if k is None else _check_k(k, self.n_tokens)
        sel = self.selector.flops() + linear_flops(1, self.selector.dim, self.dim) if with_selector else 0
        ext = self.embed.flops(k) + transformer_flops(
            k + 1, self.dim, self.extractor.depth, self.extractor.mlp_ratio
        )
        head = linear_flops(1, self.dim, self.n_classes)
        return {"selector": sel, "extractor": ext, "head": head, "total": sel + ext + head}
