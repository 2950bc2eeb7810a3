"""The fixed visual state matcher that stands in for the VLM's look at the screen.

The generator knows, for its own trajectories, which object occupies each grid cell (the audit cards'
grounding). From those frames it builds a tile dictionary: every distinct rendered tile appearance -> the object
class it showed (type and door state, colour ignored: ``key``, ``door:locked``, ``door:open``, ``goal``, ...). A
live frame is parsed tile by tile (exact appearance, else the known tile of the nearest shape: per-pixel
brightness relative to the tile's brightest in three levels, Hamming distance, so an object in a colour never
seen is still recognised), and its
descriptor is the idf-weighted presence vector of the task-object classes seen (walls, floor and the agent are
background), L2-normalised; ``distance = 1 - cosine``. Nothing else is learned, and the layout (where objects
are) does not enter, only which objects are visible in which state. [reconstructed: the paper's branch is a
VLM comparing screenshots.]
"""

from __future__ import annotations

import numpy as np

__all__ = ["BACKGROUND", "TileParser", "cell_labels", "crop"]

BACKGROUND = ("empty", "wall", "floor", "agent", "unknown")


def cell_labels(env) -> np.ndarray:
    """(height, width) object-class label of every cell of a MiniGrid env (the generator's grounding)."""
    g = env.grid
    out = np.full((g.height, g.width), "empty", dtype=object)
    for x in range(g.width):
        for y in range(g.height):
            o = g.get(x, y)
            if o is None:
                continue
            if o.type == "door":
                out[y, x] = "door:locked" if o.is_locked else ("door:open" if o.is_open else "door:closed")
            else:
                out[y, x] = o.type
    ax, ay = env.agent_pos
    out[int(ay), int(ax)] = "agent"
    return out


def _blocks(frame: np.ndarray, tile: int) -> np.ndarray:
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise ValueError(f"frame must be an HxWx3 uint8 image, got {frame.shape} {frame.dtype}")
    h, w = frame.shape[0] // tile, frame.shape[1] // tile
    if h == 0 or w == 0 or frame.shape[0] % tile or frame.shape[1] % tile:
        raise ValueError(f"frame shape {frame.shape[:2]} is not a whole number of {tile}-pixel tiles")
    return frame.reshape(h, tile, w, tile, 3).transpose(0, 2, 1, 3, 4).reshape(h, w, -1)


def crop(frame: np.ndarray, cell: tuple[int, int], tile: int, radius: int = 1) -> np.ndarray:
    """The (2 radius + 1)^2-cell focus crop of ``frame`` around grid cell ``(x, y)`` (clipped at the border)."""
    x, y = cell
    h, w = frame.shape[0] // tile, frame.shape[1] // tile
    x0, x1 = max(0, x - radius), min(w, x + radius + 1)
    y0, y1 = max(0, y - radius), min(h, y + radius + 1)
    return np.ascontiguousarray(frame[y0 * tile : y1 * tile, x0 * tile : x1 * tile])


class TileParser:
    """Tile appearance -> object class, fitted on grounded generator frames; frame descriptors for matching."""

    def __init__(self, tile: int = 8) -> None:
        if isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
            raise ValueError(f"tile must be a positive integer, got {tile!r}")
        self.tile = tile

    def fit(self, frames: list[np.ndarray], labels: list[np.ndarray]) -> TileParser:
        """``labels[i]`` is the (h, w) class grid of ``frames[i]`` (from :func:`cell_labels`)."""
        if len(frames) == 0 or len(frames) != len(labels):
            raise ValueError(
                f"frames and labels must be non-empty and of one length, got {len(frames)}, {len(labels)}"
            )
        votes: dict[bytes, dict[str, int]] = {}
        for frame, lab in zip(frames, labels, strict=True):
            blocks = _blocks(frame, self.tile)
            if lab.shape != blocks.shape[:2]:
                raise ValueError(
                    f"labels shape {lab.shape} does not match the frame's {blocks.shape[:2]} cells"
                )
            for b, c in zip(blocks.reshape(-1, blocks.shape[-1]), lab.ravel(), strict=True):
                key = b.tobytes()
                votes.setdefault(key, {})
                votes[key][c] = votes[key].get(c, 0) + 1
        keys = sorted(votes)
        self.appearance_ = {k: max(sorted(votes[k]), key=votes[k].get) for k in keys}
        self._masks = np.stack([self._mask(np.frombuffer(k, dtype=np.uint8)) for k in keys])
        self._mask_labels = [self.appearance_[k] for k in keys]
        self.classes_ = sorted({c for c in self.appearance_.values() if c not in BACKGROUND})
        present = np.array([self._presence(f) for f in frames])
        df = present.sum(axis=0)
        self.idf_ = np.log((1 + len(frames)) / (1 + df)) + 1.0
        return self

    def _mask(self, block: np.ndarray) -> np.ndarray:
        """Colour-free shape of a tile: each pixel's brightness relative to the tile's brightest, in three
        levels (off below 1/4, dim below 4/5, bright). MiniGrid draws an object in one colour at fixed
        fractions of it (a locked door: a full-colour frame around a 0.45 x colour panel), so the levels do not
        depend on the colour; a lit/unlit mask does (a locked door and the goal both light every pixel). The
        first row and column, where the grid lines of constant grey lie, are left out."""
        b = block.reshape(self.tile, self.tile, 3)[1:, 1:].max(axis=2).astype(np.float64).ravel()
        top = b.max()
        if top <= 30:
            return np.zeros(b.shape, dtype=np.int8)
        r = b / top
        return (r >= 0.25).astype(np.int8) + (r >= 0.8).astype(np.int8)

    def parse(self, frame: np.ndarray) -> np.ndarray:
        """(h, w) object class of every tile of ``frame``."""
        if not hasattr(self, "appearance_"):
            raise RuntimeError("TileParser is not fitted: call fit(frames, labels) first")
        blocks = _blocks(frame, self.tile)
        flat = blocks.reshape(-1, blocks.shape[-1])
        out = []
        for b in flat:
            c = self.appearance_.get(b.tobytes())
            if c is None:  # an appearance never shown (e.g. a new colour): nearest known shape
                c = self._mask_labels[int(np.argmin((self._masks != self._mask(b)).sum(axis=1)))]
            out.append(c)
        return np.asarray(out, dtype=object).reshape(blocks.shape[:2])

    def _presence(self, frame: np.ndarray) -> np.ndarray:
        seen = set(self.parse(frame).ravel())
        return np.array([c in seen for c in self.classes_], dtype=np.float64)

    def descriptor(self, frame: np.ndarray) -> np.ndarray:
        v = self._presence(frame) * self.idf_
        n = np.linalg.norm(v)
        return v / n if n > 0 else v

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        """``1 - cos`` between two frames' descriptors (accepts frames or descriptors; two blank frames: 0)."""
        da = a if a.ndim == 1 else self.descriptor(a)
        db = b if b.ndim == 1 else self.descriptor(b)
        if not da.any() and not db.any():
            return 0.0
        return float(1.0 - da @ db)
