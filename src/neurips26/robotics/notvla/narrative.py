"""The narrative action interface: keyframe selection, anchor-relative waypoint tokens, a spline detokenizer.

``select_keyframes`` narrows a dense end-effector trajectory to a few waypoints (endpoints, gripper events,
stops, sharp turns, then Ramer-Douglas-Peucker pruning that never drops a gripper event). ``NarrativeCodec``
writes each waypoint as five text tokens ``anchor du dv dd gripper``: the waypoint's pixel and depth in the head
camera, relative to the pixel and depth of a task-relevant anchor object (the anchor's depth comes first, the
waypoint's is predicted relative to it). ``SplineDetokenizer`` renders waypoints back to a dense command stream
with no learned parameters: segment durations from distance / speed, a C1 (minimum-jerk: C2) spline in time, the
gripper switched on arrival at a waypoint and held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.signal import savgol_filter

from .scene import PinholeCamera, _finite_array

__all__ = [
    "rdp",
    "select_keyframes",
    "NarrativeCodec",
    "GroundedNarrativeCodec",
    "SplineDetokenizer",
    "Plan",
    "NarrativeActionInterface",
]

GRIPPER_WORDS = ("open", "close")


def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def _segment_distance(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of each point to the segment [a, b]."""
    ab = b - a
    denom = float(ab @ ab)
    s = np.zeros(len(points)) if denom == 0 else np.clip((points - a) @ ab / denom, 0.0, 1.0)
    return np.linalg.norm(points - (a + s[:, None] * ab), axis=1)


def rdp(points, eps: float, keep: Sequence[int] = ()) -> np.ndarray:
    """Ramer-Douglas-Peucker simplification of a polyline; returns the sorted indices kept.

    Every dropped point lies within ``eps`` of the kept segment spanning it. Indices in ``keep`` are never
    dropped (the polyline is simplified between consecutive kept points); the endpoints are always kept.
    """
    p = _finite_array(points, "points", (None, None))
    eps = float(eps)
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    n = len(p)
    if n == 0:
        raise ValueError("points must not be empty")
    forced = sorted({0, n - 1, *(int(k) for k in keep)})
    if forced[0] < 0 or forced[-1] > n - 1:
        raise ValueError(f"keep indices must lie in [0, {n - 1}]")
    kept = np.zeros(n, bool)
    kept[forced] = True
    stack = list(zip(forced[:-1], forced[1:]))
    while stack:
        i, j = stack.pop()
        if j - i < 2:
            continue
        d = _segment_distance(p[i + 1 : j], p[i], p[j])
        m = int(np.argmax(d))
        if d[m] > eps:
            k = i + 1 + m
            kept[k] = True
            stack += [(i, k), (k, j)]
    return np.flatnonzero(kept)


def select_keyframes(
    positions,
    gripper,
    dt: float,
    *,
    v_thr: float = 0.03,
    theta: float = 45.0,
    eps: float = 0.005,
    smooth: int = 7,
    min_gap: float = 0.15,
) -> np.ndarray:
    """Step indices of the narrative waypoints of a dense demo (positions (T, 3), gripper (T,), step ``dt`` s).

    Candidates: the endpoints, every gripper event (first step with the new command), local minima of the
    smoothed speed below ``v_thr`` (m/s: stops and dwells) and turns sharper than ``theta`` degrees between the
    displacement directions ``smooth`` steps before and after; candidates closer than ``min_gap`` seconds are
    merged (events win, then the slowest). The candidate polyline is then pruned by RDP with tolerance ``eps``
    (m), never removing a gripper event. ``smooth`` is the Savitzky-Golay window (odd, >= 3 steps).
    """
    p = _finite_array(positions, "positions", (None, None))
    g = _finite_array(gripper, "gripper", (len(p),))
    dt = _positive(dt, "dt")
    v_thr, theta, min_gap = _positive(v_thr, "v_thr"), _positive(theta, "theta"), float(min_gap)
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if not (np.isfinite(min_gap) and min_gap >= 0):
        raise ValueError(f"min_gap must be a finite number >= 0, got {min_gap!r}")
    if isinstance(smooth, bool) or not isinstance(smooth, (int, np.integer)) or smooth < 3 or smooth % 2 == 0:
        raise ValueError(f"smooth must be an odd integer >= 3, got {smooth!r}")
    n = len(p)
    if n < 2:
        raise ValueError("positions must hold at least 2 steps")
    ps = savgol_filter(p, smooth, 2, axis=0, mode="interp") if n > smooth else p
    speed = np.linalg.norm(np.gradient(ps, dt, axis=0), axis=1)
    events = np.flatnonzero(np.diff(g) != 0) + 1
    inner = np.arange(1, n - 1)
    minima = inner[(speed[1:-1] <= speed[:-2]) & (speed[1:-1] <= speed[2:]) & (speed[1:-1] < v_thr)]
    h = smooth // 2
    turns = []
    if n > 2 * h + 1:
        idx = np.arange(h, n - h)
        a, b = ps[idx] - ps[idx - h], ps[idx + h] - ps[idx]
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        moving = (na > v_thr * dt * h) & (nb > v_thr * dt * h)
        cos = np.einsum("ij,ij->i", a, b) / np.maximum(na * nb, 1e-12)
        turn = moving & (cos < np.cos(np.deg2rad(theta)))
        # one candidate per run of turning steps: the sharpest
        runs = np.split(idx[turn], np.flatnonzero(np.diff(idx[turn]) > 1) + 1) if turn.any() else []
        turns = [int(r[np.argmin(cos[r - h])]) for r in runs if len(r)]
    is_event = np.zeros(n, bool)
    is_event[events] = True
    cands = np.unique(np.concatenate([[0, n - 1], events, minima, np.asarray(turns, int)]))
    # merge clusters of nearby candidates: endpoints and events are kept, otherwise the slowest step
    gap = int(round(min_gap / dt))
    clusters = np.split(cands, np.flatnonzero(np.diff(cands) > gap) + 1)
    merged: list[int] = []
    for cl in clusters:
        fixed = [int(c) for c in cl if c in (0, n - 1) or is_event[c]]
        merged += fixed if fixed else [int(cl[np.argmin(speed[cl])])]
    merged_arr = np.asarray(merged)
    forced = [i for i, c in enumerate(merged_arr) if is_event[c]]
    kept = rdp(ps[merged_arr], eps, keep=forced)
    return merged_arr[kept]


@dataclass(frozen=True)
class NarrativeCodec:
    """Waypoints <-> text tokens ``anchor du dv dd gripper`` in the head camera, relative to an anchor.

    ``du``/``dv`` are the waypoint's pixel offset from the anchor's pixel in 1/``pixel_subdivisions`` pixels,
    ``dd`` its depth minus the anchor's depth in units of ``depth_step`` (m), ``gripper`` is ``open``/``close``.
    Anchors are named world points (object centres, tops) that perception localises in the current image; a
    waypoint's anchor is the nearest one unless given.
    """

    camera: PinholeCamera
    pixel_subdivisions: int = 4
    depth_step: float = 0.001

    def __post_init__(self) -> None:
        if not isinstance(self.camera, PinholeCamera):
            raise TypeError(f"camera must be a PinholeCamera, got {type(self.camera).__name__}")
        s = self.pixel_subdivisions
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(f"pixel_subdivisions must be a positive integer, got {s!r}")
        _positive(self.depth_step, "depth_step")

    tokens_per_waypoint = 5

    @staticmethod
    def _anchors(anchors: Mapping[str, Sequence[float]]) -> tuple[list[str], np.ndarray]:
        if not isinstance(anchors, Mapping) or not anchors:
            raise ValueError("anchors must be a non-empty mapping name -> world point (3,)")
        names = list(anchors)
        for name in names:
            if (
                not isinstance(name, str)
                or not name
                or any(c.isspace() for c in name)
                or name in GRIPPER_WORDS
            ):
                raise ValueError(f"anchor names must be single words other than open/close, got {name!r}")
        pts = np.stack([_finite_array(anchors[k], f"anchors[{k!r}]", (3,)) for k in names])
        return names, pts

    def encode(
        self,
        points,
        gripper,
        anchors: Mapping[str, Sequence[float]],
        *,
        anchor_names: Sequence[str] | None = None,
        depth_noise: float = 0.0,
        rng: np.random.Generator | None = None,
        camera: PinholeCamera | None = None,
    ) -> list[str]:
        """Tokens for waypoints ``points`` (K, 3) with gripper commands (K,) in {0, 1}.

        ``depth_noise`` (m, Gaussian) perturbs every depth reading, waypoint and anchor, at encode time;
        ``camera`` replaces the nominal camera for encoding (e.g. a yawed one, to measure calibration error).
        """
        p = _finite_array(points, "points", (None, 3))
        g = _finite_array(gripper, "gripper", (len(p),))
        if len(p) == 0:
            raise ValueError("points must hold at least one waypoint")
        if not np.all((g == 0) | (g == 1)):
            raise ValueError("gripper commands must be 0 (open) or 1 (close)")
        names, apts = self._anchors(anchors)
        if anchor_names is None:
            which = np.argmin(np.linalg.norm(p[:, None, :] - apts[None], axis=2), axis=1)
        else:
            if len(anchor_names) != len(p) or any(a not in names for a in anchor_names):
                raise ValueError("anchor_names must name one of the anchors for every waypoint")
            which = np.array([names.index(a) for a in anchor_names])
        cam = self.camera if camera is None else camera
        if not (np.isfinite(depth_noise) and depth_noise >= 0):
            raise ValueError(f"depth_noise must be >= 0, got {depth_noise!r}")
        uv_w, d_w = cam.project(p)
        uv_a, d_a = cam.project(apts[which])
        if depth_noise > 0:
            rng = np.random.default_rng() if rng is None else rng
            d_w = d_w + rng.normal(scale=depth_noise, size=d_w.shape)
            d_a = d_a + rng.normal(scale=depth_noise, size=d_a.shape)
        duv = np.rint((uv_w - uv_a) * self.pixel_subdivisions).astype(int)
        dd = np.rint((d_w - d_a) / self.depth_step).astype(int)
        tokens: list[str] = []
        for k in range(len(p)):
            tokens += [names[which[k]], str(duv[k, 0]), str(duv[k, 1]), str(dd[k]), GRIPPER_WORDS[int(g[k])]]
        return tokens

    def decode(
        self, tokens: Sequence[str], anchors: Mapping[str, Sequence[float]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Waypoints (K, 3) and gripper commands (K,) from tokens; raises ValueError on a malformed sequence."""
        if isinstance(tokens, str):
            tokens = tokens.split()
        tokens = list(tokens)
        names, apts = self._anchors(anchors)
        w = self.tokens_per_waypoint
        if len(tokens) == 0 or len(tokens) % w:
            raise ValueError(f"tokens must hold a positive multiple of {w} tokens, got {len(tokens)}")
        rows = [tokens[i : i + w] for i in range(0, len(tokens), w)]
        try:
            which = np.array([names.index(r[0]) for r in rows])
            offs = np.array([[int(r[1]), int(r[2]), int(r[3])] for r in rows], dtype=float)
            g = np.array([GRIPPER_WORDS.index(r[4]) for r in rows], dtype=float)
        except ValueError as err:
            raise ValueError(f"tokens are not 'anchor du dv dd open|close' waypoints: {err}") from None
        uv_a, d_a = self.camera.project(apts[which])
        uv = uv_a + offs[:, :2] / self.pixel_subdivisions
        depth = d_a + offs[:, 2] * self.depth_step
        if np.any(depth <= 0):
            raise ValueError("decoded depth must be positive")
        return self.camera.back_project(uv, depth), g


@dataclass(frozen=True)
class GroundedNarrativeCodec:
    """Waypoints <-> tokens ``anchor U V D du dv dd gripper`` that state the anchor's observed position.

    ``U V`` are the anchor's pixel in 1/``pixel_subdivisions`` pixels and ``D`` its depth in ``depth_step`` units,
    exactly as :meth:`observe` reads them off the head camera (the policy copies them from its observation: APP,
    the anchor's depth first); ``du dv dd`` are the waypoint's offsets from them in the same units. Decoding needs
    the camera only, not the scene: a narrative that does not read the observation lands where it says, so it
    fails on any other scene (unlike :class:`NarrativeCodec`, whose decoder looks the anchors up).
    """

    camera: PinholeCamera
    pixel_subdivisions: int = 4
    depth_step: float = 0.001

    tokens_per_waypoint = 8

    def __post_init__(self) -> None:
        if not isinstance(self.camera, PinholeCamera):
            raise TypeError(f"camera must be a PinholeCamera, got {type(self.camera).__name__}")
        s = self.pixel_subdivisions
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(f"pixel_subdivisions must be a positive integer, got {s!r}")
        _positive(self.depth_step, "depth_step")

    def _quantise(self, points: np.ndarray) -> np.ndarray:
        uv, d = self.camera.project(points)
        return np.column_stack([np.rint(uv * self.pixel_subdivisions), np.rint(d / self.depth_step)]).astype(
            int
        )

    def observe(self, anchors: Mapping[str, Sequence[float]]) -> dict[str, tuple[int, int, int]]:
        """The observation of each anchor: ``name -> (U, V, D)`` in the codec's integer units."""
        names, pts = NarrativeCodec._anchors(anchors)
        q = self._quantise(pts)
        return {n: (int(q[k, 0]), int(q[k, 1]), int(q[k, 2])) for k, n in enumerate(names)}

    def encode(
        self,
        points,
        gripper,
        anchors: Mapping[str, Sequence[float]],
        *,
        anchor_names: Sequence[str] | None = None,
    ) -> list[str]:
        """Tokens for waypoints ``points`` (K, 3) with gripper commands (K,) in {0, 1}; nearest anchor unless named."""
        p = _finite_array(points, "points", (None, 3))
        g = _finite_array(gripper, "gripper", (len(p),))
        if len(p) == 0:
            raise ValueError("points must hold at least one waypoint")
        if not np.all((g == 0) | (g == 1)):
            raise ValueError("gripper commands must be 0 (open) or 1 (close)")
        names, apts = NarrativeCodec._anchors(anchors)
        if anchor_names is None:
            which = np.argmin(np.linalg.norm(p[:, None, :] - apts[None], axis=2), axis=1)
        else:
            if len(anchor_names) != len(p) or any(a not in names for a in anchor_names):
                raise ValueError("anchor_names must name one of the anchors for every waypoint")
            which = np.array([names.index(a) for a in anchor_names])
        qa, qw = self._quantise(apts), self._quantise(p)
        tokens: list[str] = []
        for k in range(len(p)):
            a = qa[which[k]]
            off = qw[k] - a
            tokens += [names[which[k]], *map(str, a), *map(str, off), GRIPPER_WORDS[int(g[k])]]
        return tokens

    def decode(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Waypoints (K, 3) and gripper commands (K,) from tokens alone; ValueError on a malformed sequence."""
        if isinstance(tokens, str):
            tokens = tokens.split()
        tokens = list(tokens)
        w = self.tokens_per_waypoint
        if len(tokens) == 0 or len(tokens) % w:
            raise ValueError(f"tokens must hold a positive multiple of {w} tokens, got {len(tokens)}")
        rows = [tokens[i : i + w] for i in range(0, len(tokens), w)]
        try:
            nums = np.array([[int(x) for x in r[1:7]] for r in rows], dtype=float)
            g = np.array([GRIPPER_WORDS.index(r[7]) for r in rows], dtype=float)
        except ValueError as err:
            raise ValueError(f"tokens are not 'anchor U V D du dv dd open|close' waypoints: {err}") from None
        if any(r[0] in GRIPPER_WORDS or r[0].lstrip("-").isdigit() for r in rows):
            raise ValueError("tokens: each waypoint must start with an anchor name")
        q = nums[:, :3] + nums[:, 3:]
        depth = q[:, 2] * self.depth_step
        if np.any(depth <= 0):
            raise ValueError("decoded depth must be positive")
        return self.camera.back_project(q[:, :2] / self.pixel_subdivisions, depth), g


@dataclass(frozen=True)
class Plan:
    """A rendered plan: knot times, and the dense stream sampled at the control rate."""

    knot_times: np.ndarray
    times: np.ndarray
    positions: np.ndarray
    gripper: np.ndarray
    _segments: tuple  # (t0, t1, p0, p1) per motion or hold segment
    _pchip: PchipInterpolator | None

    def position(self, t) -> np.ndarray:
        """Position at times ``t`` (clamped to the plan's span)."""
        t = np.clip(np.atleast_1d(np.asarray(t, dtype=float)), 0.0, self.knot_times[-1])
        if self._pchip is not None:
            return self._pchip(t)
        out = np.empty((len(t), 3))
        starts = np.array([s[0] for s in self._segments])
        k = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(self._segments) - 1)
        for i in np.unique(k):
            t0, t1, p0, p1 = self._segments[i]
            sel = k == i
            s = np.clip((t[sel] - t0) / (t1 - t0), 0.0, 1.0)
            out[sel] = p0 + np.outer(10 * s**3 - 15 * s**4 + 6 * s**5, p1 - p0)
        return out


@dataclass(frozen=True)
class SplineDetokenizer:
    """Deterministic waypoint renderer (no learned parameters).

    Segment ``i -> i+1`` lasts ``max(|p_{i+1} - p_i| / speed, min_segment)`` s. ``interpolation="min_jerk"``
    (default) moves along the straight segment with a quintic minimum-jerk profile (zero velocity and
    acceleration at every waypoint: C2); ``"pchip"`` passes through the waypoints with a shape-preserving cubic
    in time (C1, no overshoot, faster: it does not stop at via points). On arrival at a waypoint whose gripper
    command differs from the previous one the command switches and the pose is held ``hold`` s.
    """

    control_hz: float = 30.0
    speed: float = 0.2
    min_segment: float = 0.3
    hold: float = 0.3
    interpolation: str = "min_jerk"

    def __post_init__(self) -> None:
        _positive(self.control_hz, "control_hz")
        _positive(self.speed, "speed")
        _positive(self.min_segment, "min_segment")
        if not (np.isfinite(self.hold) and self.hold >= 0):
            raise ValueError(f"hold must be a finite number >= 0, got {self.hold!r}")
        if self.interpolation not in ("min_jerk", "pchip"):
            raise ValueError(f"interpolation must be 'min_jerk' or 'pchip', got {self.interpolation!r}")

    def render(self, points, gripper) -> Plan:
        """Render waypoints (K, 3) with gripper commands (K,) into a :class:`Plan` at ``control_hz``."""
        p = _finite_array(points, "points", (None, 3))
        g = _finite_array(gripper, "gripper", (len(p),))
        if len(p) < 2:
            raise ValueError("points must hold at least 2 waypoints")
        segments, knots, t = [], [(0.0, p[0])], 0.0
        arrivals = [0.0]
        for i in range(1, len(p)):
            dur = max(float(np.linalg.norm(p[i] - p[i - 1])) / self.speed, self.min_segment)
            segments.append((t, t + dur, p[i - 1], p[i]))
            t += dur
            arrivals.append(t)
            knots.append((t, p[i]))
            if g[i] != g[i - 1] and self.hold > 0:
                segments.append((t, t + self.hold, p[i], p[i]))
                t += self.hold
                knots.append((t, p[i]))
        knot_t = np.array([k[0] for k in knots])
        pchip = (
            PchipInterpolator(knot_t, np.stack([k[1] for k in knots]), axis=0)
            if self.interpolation == "pchip"
            else None
        )
        dt = 1.0 / self.control_hz
        times = np.arange(0.0, t + 0.5 * dt, dt)
        times[-1] = min(times[-1], t)
        # the command of the last waypoint reached (arrival times are exact knots, sampled when on the grid)
        reached = np.searchsorted(np.array(arrivals), times + 1e-9, side="right") - 1
        plan = Plan(knot_t, times, np.empty((0, 3)), g[reached], tuple(segments), pchip)
        object.__setattr__(plan, "positions", plan.position(times))
        return plan


@dataclass(frozen=True)
class NarrativeActionInterface:
    """Dense demo -> narrative tokens -> dense commands: keyframes, anchor-relative tokens, spline rendering.

    ``encode(positions, gripper, dt, anchors)`` returns the token list (5 per waypoint); ``decode(tokens,
    anchors)`` returns a :class:`Plan` at the detokenizer's control rate. Waypoint positions are read from the
    Savitzky-Golay-smoothed trajectory that keyframe selection uses.
    """

    camera: PinholeCamera
    v_thr: float = 0.03
    theta: float = 45.0
    eps: float = 0.005
    smooth: int = 7
    min_gap: float = 0.15
    pixel_subdivisions: int = 4
    depth_step: float = 0.001
    detokenizer: SplineDetokenizer = SplineDetokenizer()

    def __post_init__(self) -> None:
        if not isinstance(self.detokenizer, SplineDetokenizer):
            raise TypeError(f"detokenizer must be a SplineDetokenizer, got {type(self.detokenizer).__name__}")
        object.__setattr__(
            self, "codec", NarrativeCodec(self.camera, self.pixel_subdivisions, self.depth_step)
        )

    def keyframes(self, positions, gripper, dt: float) -> np.ndarray:
        return select_keyframes(
            positions,
            gripper,
            dt,
            v_thr=self.v_thr,
            theta=self.theta,
            eps=self.eps,
            smooth=self.smooth,
            min_gap=self.min_gap,
        )

    def encode(
        self, positions, gripper, dt: float, anchors: Mapping[str, Sequence[float]], **codec_kw
    ) -> list[str]:
        """Narrative tokens of a dense demo; ``codec_kw`` go to :meth:`NarrativeCodec.encode` (e.g. depth_noise)."""
        return self.codec.encode(*self.waypoints(positions, gripper, dt), anchors, **codec_kw)

    def waypoints(self, positions, gripper, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """The selected waypoints (K, 3), read from the smoothed trajectory, and their gripper commands (K,)."""
        idx = self.keyframes(positions, gripper, dt)
        p = np.asarray(positions, dtype=float)
        ps = savgol_filter(p, self.smooth, 2, axis=0, mode="interp") if len(p) > self.smooth else p
        g = (np.asarray(gripper, dtype=float)[idx] >= 0.5).astype(float)
        return ps[idx], g

    def decode(self, tokens: Sequence[str], anchors: Mapping[str, Sequence[float]]) -> Plan:
        points, g = self.codec.decode(tokens, anchors)
        return self.detokenizer.render(points, g)
