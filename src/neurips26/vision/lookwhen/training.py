"""Teachers and the LookWhen training recipe (distillation pre-training, then fine-tuning).

The paper distils from large pre-trained teachers (a video model such as InternVideo2 and an image model such as
DINO). Nothing may be downloaded here, so both teachers are small networks trained in the run on the user's
labels and then frozen:

- :class:`VideoTeacher`: patch embedding + fixed space-time positions, residual 3-D convolutions over the
  ``(T, H/p, W/p)`` token grid, attention pooling to a CLS feature and a linear head; it sees every token.
- :class:`ImageTeacher`: the same on single frames with 2-D convolutions (trained on per-frame labels).

Convolutions instead of ViTs keep the teachers cheap on a CPU; they only supply targets (token features for the
uniqueness target and the video distillation, frame-normalised frame features for the image distillation).
:class:`LookWhenClassifier` wraps the whole recipe for a user's clips.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..modules import (
    PatchEmbed,
    ResBlock,
    check_positive_int,
    fit_minibatches,
    grid_position_embedding,
    train_classifier,
)
from .model import LookWhen, _cosine_distance, as_video, frame_normalise, selection_kl_loss, token_uniqueness

__all__ = [
    "ImageTeacher",
    "LookWhenClassifier",
    "TeacherTargets",
    "VideoTeacher",
    "compute_targets",
    "finetune",
    "pretrain",
    "train_selector",
]

SelectionRule = Callable[[Tensor, Tensor], Tensor]  # (video batch, clip ids) -> token indices (B, K)


class ImageTeacher(nn.Module):
    """Per-frame model on ``(B, C, H, W)``: logits, and :meth:`features` tokens ``(B, S, d)``."""

    def __init__(
        self, size: int, n_classes: int, channels: int = 3, patch: int = 4, dim: int = 32, blocks: int = 2
    ) -> None:
        super().__init__()
        self.hw = (size // patch, size // patch)
        self.embed = PatchEmbed(channels, check_positive_int(dim, "dim"), patch)
        self.register_buffer("pos", grid_position_embedding(self.hw, dim), persistent=False)
        self.blocks = nn.ModuleList(
            ResBlock(dim, dims=2) for _ in range(check_positive_int(blocks, "blocks"))
        )
        self.head = nn.Linear(dim, check_positive_int(n_classes, "n_classes", 2))

    def features(self, frames: Tensor) -> Tensor:
        B = frames.shape[0]
        h = (self.embed(frames) + self.pos).transpose(1, 2).reshape(B, -1, *self.hw)
        for block in self.blocks:
            h = block(h)
        return h.flatten(2).transpose(1, 2)

    def forward(self, frames: Tensor) -> Tensor:
        return self.head(self.features(frames).mean(1))


class VideoTeacher(nn.Module):
    """Every-token video model: ``forward`` gives logits, :meth:`features` ``(cls (B, d), tokens (B, N, d))``.

    Token features come from a per-frame encoder (2-D residual convolutions, spatial positions only), so a
    static region has the same feature in every frame and token uniqueness measures what is distinctive in
    space-time; a 3-D residual block with time positions then mixes frames before mean + max pooling to CLS.
    """

    def __init__(
        self,
        frames: int,
        size: int,
        n_classes: int,
        channels: int = 3,
        patch: int = 4,
        dim: int = 32,
        blocks: int = 2,
    ) -> None:
        super().__init__()
        self.grid = (check_positive_int(frames, "frames"), size // patch, size // patch)
        self.frame_encoder = ImageTeacher(size, 2, 2 * channels, patch, dim, blocks)
        self.register_buffer(
            "time", grid_position_embedding(self.grid[:1], dim)[:, None, :], persistent=False
        )
        self.mix = ResBlock(dim, dims=3)
        self.pool = nn.Sequential(nn.Linear(2 * dim, dim), nn.LayerNorm(dim))
        self.head = nn.Linear(dim, check_positive_int(n_classes, "n_classes", 2))

    def features(self, video: Tensor) -> tuple[Tensor, Tensor]:
        B, T = video.shape[:2]
        # two streams per frame: the frame and its deviation from the clip's temporal median (a static-background
        # prior that stands in for what a large pre-trained video teacher already knows)
        video = torch.cat([video, video - video.median(dim=1, keepdim=True).values], dim=2)
        tok = self.frame_encoder.features(video.flatten(0, 1)).view(
            B, T, -1, self.time.shape[-1]
        )  # (B,T,S,d)
        h = (tok + self.time).permute(0, 3, 1, 2).reshape(B, -1, *self.grid)
        mixed = self.mix(h).flatten(2)  # (B, d, N)
        # mean + max pooling: a small moving object is a few of the N tokens, a mean alone washes it out
        cls = self.pool(torch.cat([mixed.mean(-1), mixed.amax(-1)], dim=1))
        return cls, tok.flatten(1, 2)

    def forward(self, video: Tensor) -> Tensor:
        return self.head(self.features(video)[0])


class TeacherTargets:
    """Frozen-teacher targets for a set of clips: video CLS ``(n, d)``, video tokens ``(n, N, d)``, token
    uniqueness ``(n, N)`` and frame-normalised image tokens ``(n, N, d_img)`` (or ``None``)."""

    def __init__(self, cls: Tensor, tokens: Tensor, uniqueness: Tensor, image: Tensor | None) -> None:
        self.cls, self.tokens, self.uniqueness, self.image = cls, tokens, uniqueness, image

    def __len__(self) -> int:
        return len(self.cls)


@torch.no_grad()
def compute_targets(
    video_teacher: VideoTeacher, image_teacher: ImageTeacher | None, videos: Any, batch_size: int = 128
) -> TeacherTargets:
    """Run the frozen teachers once over ``videos`` and build every distillation target."""
    x = as_video(videos)
    video_teacher.eval()
    cls, tokens, uniq, image = [], [], [], []
    for i in range(0, len(x), batch_size):
        xb = x[i : i + batch_size]
        c, t = video_teacher.features(xb)
        cls.append(c)
        tokens.append(t)
        uniq.append(token_uniqueness(t))
        if image_teacher is not None:
            image_teacher.eval()
            B, T = xb.shape[:2]
            f = image_teacher.features(xb.flatten(0, 1))
            image.append(frame_normalise(f.view(B, T, *f.shape[1:])).flatten(1, 2))
    return TeacherTargets(
        torch.cat(cls), torch.cat(tokens), torch.cat(uniq), torch.cat(image) if image else None
    )


def train_selector(
    model: LookWhen,
    videos: Any,
    targets: TeacherTargets,
    *,
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
) -> LookWhen:
    """Warm up the selector alone on ``L_select`` (it is cheap: one shallow ViT on the downscaled clip), so the
    joint pre-training starts from a selector that already ranks tokens like the uniqueness target."""
    x = as_video(videos)
    if len(targets) != len(x):
        raise ValueError(f"targets cover {len(targets)} clips, videos has {len(x)}")
    model.train()
    fit_minibatches(
        model.selector.parameters(),
        len(x),
        lambda ids, gen: selection_kl_loss(model.selector(x[ids])[1], targets.uniqueness[ids]),
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=int(seed) + 2,
        weight_decay=0.05,
    )
    return model.eval()


def pretrain(
    model: LookWhen,
    videos: Any,
    targets: TeacherTargets,
    *,
    epochs: int = 5,
    batch_size: int = 32,
    lr: float = 2e-3,
    image_weight: float = 1.0,
    selection: SelectionRule | None = None,
    seed: int = 0,
) -> LookWhen:
    """Distillation pre-training: ``L_select + L_video(CLS + kept tokens) + image_weight * L_image(kept tokens)``.

    The selector and extractor train jointly; the extractor sees the selector's top-K tokens, or those of
    ``selection`` (a baseline rule) when given. ``image_weight = 0`` (or targets without image features) drops
    the image-teacher loss (the ablation).
    """
    x = as_video(videos)
    if len(targets) != len(x):
        raise ValueError(f"targets cover {len(targets)} clips, videos has {len(x)}")
    if image_weight < 0:
        raise ValueError(f"image_weight must be >= 0, got {image_weight}")
    d_t = targets.cls.shape[1]
    heads = nn.ModuleDict(
        {"cls": nn.Linear(model.dim, d_t), "tok": nn.Linear(model.dim, targets.tokens.shape[2])}
    )
    use_image = targets.image is not None and image_weight > 0
    if use_image:
        heads["img"] = nn.Linear(model.dim, targets.image.shape[2])

    def step(ids: Tensor, gen: torch.Generator) -> Tensor:
        xb = x[ids]
        _, scores = model.selector(xb)
        loss = selection_kl_loss(scores, targets.uniqueness[ids])
        idx = None if selection is None else selection(xb, ids)
        cls, feats, idx = model.extract(xb, idx)
        idx3 = idx[..., None]
        loss = loss + _cosine_distance(heads["cls"](cls), targets.cls[ids])
        tok_t = targets.tokens[ids].gather(1, idx3.expand(-1, -1, targets.tokens.shape[2]))
        loss = loss + _cosine_distance(heads["tok"](feats), tok_t)
        if use_image:
            img_t = targets.image[ids].gather(1, idx3.expand(-1, -1, targets.image.shape[2]))
            loss = loss + image_weight * F.mse_loss(heads["img"](feats), img_t)
        return loss

    model.train()
    params = list(model.parameters()) + list(heads.parameters())
    fit_minibatches(
        params, len(x), step, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, weight_decay=0.05
    )
    return model.eval()


def finetune(
    model: LookWhen,
    videos: Any,
    labels: Any,
    *,
    epochs: int = 5,
    batch_size: int = 32,
    lr: float = 1e-3,
    selection: SelectionRule | None = None,
    seed: int = 0,
) -> LookWhen:
    """Fine-tune extractor + head with cross-entropy on ``labels``, the selector frozen."""
    x = as_video(videos)
    y = torch.as_tensor(np.asarray(labels)).long()
    if y.ndim != 1 or len(y) != len(x):
        raise ValueError(f"labels must be 1-D with one label per clip ({len(x)}), got shape {tuple(y.shape)}")
    if y.min() < 0 or y.max() >= model.n_classes:
        raise ValueError(f"labels must lie in [0, {model.n_classes})")
    for p in model.selector.parameters():
        p.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]

    def step(ids: Tensor, gen: torch.Generator) -> Tensor:
        xb = x[ids]
        idx = None if selection is None else selection(xb, ids)
        return F.cross_entropy(model(xb, idx), y[ids])

    model.train()
    fit_minibatches(
        params,
        len(x),
        step,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=int(seed) + 1,
        weight_decay=0.05,
    )
    for p in model.selector.parameters():
        p.requires_grad_(True)
    return model.eval()


class LookWhenClassifier:
    """The whole LookWhen recipe for a user's clips, scikit-learn style.

    ``fit(videos, labels, frame_labels=None)`` trains the video teacher on ``labels`` and the image teacher on
    ``frame_labels`` (one label per clip for its frames; default ``labels``), freezes both, pre-trains the
    selector and extractor by distillation, then fine-tunes the extractor and head. ``predict`` classifies
    from the top ``k_ratio`` of the tokens; ``select`` returns their indices.
    ``videos``: ``(n, T, C, H, W)`` float in [0, 1] or uint8; ``H == W`` a multiple of ``patch * downscale``.
    """

    def __init__(
        self,
        k_ratio: float = 0.125,
        *,
        patch: int = 4,
        downscale: int = 2,
        dim: int = 64,
        depth: int = 4,
        selector_dim: int = 32,
        teacher_dim: int = 32,
        teacher_epochs: int = 10,
        pretrain_epochs: int = 10,
        finetune_epochs: int = 5,
        image_weight: float = 1.0,
        batch_size: int = 32,
        seed: int = 0,
    ) -> None:
        if not 0 < k_ratio <= 1:
            raise ValueError(f"k_ratio must be in (0, 1], got {k_ratio}")
        for name in (
            "patch",
            "downscale",
            "dim",
            "depth",
            "selector_dim",
            "teacher_dim",
            "teacher_epochs",
            "pretrain_epochs",
            "finetune_epochs",
            "batch_size",
        ):
            check_positive_int(locals()[name], name)
        if image_weight < 0:
            raise ValueError(f"image_weight must be >= 0, got {image_weight}")
        self.k_ratio, self.patch, self.downscale, self.dim, self.depth = k_ratio, patch, downscale, dim, depth
        self.selector_dim, self.teacher_dim, self.teacher_epochs = selector_dim, teacher_dim, teacher_epochs
        self.pretrain_epochs, self.finetune_epochs, self.image_weight = (
            pretrain_epochs,
            finetune_epochs,
            image_weight,
        )
        self.batch_size, self.seed = batch_size, seed

    def fit(self, videos: Any, labels: Any, frame_labels: Any = None) -> LookWhenClassifier:
        x = as_video(videos)
        n, T, C, H, W = x.shape
        if H != W:
            raise ValueError(f"videos must have square frames, got {H} x {W}")
        y = np.asarray(labels)
        if y.ndim != 1 or len(y) != n or not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
            raise ValueError(f"labels must be non-negative integers, one per clip ({n})")
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError("labels must hold at least 2 classes")
        if frame_labels is None:
            fl = y_enc
        else:
            fr = np.asarray(frame_labels)
            if fr.ndim != 1 or len(fr) != n or not np.issubdtype(fr.dtype, np.integer) or fr.min() < 0:
                raise ValueError(f"frame_labels must be non-negative integers, one per clip ({n})")
            fl = np.unique(fr, return_inverse=True)[1]
        torch.manual_seed(self.seed)
        self.video_teacher_ = VideoTeacher(T, H, len(self.classes_), C, self.patch, self.teacher_dim)
        train_classifier(
            self.video_teacher_,
            x,
            y_enc,
            epochs=self.teacher_epochs,
            batch_size=self.batch_size,
            seed=self.seed,
        )
        self.image_teacher_ = ImageTeacher(
            H, int(fl.max()) + 1 if fl.max() > 0 else 2, C, self.patch, self.teacher_dim
        )
        frames = x.flatten(0, 1)
        train_classifier(
            self.image_teacher_,
            frames,
            np.repeat(fl, T),
            epochs=max(1, self.teacher_epochs // 2),
            batch_size=4 * self.batch_size,
            seed=self.seed,
        )
        targets = compute_targets(self.video_teacher_, self.image_teacher_, x)
        self.model_ = LookWhen(
            T,
            H,
            len(self.classes_),
            channels=C,
            patch=self.patch,
            k_ratio=self.k_ratio,
            downscale=self.downscale,
            selector_dim=self.selector_dim,
            dim=self.dim,
            depth=self.depth,
        )
        pretrain(
            self.model_,
            x,
            targets,
            epochs=self.pretrain_epochs,
            batch_size=self.batch_size,
            image_weight=self.image_weight,
            seed=self.seed,
        )
        finetune(
            self.model_, x, y_enc, epochs=self.finetune_epochs, batch_size=self.batch_size, seed=self.seed
        )
        return self

    def _fitted(self) -> LookWhen:
        if not hasattr(self, "model_"):
            raise RuntimeError("this LookWhenClassifier is not fitted yet; call fit first")
        return self.model_

    def predict(self, videos: Any) -> np.ndarray:
        model = self._fitted()
        return self.classes_[model.predict(videos)]

    def score(self, videos: Any, labels: Any) -> float:
        return float(np.mean(self.predict(videos) == np.asarray(labels)))

    @torch.no_grad()
    def select(self, videos: Any) -> np.ndarray:
        """Indices ``(n, K)`` of the tokens the extractor sees (order: frame, row, column)."""
        return self._fitted().select(videos).numpy()
