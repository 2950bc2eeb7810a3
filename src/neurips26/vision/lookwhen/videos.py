"""Moving-shapes videos: the digest's synthetic benchmark for learned space-time token selection.

Each clip has ``frames`` RGB frames of ``size x size`` pixels: a static random-texture background, one moving
shape and one static distractor (a copy of a *different* shape, same colour distribution), plus a little
per-frame pixel noise. The label is ``3 * shape + motion`` with

- shape of the moving object: 0 = square, 1 = triangle (a disc only appears as a distractor: a rotating disc
  would look static, so it cannot carry the "rotating" class);
- motion: 0 = linear (constant velocity), 1 = bouncing (one velocity component reverses at a random frame, as
  off a wall), 2 = rotating in place.

So 6 classes, and the distractor makes "which object moves" part of the task: a single frame cannot tell the
moving object from the distractor when both are a square and a triangle. Along with the clips the generator
returns the moving object's pixel mask per frame and its token mask (which ``patch x patch`` tokens it touches),
for selection-quality checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..modules import check_positive_int

__all__ = ["MOTIONS", "SHAPES", "MovingShapes", "make_moving_shapes"]

SHAPES = ("square", "triangle", "disc")
MOTIONS = ("linear", "bouncing", "rotating")


@dataclass
class MovingShapes:
    """A batch of clips. ``videos``: (n, T, 3, H, W) in [0, 1] (float32, or uint8 = round(255 x));
    ``labels``: (n,) in [0, 6); ``object_masks``: (n, T, H, W) bool; ``token_masks``: (n, T (H/p)(W/p)) bool
    in token order (frame, row, column); ``shape``, ``motion``, ``distractor``: (n,) int."""

    videos: np.ndarray
    labels: np.ndarray
    object_masks: np.ndarray
    token_masks: np.ndarray
    shape: np.ndarray
    motion: np.ndarray
    distractor: np.ndarray
    patch: int

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, idx: np.ndarray | slice) -> MovingShapes:
        return MovingShapes(
            self.videos[idx],
            self.labels[idx],
            self.object_masks[idx],
            self.token_masks[idx],
            self.shape[idx],
            self.motion[idx],
            self.distractor[idx],
            self.patch,
        )


def _shape_masks(
    kind: np.ndarray, cx: np.ndarray, cy: np.ndarray, angle: np.ndarray, size: np.ndarray, H: int, W: int
):
    """Boolean masks (n, T, H, W) of shapes ``kind`` (n,) at centres/angles (n, T) and sizes (n,)."""
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32) + 0.5
    dx = xx[None, None] - cx[..., None, None]
    dy = yy[None, None] - cy[..., None, None]
    c, s = np.cos(angle)[..., None, None], np.sin(angle)[..., None, None]
    u, v = c * dx + s * dy, -s * dx + c * dy
    r = size[:, None, None, None]
    square = np.maximum(np.abs(u), np.abs(v)) <= r  # size = half side
    disc = u * u + v * v <= (1.05 * r) ** 2
    tri = np.ones_like(square)
    for k in range(3):  # equilateral triangle: inradius = circumradius / 2, circumradius 1.9 r
        a = np.pi / 2 + 2 * np.pi * k / 3
        tri &= np.cos(a) * u + np.sin(a) * v <= 0.95 * r
    k = kind[:, None, None, None]
    return np.where(k == 0, square, np.where(k == 1, tri, disc))


def make_moving_shapes(
    n: int,
    *,
    frames: int = 8,
    size: int = 32,
    patch: int = 4,
    noise: float = 0.02,
    seed: int | np.random.Generator = 0,
    dtype: str = "float32",
    task: str = "shape_motion",
) -> MovingShapes:
    """Generate ``n`` moving-shapes clips (see the module docstring); balanced-at-random over the 6 classes.

    ``frames >= 5`` (the bounce happens between frames 2 and ``frames - 3``), ``size >= 24`` pixels and a
    multiple of ``patch``; ``noise`` is the per-pixel Gaussian noise std (in [0, 0.2]); ``dtype`` is
    ``"float32"`` or ``"uint8"`` (4x less memory for large sets).

    ``task`` sets the label: ``"shape_motion"`` (the digest's 6 classes ``3 * shape + motion``) or
    ``"direction"`` (4 classes: the moving object travels in a straight line to the right, down, left or up,
    within 20 degrees; its shape is drawn as before and carries no label). The direction task keeps what the
    selection claim needs (one small moving object, a static distractor, a static textured background) and is
    learnable by small models from a few hundred clips; ``motion`` is 0 (linear) for every clip.
    """
    n = check_positive_int(n, "n")
    frames = check_positive_int(frames, "frames", 5)
    size = check_positive_int(size, "size", 24)
    patch = check_positive_int(patch, "patch")
    if size % patch:
        raise ValueError(f"size ({size}) must be a multiple of patch ({patch})")
    if not 0 <= noise <= 0.2:
        raise ValueError(f"noise must be in [0, 0.2], got {noise}")
    if task not in ("shape_motion", "direction"):
        raise ValueError(f"task must be 'shape_motion' or 'direction', got {task!r}")
    if dtype not in ("float32", "uint8"):
        raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    T, H = frames, size
    t = np.arange(T, dtype=np.float32)

    shape = rng.integers(0, 2, n)
    motion = rng.integers(0, 3, n)
    distractor = (shape + rng.integers(1, 3, n)) % 3  # a different shape
    half = rng.uniform(2.8, 3.4, n).astype(np.float32)  # half side of a square; triangles/discs scaled alike
    half_d = rng.uniform(2.6, 3.2, n).astype(np.float32)

    # trajectories (offsets from the start point), then a start point that keeps the object inside the frame
    phi = rng.uniform(0, 2 * np.pi, n)
    if task == "direction":  # the class is the direction of travel (right, down, left, up in image axes)
        direction = rng.integers(0, 4, n)
        phi = direction * (np.pi / 2) + rng.uniform(-1, 1, n) * np.deg2rad(20)
        motion = np.zeros(n, dtype=motion.dtype)
    speed = rng.uniform(1.6, 2.4, n)
    vx, vy = speed * np.cos(phi), speed * np.sin(phi)
    ox, oy = vx[:, None] * t, vy[:, None] * t
    bounce_at = rng.integers(2, T - 2, n)[:, None]
    axis = rng.integers(0, 2, n)[:, None]
    after = t[None] > bounce_at
    # bouncing: the component along ``axis`` reverses after ``bounce_at`` (and is at least 1.2 px / frame)
    vb = np.sign(np.where(axis[:, 0] == 0, vx, vy)) * np.maximum(
        np.abs(np.where(axis[:, 0] == 0, vx, vy)), 1.2
    )
    reflected = vb[:, None] * np.where(after, 2 * bounce_at - t[None], t[None])
    bx = np.where(axis == 0, reflected, ox)
    by = np.where(axis == 1, reflected, oy)
    is_lin, is_bnc = (motion == 0)[:, None], (motion == 1)[:, None]
    ox = np.where(is_lin, ox, np.where(is_bnc, bx, 0.0))
    oy = np.where(is_lin, oy, np.where(is_bnc, by, 0.0))
    margin = 2.0 * half[:, None] + 1.0
    lo_x, hi_x = margin[:, 0] - ox.min(1), H - margin[:, 0] - ox.max(1)
    lo_y, hi_y = margin[:, 0] - oy.min(1), H - margin[:, 0] - oy.max(1)
    x0 = lo_x + rng.uniform(0, 1, n) * np.maximum(hi_x - lo_x, 0)
    y0 = lo_y + rng.uniform(0, 1, n) * np.maximum(hi_y - lo_y, 0)
    cx, cy = (x0[:, None] + ox).astype(np.float32), (y0[:, None] + oy).astype(np.float32)
    omega = rng.choice([-1.0, 1.0], n) * rng.uniform(0.3, 0.5, n)
    theta0 = rng.uniform(0, 2 * np.pi, n)
    angle = (theta0[:, None] + np.where(motion[:, None] == 2, omega[:, None] * t, 0.0)).astype(np.float32)

    # the distractor: the farthest of 16 candidate positions from the moving object's path
    cand = rng.uniform(2 * half_d[:, None, None] + 1, H - 2 * half_d[:, None, None] - 1, (n, 16, 2)).astype(
        np.float32
    )
    d2 = (cand[:, :, None, 0] - cx[:, None]) ** 2 + (cand[:, :, None, 1] - cy[:, None]) ** 2
    best = np.argmax(d2.min(2), axis=1)
    dx_, dy_ = cand[np.arange(n), best, 0], cand[np.arange(n), best, 1]
    d_angle = np.broadcast_to(rng.uniform(0, 2 * np.pi, n)[:, None], (n, T)).astype(np.float32)

    # static background: smooth colour field + fine texture, mid grey; vivid object colours
    coarse = rng.uniform(-1, 1, (n, 3, 5, 5)).astype(np.float32)
    from scipy.ndimage import zoom

    field = zoom(coarse, (1, 1, H / 5, H / 5), order=1)
    bg = 0.45 + 0.12 * field + 0.06 * rng.uniform(-1, 1, (n, 3, H, H)).astype(np.float32)
    colours = rng.uniform(0.0, 0.6, (n, 2, 3)).astype(np.float32)
    colours[np.arange(n)[:, None], np.arange(2)[None], rng.integers(0, 3, (n, 2))] = 1.0

    videos = np.empty((n, T, 3, H, H), dtype=np.uint8 if dtype == "uint8" else np.float32)
    object_masks = np.empty((n, T, H, H), dtype=bool)
    for s in range(0, n, 256):  # chunks keep the (chunk, T, H, W) temporaries small
        sl = slice(s, min(n, s + 256))
        m = len(shape[sl])
        dmask = _shape_masks(
            distractor[sl],
            np.broadcast_to(dx_[sl, None], (m, T)),
            np.broadcast_to(dy_[sl, None], (m, T)),
            d_angle[sl],
            half_d[sl],
            H,
            H,
        )
        omask = _shape_masks(shape[sl], cx[sl], cy[sl], angle[sl], half[sl], H, H)
        clip = np.broadcast_to(bg[sl, None], (m, T, 3, H, H)).copy()
        clip = np.where(dmask[:, :, None], colours[sl, 1, None, :, None, None], clip)
        clip = np.where(omask[:, :, None], colours[sl, 0, None, :, None, None], clip)
        clip = np.clip(clip + noise * rng.standard_normal(clip.shape, dtype=np.float32), 0.0, 1.0)
        videos[sl] = np.round(clip * 255) if dtype == "uint8" else clip
        object_masks[sl] = omask
    h = H // patch
    token_masks = object_masks.reshape(n, T, h, patch, h, patch).any(axis=(3, 5)).reshape(n, T * h * h)
    return MovingShapes(
        videos=videos,
        labels=(direction if task == "direction" else 3 * shape + motion).astype(np.int64),
        object_masks=object_masks,
        token_masks=token_masks,
        shape=shape,
        motion=motion,
        distractor=distractor,
        patch=patch,
    )
