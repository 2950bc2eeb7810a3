"""Kinematic tabletop pick-and-place: scenes, a pinhole head camera, a scripted expert and an execution check.

The expert moves the end effector through straight minimum-jerk segments between key poses (zero velocity at
each): start -> pre-grasp -> grasp (close, dwell) -> lift -> via over the obstacle -> pre-place -> lower (open,
dwell) -> retreat, with random segment speeds and dwell times, 2 mm position noise, at 30 Hz. The generator
records the key-pose step indices, so keyframe selection can be tested against known segment boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "PinholeCamera",
    "PickPlaceScene",
    "Demo",
    "default_camera",
    "sample_scene",
    "expert_demo",
    "execute_plan",
    "path_rmse",
]

CUBE_HALF = 0.02  # the cube's half size (m); the grasp target is its centre
BIN_RADIUS = 0.06
BIN_HEIGHT = 0.05


def _finite_array(x, name: str, shape: tuple[int | None, ...]) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != len(shape) or any(s is not None and d != s for d, s in zip(a.shape, shape)):
        raise ValueError(f"{name} must have shape {shape} (None = any), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


@dataclass(frozen=True)
class PinholeCamera:
    """A pinhole camera: ``u = fx X/Z + cx``, ``v = fy Y/Z + cy`` in the camera frame; depth is camera-frame z.

    ``rotation`` maps camera-frame vectors to the world (columns: camera x-right, y-down, z-forward in world
    coordinates) and ``position`` is the optical centre in the world. Back-projection inverts it exactly:
    ``P_world = R (depth K^-1 [u, v, 1]) + t``.
    """

    rotation: np.ndarray
    position: np.ndarray
    focal: float = 55.4  # pixels: a 60 degree field of view on a 64-pixel image plane
    width: int = 64
    height: int = 64

    @staticmethod
    def look_at(position, target, focal: float = 55.4, width: int = 64, height: int = 64) -> PinholeCamera:
        """A camera at ``position`` whose optical axis points at ``target`` (world z up)."""
        c = _finite_array(position, "position", (3,))
        forward = _finite_array(target, "target", (3,)) - c
        if np.linalg.norm(forward) < 1e-9:
            raise ValueError("target must differ from position")
        z = forward / np.linalg.norm(forward)
        x = np.cross(z, [0.0, 0.0, 1.0])
        if np.linalg.norm(x) < 1e-9:
            raise ValueError("the optical axis must not be vertical (look_at uses world z as up)")
        x /= np.linalg.norm(x)
        y = np.cross(z, x)
        return PinholeCamera(np.stack([x, y, z], axis=1), c, float(focal), int(width), int(height))

    def yawed(self, degrees: float) -> PinholeCamera:
        """The same camera turned by ``degrees`` about the world vertical through its centre (a calibration error)."""
        a = np.deg2rad(degrees)
        rz = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
        return PinholeCamera(rz @ self.rotation, self.position, self.focal, self.width, self.height)

    def project(self, points) -> tuple[np.ndarray, np.ndarray]:
        """World points (N, 3) -> pixels (N, 2) as (u, v) and depths (N,)."""
        p = _finite_array(points, "points", (None, 3))
        cam = (p - self.position) @ self.rotation  # R^T (p - t), row-wise
        depth = cam[:, 2]
        if np.any(depth <= 0):
            raise ValueError("points must lie in front of the camera (positive depth)")
        uv = self.focal * cam[:, :2] / depth[:, None] + np.array([self.width / 2, self.height / 2])
        return uv, depth

    def back_project(self, uv, depth) -> np.ndarray:
        """Pixels (N, 2) and depths (N,) -> world points (N, 3)."""
        uv = _finite_array(uv, "uv", (None, 2))
        depth = _finite_array(depth, "depth", (len(uv),))
        if np.any(depth <= 0):
            raise ValueError("depth must be positive")
        xy = (uv - np.array([self.width / 2, self.height / 2])) / self.focal * depth[:, None]
        cam = np.column_stack([xy, depth])
        return cam @ self.rotation.T + self.position


def default_camera() -> PinholeCamera:
    """The head camera of the generated scenes: behind and above the table, looking at its centre."""
    return PinholeCamera.look_at([-0.35, 0.03, 0.80], [0.28, 0.03, 0.05])


@dataclass(frozen=True)
class PickPlaceScene:
    """Cube (centre), bin (centre of its floor) and an axis-aligned box obstacle ``[lo, hi]`` on a table at z = 0."""

    cube: np.ndarray
    bin: np.ndarray
    obstacle_lo: np.ndarray
    obstacle_hi: np.ndarray
    start: np.ndarray
    camera: PinholeCamera = field(default_factory=default_camera)

    def anchors(self) -> dict[str, np.ndarray]:
        """Task-relevant anchor points a perception stack would localise: object centres and tops."""
        ob_top = np.array([*(0.5 * (self.obstacle_lo[:2] + self.obstacle_hi[:2])), self.obstacle_hi[2]])
        return {
            "home": self.start.copy(),
            "cube": self.cube.copy(),
            "obstacle": ob_top,
            "bin": self.bin + np.array([0.0, 0.0, BIN_HEIGHT]),
        }


def sample_scene(rng: np.random.Generator) -> PickPlaceScene:
    """A random scene: cube on one side, bin on the other, a tall obstacle between them."""
    cube = np.array([rng.uniform(0.18, 0.38), rng.uniform(-0.28, -0.12), CUBE_HALF])
    bin_ = np.array([rng.uniform(0.18, 0.38), rng.uniform(0.14, 0.28), 0.0])
    mid = 0.5 * (cube[:2] + bin_[:2])
    half = np.array([rng.uniform(0.05, 0.08), rng.uniform(0.025, 0.035)])
    height = rng.uniform(0.13, 0.18)
    lo = np.array([mid[0] - half[0], mid[1] - half[1], 0.0])
    hi = np.array([mid[0] + half[0], mid[1] + half[1], height])
    start = np.array([rng.uniform(0.0, 0.08), rng.uniform(-0.05, 0.05), rng.uniform(0.25, 0.32)])
    return PickPlaceScene(cube, bin_, lo, hi, start)


@dataclass(frozen=True)
class Demo:
    """A dense demonstration: end-effector positions (T, 3), gripper command (T,) in {0 open, 1 closed}."""

    scene: PickPlaceScene
    positions: np.ndarray
    gripper: np.ndarray
    dt: float
    keypose_steps: np.ndarray  # the step at which each key pose is reached (ground-truth segment boundaries)
    clean_positions: np.ndarray  # the expert's positions before the measurement noise

    @property
    def n_steps(self) -> int:
        return len(self.positions)

    def event_steps(self) -> tuple[int, int]:
        """Steps of the close and open events (first step with the new command)."""
        d = np.flatnonzero(np.diff(self.gripper) != 0) + 1
        return int(d[0]), int(d[1])


def _min_jerk(s: np.ndarray) -> np.ndarray:
    return 10 * s**3 - 15 * s**4 + 6 * s**5


def expert_demo(
    scene: PickPlaceScene, rng: np.random.Generator, hz: float = 30.0, noise: float = 0.002
) -> Demo:
    """The scripted expert of the digest on ``scene``, at ``hz`` with Gaussian position noise ``noise`` (m)."""
    if not (hz > 0 and np.isfinite(hz)):
        raise ValueError(f"hz must be positive, got {hz!r}")
    if not (noise >= 0 and np.isfinite(noise)):
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    dt = 1.0 / hz
    transit = scene.obstacle_hi[2] + rng.uniform(0.04, 0.06)
    lift_z = rng.uniform(0.08, 0.10)  # the via point rises 0-2 cm above the transit height
    above = np.array([0.0, 0.0, rng.uniform(0.07, 0.09)])
    release = scene.bin + np.array([0.0, 0.0, BIN_HEIGHT + rng.uniform(0.015, 0.03)])
    ob_mid = 0.5 * (scene.obstacle_lo[:2] + scene.obstacle_hi[:2])
    poses = [
        (scene.start, 0),
        (scene.cube + above, 0),
        (scene.cube, 1),  # close here
        (np.array([*scene.cube[:2], transit]), 1),  # lift clear of the obstacle
        (np.array([*ob_mid, transit + lift_z - 0.08]), 1),  # via point over the obstacle
        (np.array([*scene.bin[:2], transit]), 1),
        (release, 0),  # open here
        (release + np.array([0.0, 0.0, 0.10]), 0),
    ]
    pos, grip, key, length = [scene.start[None, :]], [np.zeros(1)], [0], 1
    for (p0, _), (p1, g1) in zip(poses[:-1], poses[1:]):
        g0 = grip[-1][-1]
        dist = np.linalg.norm(p1 - p0)
        duration = max(dist / rng.uniform(0.15, 0.30), 0.4)
        n = max(int(round(duration / dt)), 2)
        s = np.arange(1, n + 1) / n
        pos.append(p0 + np.outer(_min_jerk(s), p1 - p0))
        grip.append(np.full(n, g0))
        length += n
        key.append(length - 1)  # the step at which the key pose is reached
        if g1 != g0:  # the command switches on arrival, then the gripper dwells
            m = int(round(rng.uniform(0.2, 0.5) / dt))
            pos.append(np.repeat(p1[None, :], m, axis=0))
            grip.append(np.full(m, float(g1)))
            length += m
    positions = np.vstack(pos)
    gripper = np.concatenate(grip)
    noisy = positions + rng.normal(scale=noise, size=positions.shape)
    return Demo(scene, noisy, gripper, dt, np.asarray(key), positions)


def execute_plan(positions, gripper, scene: PickPlaceScene, grasp_tol: float = 0.01) -> dict:
    """Kinematic success of an executed end-effector trajectory on ``scene``.

    Success = the gripper closes once within ``grasp_tol`` (m) of the cube centre, opens once afterwards with the
    cube over the bin floor (inside its radius less the cube half size, below rim + 5 cm), and no sample of the
    path enters the obstacle (inflated by the cube half size while carrying).
    """
    p = _finite_array(positions, "positions", (None, 3))
    g = _finite_array(gripper, "gripper", (len(p),))
    if len(p) < 2:
        raise ValueError("positions must hold at least 2 samples")
    closed = g >= 0.5
    changes = np.flatnonzero(np.diff(closed.astype(int)) != 0) + 1
    out = {"success": False, "grasp_error": np.inf, "release_ok": False, "collision": False}
    if closed[0] or len(changes) < 2 or not closed[changes[0]]:
        return out
    close_i, open_i = int(changes[0]), int(changes[1])
    grasp_error = float(np.linalg.norm(p[close_i] - scene.cube))
    r = p[open_i]
    release_ok = bool(
        np.linalg.norm(r[:2] - scene.bin[:2]) <= BIN_RADIUS - CUBE_HALF and r[2] <= BIN_HEIGHT + 0.05
    )
    carrying = np.zeros(len(p), bool)
    carrying[close_i:open_i] = True
    margin = np.where(carrying, CUBE_HALF, 0.0)[:, None]
    inside = np.all((p > scene.obstacle_lo - margin) & (p < scene.obstacle_hi + margin), axis=1)
    collision = bool(np.any(inside))
    out.update(
        grasp_error=grasp_error,
        release_ok=release_ok,
        collision=collision,
        success=bool(grasp_error <= grasp_tol and release_ok and not collision and len(changes) == 2),
    )
    return out


def _resample_path(p: np.ndarray, step: float) -> np.ndarray:
    seg = np.linalg.norm(np.diff(p, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] == 0:
        return p[:1]
    grid = np.linspace(0.0, s[-1], max(int(np.ceil(s[-1] / step)) + 1, 2))
    return np.column_stack([np.interp(grid, s, p[:, j]) for j in range(p.shape[1])])


def path_rmse(path, reference, step: float = 0.001) -> float:
    """Symmetric RMS distance (m) between two paths, each resampled every ``step`` m of arc length.

    Timing-free on purpose: the detokenizer re-times motion, so what is compared is where the end effector goes.
    """
    from scipy.spatial import cKDTree

    a = _resample_path(_finite_array(path, "path", (None, 3)), step)
    b = _resample_path(_finite_array(reference, "reference", (None, 3)), step)
    da, _ = cKDTree(b).query(a)
    db, _ = cKDTree(a).query(b)
    return float(np.sqrt(0.5 * (np.mean(da**2) + np.mean(db**2))))
