"""Synthetic worlds for NextLat's experiment: a hidden-grid walk and path-star graphs.

**Hidden-grid walk** (:func:`grid_walk`). An agent starts on a random cell of an ``n x n`` grid (the first token
names the cell) and moves N/E/S/W, uniformly among the moves that stay on the grid; after each move, with
probability ``p_obs``, the sequence shows an aliased observation: the colour of the current row, with fewer colours
than rows (``row % n_colours``). The true cell is the latent state: the next-token distribution depends on it
(walls forbid moves; the colour names the row up to aliasing), so a model that tracks the cell predicts best.

**Path-star graphs** (:func:`path_star`, Bachmann & Nagarajan 2024). A centre node with ``degree`` arms of
``arm_length`` nodes; the prompt lists the edges in random order, then the start (centre) and the goal (the end
of one arm); the answer is the path from the centre to the goal. Next-token training learns the "Clever Hans"
shortcut for every step but the first, whose accuracy sits near 1/degree unless the model plans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tokenizers import WordTokenizer

__all__ = ["GridWalk", "PathStar", "grid_walk", "path_star"]

MOVES = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}


@dataclass
class GridWalk:
    """Token sequences (N, L) of the walk, the true cell after each token (N, L), and the tokenizer."""

    tokens: np.ndarray
    cells: np.ndarray  # cell index row * size + col after each token
    tokenizer: WordTokenizer
    size: int
    n_colours: int


def grid_tokenizer(size: int = 6, n_colours: int = 3) -> WordTokenizer:
    cells = [f"cell{r}_{c}" for r in range(size) for c in range(size)]
    return WordTokenizer(cells + list(MOVES) + [f"colour{k}" for k in range(n_colours)])


def grid_walk(
    n_sequences: int,
    length: int = 64,
    size: int = 6,
    n_colours: int = 3,
    p_obs: float = 0.2,
    rng: np.random.Generator | int | None = None,
) -> GridWalk:
    """``n_sequences`` walks of ``length`` tokens (the first names the start cell); see the module docstring."""
    for name, v, lo in (
        ("n_sequences", n_sequences, 1),
        ("length", length, 2),
        ("size", size, 2),
        ("n_colours", n_colours, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if n_colours > size:
        raise ValueError(f"n_colours must be <= size ({size}), got {n_colours}")
    if not 0.0 <= p_obs < 1.0:
        raise ValueError(f"p_obs must be in [0, 1), got {p_obs!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    tok = grid_tokenizer(size, n_colours)
    move_ids = np.array([tok.encode(m)[0] for m in MOVES])
    colour0 = tok.encode("colour0")[0]
    deltas = np.array(list(MOVES.values()))
    tokens = np.empty((n_sequences, length), dtype=np.int64)
    cells = np.empty((n_sequences, length), dtype=np.int64)
    row = rng.integers(0, size, n_sequences)
    col = rng.integers(0, size, n_sequences)
    tokens[:, 0] = row * size + col  # cell tokens come first in the vocabulary
    cells[:, 0] = row * size + col
    just_moved = np.zeros(n_sequences, dtype=bool)
    for t in range(1, length):
        observe = just_moved & (rng.random(n_sequences) < p_obs)
        # valid moves keep the agent on the grid; pick one uniformly (vectorised over sequences)
        nr, nc = row[:, None] + deltas[None, :, 0], col[:, None] + deltas[None, :, 1]
        valid = (nr >= 0) & (nr < size) & (nc >= 0) & (nc < size)
        scores = np.where(valid, rng.random((n_sequences, 4)), -1.0)
        move = scores.argmax(1)
        row = np.where(observe, row, row + deltas[move, 0])
        col = np.where(observe, col, col + deltas[move, 1])
        tokens[:, t] = np.where(observe, colour0 + row % n_colours, move_ids[move])
        cells[:, t] = row * size + col
        just_moved = ~observe
    return GridWalk(tokens, cells, tok, size, n_colours)


@dataclass
class PathStar:
    """Prompt + answer token sequences (N, L), the answer mask (N, L - 1) for the targets, the index of the
    first answer step's target, and the degree."""

    tokens: np.ndarray
    answer_mask: np.ndarray
    first_step: int  # target index (into y = tokens[:, 1:]) of the first node after the centre
    degree: int
    n_nodes: int


def path_star(
    n_sequences: int,
    degree: int = 3,
    arm_length: int = 5,
    n_nodes: int = 40,
    rng: np.random.Generator | int | None = None,
) -> PathStar:
    """Path-star tasks over ``n_nodes`` node labels (random labels each sequence).

    Vocabulary: node ids ``0 .. n_nodes - 1``, then ``EDGE`` (separator), ``QUERY`` and ``ANS``. Sequence:
    ``[u v EDGE] * edges, QUERY, start, goal, ANS, start, n_1, ..., goal``.
    """
    for name, v, lo in (
        ("n_sequences", n_sequences, 1),
        ("degree", degree, 2),
        ("arm_length", arm_length, 2),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if n_nodes < 1 + degree * arm_length:
        raise ValueError(
            f"n_nodes must be >= 1 + degree * arm_length = {1 + degree * arm_length}, got {n_nodes}"
        )
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    EDGE, QUERY, ANS = n_nodes, n_nodes + 1, n_nodes + 2
    n_edges = degree * arm_length
    L = 3 * n_edges + 4 + arm_length + 1
    tokens = np.empty((n_sequences, L), dtype=np.int64)
    for i in range(n_sequences):
        labels = rng.permutation(n_nodes)[: 1 + n_edges]
        centre, arms = labels[0], labels[1:].reshape(degree, arm_length)
        edges = [(centre, arm[0]) for arm in arms] + [
            (arm[k], arm[k + 1]) for arm in arms for k in range(arm_length - 1)
        ]
        order = rng.permutation(len(edges))
        goal_arm = int(rng.integers(degree))
        seq = []
        for e in order:
            seq += [int(edges[e][0]), int(edges[e][1]), EDGE]
        seq += [QUERY, int(centre), int(arms[goal_arm, -1]), ANS, int(centre)] + [
            int(v) for v in arms[goal_arm]
        ]
        tokens[i] = seq
    answer_start = 3 * n_edges + 4  # index of the centre after ANS
    mask = np.zeros((n_sequences, L - 1), dtype=bool)
    mask[:, answer_start:] = True  # targets tokens[answer_start + 1:] = the path after the centre
    return PathStar(tokens, mask, answer_start, degree, n_nodes)
