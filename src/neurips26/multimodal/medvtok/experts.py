"""Frozen expert encoders for multi-expert representation alignment: stand-ins for the medical experts (a 2-D
radiology encoder, a 3-D CT encoder, a pathology/texture encoder) of the digest's small-scale check.

- :class:`CNNExpert` is a small conv classifier (2-D images or 3-D volumes) trained on one label by
  :func:`fit_expert`, then frozen; its globally pooled last conv features are the alignment target.
- :func:`texture_features` is a fixed hand-made extractor: HOG (scikit-image) plus Gabor energy statistics
  (scikit-image's Gabor kernels) per image.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from skimage.feature import hog
from skimage.filters import gabor_kernel
from torch import Tensor, nn

from ...vision.modules import ConvEncoder, as_image_tensor, check_positive_int, fit_minibatches

__all__ = ["CNNExpert", "fit_expert", "texture_features"]


class CNNExpert(nn.Module):
    """``ConvEncoder`` -> global average pool (the features) -> linear classifier; ``dims = 3`` for volumes."""

    def __init__(self, n_classes: int, in_channels: int = 1, widths: Sequence[int] = (16, 32), dims: int = 2):
        super().__init__()
        self.dims = dims
        self.encoder = ConvEncoder(in_channels, widths, dims=dims)
        self.head = nn.Linear(self.encoder.out_channels, check_positive_int(n_classes, "n_classes", 2))
        self.feature_dim = self.encoder.out_channels

    def _check(self, x: Any) -> Tensor:
        return as_image_tensor(x, "x", ndim=self.dims + 2, channels=self.encoder.stem.in_channels)

    def _pooled(self, x: Tensor) -> Tensor:
        return F.silu(self.encoder(x)).flatten(2).mean(-1)

    def forward(self, x: Any) -> Tensor:
        return self.head(self._pooled(self._check(x)))

    @torch.no_grad()
    def features(self, x: Any, batch_size: int = 256) -> np.ndarray:
        """Pooled features ``(n, feature_dim)`` as float32, in evaluation mode."""
        t = self._check(x)
        was = self.training
        self.eval()
        out = torch.cat([self._pooled(t[i : i + batch_size]) for i in range(0, len(t), batch_size)])
        self.train(was)
        return out.numpy()


def fit_expert(
    expert: CNNExpert,
    x: Any,
    y: Any,
    *,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
) -> CNNExpert:
    """Train ``expert`` with cross-entropy on ``(x, y)`` (integer labels), then freeze it (eval mode, no grad)."""
    t = expert._check(x)
    labels = torch.as_tensor(np.asarray(y))
    if labels.ndim != 1 or len(labels) != len(t) or labels.dtype.is_floating_point:
        raise ValueError(f"y must be {len(t)} integer labels, got shape {tuple(labels.shape)}")
    if labels.min() < 0 or labels.max() >= expert.head.out_features:
        raise ValueError(
            f"y must lie in [0, {expert.head.out_features}), got [{labels.min()}, {labels.max()}]"
        )
    expert.train()
    fit_minibatches(
        expert.parameters(),
        len(t),
        lambda j, gen: F.cross_entropy(expert.head(expert._pooled(t[j])), labels[j].long()),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        one_cycle=False,
    )
    expert.eval()
    for p in expert.parameters():
        p.requires_grad_(False)
    return expert


def texture_features(
    images: Any,
    orientations: int = 4,
    frequencies: Sequence[float] = (0.15, 0.25),
    hog_cell: int = 8,
) -> np.ndarray:
    """HOG (9 orientation bins, ``hog_cell`` pixel cells) and Gabor energy (mean and standard deviation of the
    response magnitude per orientation and frequency) of ``images (n, 1, H, W)``; ``(n, d)`` float32."""
    t = as_image_tensor(images, "images", ndim=4, channels=1)
    orientations = check_positive_int(orientations, "orientations")
    if not frequencies or any(not 0 < f <= 0.5 for f in frequencies):
        raise ValueError(f"frequencies must be in (0, 0.5] cycles per pixel, got {frequencies!r}")
    H, W = t.shape[-2:]
    hog_cell = check_positive_int(hog_cell, "hog_cell", 2)
    if H < hog_cell or W < hog_cell:
        raise ValueError(f"images must be at least hog_cell = {hog_cell} pixels wide, got {(H, W)}")
    arr = t[:, 0].numpy().astype(np.float64)
    hogs = np.stack(
        [hog(a, orientations=9, pixels_per_cell=(hog_cell, hog_cell), cells_per_block=(1, 1)) for a in arr]
    )
    kernels = [
        gabor_kernel(f, theta=np.pi * k / orientations) for f in frequencies for k in range(orientations)
    ]
    size = max(max(k.shape) for k in kernels)
    bank = np.zeros((2 * len(kernels), 1, size, size))  # real and imaginary parts, centred in one frame
    for i, k in enumerate(kernels):
        oy, ox = (size - k.shape[0]) // 2, (size - k.shape[1]) // 2
        bank[2 * i, 0, oy : oy + k.shape[0], ox : ox + k.shape[1]] = k.real
        bank[2 * i + 1, 0, oy : oy + k.shape[0], ox : ox + k.shape[1]] = k.imag
    # replicate padding: zero padding would put an axis-aligned edge at the image border that the wide
    # low-frequency kernels respond to more than to the content
    padded = F.pad(torch.from_numpy(arr[:, None]), (size // 2,) * 4, mode="replicate")
    resp = F.conv2d(padded, torch.from_numpy(bank))
    energy = resp.view(len(arr), len(kernels), 2, *resp.shape[-2:]).pow(2).sum(2).sqrt().flatten(2)
    gabor = torch.cat([energy.mean(-1), energy.std(-1)], dim=1).numpy()
    return np.concatenate([hogs, gabor], axis=1).astype(np.float32)
