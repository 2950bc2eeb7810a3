"""MiniGrid task families, the shared low-level controller and the state-aware scripted expert.

Every agent (no-skill, text-only, MMSkills branch, direct injection) drives the environment through the same
:class:`Controller`, which turns one subgoal token (``pickup:key``, ``unlock:door``, ``drop``, ``goal``, ...) into
primitive actions by a shortest path (Dijkstra over cell x heading; closed unlocked doors are opened on the way,
locked doors are walls). Only what the agents know about the task differs between arms.

Episodes start at random stages (key already held, door already open, key dropped, ...): the expert is
fast-forwarded through the first stages and the agent is then walked a few random steps, mimicking an app left
in an arbitrary state. Frames are MiniGrid's own headless renders (``get_frame``, no window).
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "FAMILIES",
    "Controller",
    "EpisodeSpec",
    "Family",
    "abstract_state",
    "expert_remaining",
    "make_env",
    "render",
    "start_episode",
]

ABSENT = ("search", "free")
TILE = 8  # pixels per grid cell in rendered frames ("downsampled frames")
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE = 0, 1, 2, 3, 4, 5
DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid headings: right, down, left, up


@dataclass(frozen=True)
class Family:
    """A task family: the MiniGrid environment and its canonical procedure (the expert's subgoal order)."""

    name: str
    env_id: str
    procedure: tuple[str, ...]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("doorkey", "MiniGrid-DoorKey-8x8-v0", ("pickup:key", "unlock:door", "goal")),
        Family(
            "unlockpickup", "MiniGrid-UnlockPickup-v0", ("pickup:key", "unlock:door", "drop", "pickup:box")
        ),
        Family(
            "keycorridor", "MiniGrid-KeyCorridorS4R3-v0", ("pickup:key", "unlock:door", "drop", "pickup:ball")
        ),
        Family("unlock", "MiniGrid-Unlock-v0", ("pickup:key", "unlock:door")),
        Family("lockedroom", "MiniGrid-LockedRoom-v0", ("pickup:key", "unlock:door", "goal")),
    )
}


def make_env(family: str, seed: int) -> Any:
    """The unwrapped MiniGrid env, reset with ``seed``; observations are not generated (agents read the grid
    through the controller and frames through :func:`render`), which makes a step ~30x cheaper. One instance
    per family is reused, so a previous episode's env is invalid after the next call."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the MiniGrid environments)

    env = _ENVS.get(family)
    if env is None:  # one instance per family, re-laid out by reset(seed): gym.make is the slow part
        env = gym.make(FAMILIES[family].env_id, render_mode="rgb_array").unwrapped
        env.gen_obs = lambda: None
        _ENVS[family] = env
    env.reset(seed=int(seed))
    env.max_steps = 10**6  # the experiment's step budget decides, not the env's
    return env


_ENVS: dict[str, Any] = {}


def render(env: Any) -> np.ndarray:
    """Full-grid RGB frame (uint8, ``TILE`` pixels per cell), without the agent's view highlight."""
    return env.get_frame(highlight=False, tile_size=TILE)


def _objects(env: Any) -> list[tuple[int, int, Any]]:
    g = env.grid
    return [(x, y, o) for x in range(g.width) for y in range(g.height) if (o := g.get(x, y)) is not None]


def abstract_state(env: Any) -> tuple:
    """What a task stage depends on: carried object, locked and open door counts, object types on the floor."""
    carried = env.carrying.type if env.carrying is not None else None
    objs = _objects(env)
    locked = sum(1 for *_, o in objs if o.type == "door" and o.is_locked)
    opened = sum(1 for *_, o in objs if o.type == "door" and o.is_open)
    floor = tuple(sorted(o.type for *_, o in objs if o.type in ("key", "ball", "box")))
    return carried, locked, opened, floor


def positions(env: Any) -> dict[str, list[tuple[int, int]]]:
    """Cells of each task object type (the audit card's grounding)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for x, y, o in _objects(env):
        if o.type in ("key", "ball", "box", "goal") or (o.type == "door" and o.is_locked):
            out.setdefault("door" if o.type == "door" else o.type, []).append((x, y))
    return out


# --- the shared low-level controller ------------------------------------------------------------------------------
class Controller:
    """Executes one subgoal with primitive MiniGrid actions along a shortest path; shared by every agent."""

    def __init__(self, env: Any, absent: str = "search") -> None:
        if absent not in ABSENT:
            raise ValueError(f"absent must be one of {ABSENT}, got {absent!r}")
        self.env = env
        self.absent = absent
        self.steps = 0
        self.terminated = False
        self.reward = 0.0

    def act(self, action: int) -> None:
        _, reward, terminated, _, _ = self.env.step(action)
        self.steps += 1
        if terminated:
            self.terminated = True
            self.reward = float(reward)

    def _plan(self, accept, budget: int) -> list[int] | None:
        """Cheapest action sequence to a (pos, heading) accepted by ``accept``; None when unreachable."""
        env, g = self.env, self.env.grid
        start = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
        dist = {start: 0}
        prev: dict[tuple, tuple[tuple, tuple[int, ...]]] = {}
        heap = [(0, start)]
        while heap:
            d, s = heapq.heappop(heap)
            if d > dist.get(s, 1 << 30) or d > budget:
                continue
            x, y, h = s
            if accept(x, y, h):
                path: list[int] = []
                while s != start:
                    s, acts = prev[s]
                    path[:0] = acts
                return path
            moves = [((x, y, (h - 1) % 4), (LEFT,)), ((x, y, (h + 1) % 4), (RIGHT,))]
            nx, ny = x + DIRS[h][0], y + DIRS[h][1]
            if 0 <= nx < g.width and 0 <= ny < g.height:
                cell = g.get(nx, ny)
                if cell is None or cell.can_overlap():
                    if cell is None or cell.type != "lava":
                        moves.append(((nx, ny, h), (FORWARD,)))
                elif cell.type == "door" and not cell.is_locked and not cell.is_open:
                    moves.append(((nx, ny, h), (TOGGLE, FORWARD)))
            for t, acts in moves:
                nd = d + len(acts)
                if nd < dist.get(t, 1 << 30):
                    dist[t] = nd
                    prev[t] = (s, acts)
                    heapq.heappush(heap, (nd, t))
        return None

    def _run(self, actions: list[int], budget: int) -> bool:
        for a in actions:
            if self.steps >= budget or self.terminated:
                return False
            self.act(a)
        return True

    def _face(self, cells: list[tuple[int, int]], budget: int) -> bool:
        """Walk to a cell adjacent to one of ``cells``, facing it."""
        targets = set(cells)

        def accept(x, y, h):
            return (x + DIRS[h][0], y + DIRS[h][1]) in targets

        plan = self._plan(accept, budget - self.steps)
        return plan is not None and self._run(plan, budget)

    def search(self, budget: int) -> None:
        """Look for a target that is not there: walk to the farthest reachable cell (MiniGrid agents see a 7x7
        egocentric view, so absence is only known after looking around)."""
        if self.absent == "free":
            return
        best: list[int] = []

        env = self.env
        start = (int(env.agent_pos[0]), int(env.agent_pos[1]))
        reach = self._reachable()
        if reach:
            far = max(reach, key=lambda c: (reach[c], c))
            if far != start:
                best = self._plan(lambda x, y, h: (x, y) == far, budget - self.steps) or []
        self._run(best, budget)

    def _reachable(self) -> dict[tuple[int, int], int]:
        """Walking distance (cells) to every reachable cell, closed doors passable."""
        env, g = self.env, self.env.grid
        start = (int(env.agent_pos[0]), int(env.agent_pos[1]))
        dist = {start: 0}
        frontier = [start]
        while frontier:
            nxt = []
            for x, y in frontier:
                for dx, dy in DIRS:
                    c = (x + dx, y + dy)
                    if c in dist or not (0 <= c[0] < g.width and 0 <= c[1] < g.height):
                        continue
                    o = g.get(*c)
                    if o is None or o.can_overlap() or (o.type == "door" and not o.is_locked):
                        if o is not None and o.type in ("goal", "lava"):
                            continue
                        dist[c] = dist[(x, y)] + 1
                        nxt.append(c)
            frontier = nxt
        return dist

    def _cut_cells(self) -> set[tuple[int, int]]:
        """Articulation points of the walkable cells (closed doors walkable): dropping an object there would
        disconnect the grid."""
        import networkx as nx

        g = self.env.grid
        walk = set()
        for x in range(g.width):
            for y in range(g.height):
                o = g.get(x, y)
                if o is None or o.can_overlap() or (o.type == "door" and not o.is_locked):
                    walk.add((x, y))
        walk.add((int(self.env.agent_pos[0]), int(self.env.agent_pos[1])))
        graph = nx.Graph()
        graph.add_nodes_from(walk)
        graph.add_edges_from(((x, y), (x + 1, y)) for x, y in walk if (x + 1, y) in walk)
        graph.add_edges_from(((x, y), (x, y + 1)) for x, y in walk if (x, y + 1) in walk)
        return set(nx.articulation_points(graph))

    def execute(self, token: str, budget: int, at: list[tuple[int, int]] | None = None) -> bool:
        """Run subgoal ``token``; ``at`` overrides where the target is believed to be (direct injection).

        Returns whether the subgoal's effect happened. A subgoal whose target is absent first costs a search
        (:meth:`search`; free with ``absent="free"``), an unreachable one fails at no cost, one that runs out of
        budget fails where it stands.
        """
        env = self.env
        kind, _, what = token.partition(":")
        if kind == "pickup":
            cells = (
                at
                if at is not None
                else [
                    (x, y)
                    for x, y, o in _objects(env)
                    if (o.type == what or (what == "nearest" and o.can_pickup()))
                ]
            )
            if not cells:
                self.search(budget)
                return False
            if not self._face(cells, budget):
                return False
            if self.steps >= budget:
                return False
            held = env.carrying
            self.act(PICKUP)  # with full hands MiniGrid's pickup does nothing, as for a real agent
            return (
                held is None and env.carrying is not None and (what == "nearest" or env.carrying.type == what)
            )
        if kind in ("unlock", "open"):
            cells = (
                at
                if at is not None
                else [
                    (x, y)
                    for x, y, o in _objects(env)
                    if o.type == "door" and (o.is_locked or (kind == "open" and not o.is_open))
                ]
            )
            if not cells:
                self.search(budget)
                return False
            if not self._face(cells, budget) or self.steps >= budget:
                return False
            fx, fy = env.front_pos
            door = env.grid.get(int(fx), int(fy))
            if door is None or door.type != "door":
                return False
            was_locked = door.is_locked
            self.act(TOGGLE)
            return door.is_open and (was_locked or kind == "open")
        if kind == "drop":
            if env.carrying is None:
                return False
            g = env.grid
            doors = {(x, y) for x, y, o in _objects(env) if o.type == "door"}
            near_door = {(x + dx, y + dy) for x, y in doors for dx, dy in DIRS} | doors
            cut = self._cut_cells()

            def free_front(x, y, h):
                # never drop in or next to a doorway, nor on a cell whose blocking would cut the free space
                fx, fy = x + DIRS[h][0], y + DIRS[h][1]
                return (
                    (x, y) not in doors
                    and 0 <= fx < g.width
                    and 0 <= fy < g.height
                    and g.get(fx, fy) is None
                    and (fx, fy) not in near_door
                    and (fx, fy) not in cut
                )

            plan = self._plan(free_front, budget - self.steps)
            if plan is None or not self._run(plan, budget) or self.steps >= budget:
                return False
            self.act(DROP)
            return env.carrying is None
        if kind == "goal":
            cells = at if at is not None else [(x, y) for x, y, o in _objects(env) if o.type == "goal"]
            if not cells:
                self.search(budget)
                return False
            targets = set(cells)
            plan = self._plan(lambda x, y, h: (x, y) in targets, budget - self.steps)
            return plan is not None and self._run(plan, budget) and self.terminated
        raise ValueError(f"unknown subgoal {token!r}")


# --- the state-aware expert and random start stages ----------------------------------------------------------------
def expert_stage(env: Any, family: str) -> int:
    """Index of the next canonical step, read from the state (the expert knows where it is)."""
    proc = FAMILIES[family].procedure
    carried = env.carrying.type if env.carrying is not None else None
    locked = any(o.type == "door" and o.is_locked for *_, o in _objects(env))
    if locked:
        return 1 if carried == "key" else 0
    if "drop" in proc:
        return 2 if carried == "key" else 3
    return proc.index("unlock:door") + 1


def expert_remaining(env: Any, family: str) -> list[str]:
    return list(FAMILIES[family].procedure[expert_stage(env, family) :])


@dataclass(frozen=True)
class EpisodeSpec:
    """One evaluation (or generator) episode: layout seed, start stage and the random walk after it."""

    family: str
    seed: int
    start_stage: int = 0
    walk: int = 0  # number of random moves after fast-forwarding
    walk_seed: int = 0

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {self.family!r}")
        for name in ("seed", "start_stage", "walk", "walk_seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        n = len(FAMILIES[self.family].procedure)
        if self.start_stage >= n:
            raise ValueError(
                f"start_stage must be below {n} (the {self.family!r} procedure's steps), got {self.start_stage}"
            )


def start_episode(spec: EpisodeSpec, absent: str = "search") -> tuple[Any, Controller]:
    """The env in the spec's start state (deterministic), with a fresh controller (step count 0)."""
    env = make_env(spec.family, spec.seed)
    ctl = Controller(env, absent="free")
    proc = FAMILIES[spec.family].procedure
    for token in proc[: spec.start_stage]:
        if not ctl.execute(token, budget=10**6):
            raise RuntimeError(f"expert could not fast-forward {spec} at {token}")
    rng = np.random.default_rng(spec.walk_seed)
    for _ in range(spec.walk):
        a = int(rng.choice([LEFT, RIGHT, FORWARD]))
        fx, fy = env.front_pos
        cell = env.grid.get(int(fx), int(fy))
        if a == FORWARD and cell is not None and cell.type == "goal":
            continue
        ctl.act(a)
    return env, Controller(env, absent=absent)


def optimal_steps(spec: EpisodeSpec) -> int:
    """Steps the state-aware expert needs from the spec's start state."""
    env, ctl = start_episode(spec)
    for token in expert_remaining(env, spec.family):
        ctl.execute(token, budget=10**6)
    if not ctl.terminated:
        raise RuntimeError(f"the expert does not solve {spec}")
    return ctl.steps
