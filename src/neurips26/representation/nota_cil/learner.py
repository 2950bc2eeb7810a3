"""Rehearsal-free class-incremental learning on a frozen backbone with per-task adapters.

``ClassIncrementalLearner`` copies a user's backbone (any ``nn.Module``), wraps every ``nn.Linear`` in it (or the
ones named) in an :class:`AdaptedLinear`, and learns tasks one at a time: a new adapter per layer, a new
classifier block for the task's new classes, cross-entropy with logits masked to the current task's classes,
earlier adapters and classifier blocks frozen, no stored data. Inference uses one merged weight per layer and a
classifier over every class seen so far (no task identity).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .adapters import ADAPTERS, NORMALIZATIONS, AdaptedLinear


def mlp_backbone(in_dim: int = 64, hidden: Sequence[int] = (128, 128), seed: int = 0) -> nn.Sequential:
    """An MLP encoder in_dim -> hidden[0] -> ... with GELU after every layer (torch's global RNG is left as is)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _mlp(in_dim, hidden)


def _mlp(in_dim: int, hidden: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = in_dim
    for h in hidden:
        layers += [nn.Linear(d, h), nn.GELU()]
        d = h
    return nn.Sequential(*layers)


def pretrain_denoising_autoencoder(
    X: np.ndarray,
    hidden: Sequence[int] = (128, 128),
    epochs: int = 40,
    noise: float = 0.3,
    lr: float = 3e-3,
    batch_size: int = 128,
    seed: int = 0,
) -> nn.Sequential:
    """Label-free pre-training: an MLP encoder trained to reconstruct X from X + Gaussian noise, returned frozen."""
    X = _features(X)
    if not noise >= 0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    with torch.random.fork_rng(devices=[]):  # seeded initialisation; torch's global RNG is left as is
        torch.manual_seed(int(seed))
        enc = _mlp(X.shape[1], hidden)
        dec = nn.Linear(hidden[-1], X.shape[1])
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=lr)
    x = torch.from_numpy(X)
    g = torch.Generator().manual_seed(int(seed))
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), batch_size):
            xb = x[perm[i : i + batch_size]]
            noisy = xb + noise * torch.randn(xb.shape, generator=g)
            loss = F.mse_loss(dec(enc(noisy)), xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p in enc.parameters():
        p.requires_grad_(False)
    return enc.eval()


def _features(X: np.ndarray) -> np.ndarray:
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float32))
    if X.ndim != 2 or len(X) == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n_samples, n_features), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite")
    return X


def _check_task(task: int | None, task_classes: list[list]) -> list:
    if task is None:
        return []
    if isinstance(task, bool) or not isinstance(task, (int, np.integer)) or not 0 <= task < len(task_classes):
        raise ValueError(
            f"task must be None or a learned task's index in [0, {len(task_classes) - 1}], got {task!r}"
        )
    return task_classes[task]


class CosineHead(nn.Module):
    """Logits s * cos(h, w_c): feature and class-weight norms cannot favour the latest task's classes."""

    def __init__(self, in_features: int, n_classes: int, scale: float = 16.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_classes, in_features) / in_features**0.5)
        self.scale = float(scale)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.scale * F.normalize(h, dim=1) @ F.normalize(self.weight, dim=1).T


class ClassIncrementalLearner:
    """Task-by-task rehearsal-free CIL with adapters on a frozen backbone (see the module docstring).

    Parameters
    ----------
    backbone : a pre-trained ``nn.Module`` mapping (n, d) inputs to (n, k) features; it is copied, not modified.
    adapter, normalization, rank, shared, modulation, learn_gamma, train_old_alphas : see :class:`AdaptedLinear`;
        defaults are NoTA (MPO adapter, global normalisation, bond dimension 4).
    layers : names of the ``nn.Linear`` modules to adapt (default: all of them).
    epochs, lr, head_lr, batch_size : per-task training (Adam; adapters at lr, the new classifier block at head_lr).
    head : "cosine" (default: scaled cosine logits, no norm advantage for recent classes) or "linear".
    head_scale : the cosine head's logit scale.
    seed : adapter initialisation and mini-batch order.
    """

    def __init__(
        self,
        backbone: nn.Module,
        adapter: str = "mpo",
        normalization: str = "global",
        rank: int = 4,
        shared: bool = False,
        modulation: bool = False,
        learn_gamma: bool = False,
        train_old_alphas: bool = True,
        layers: Sequence[str] | None = None,
        epochs: int = 30,
        lr: float = 1e-3,
        head_lr: float = 1e-2,
        batch_size: int = 64,
        head: str = "cosine",
        head_scale: float = 16.0,
        seed: int = 0,
    ):
        if not isinstance(backbone, nn.Module):
            raise TypeError(f"backbone must be a torch nn.Module, got {type(backbone).__name__}")
        if adapter not in ADAPTERS:
            raise ValueError(f"adapter must be one of {ADAPTERS}, got {adapter!r}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
        for name, v in (("epochs", epochs), ("batch_size", batch_size), ("rank", rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if not lr > 0 or not head_lr > 0:
            raise ValueError(f"lr and head_lr must be positive, got {lr!r}, {head_lr!r}")
        if head not in ("cosine", "linear"):
            raise ValueError(f"head must be 'cosine' or 'linear', got {head!r}")
        if not head_scale > 0:
            raise ValueError(f"head_scale must be positive, got {head_scale!r}")
        self.head, self.head_scale, self.head_lr = head, float(head_scale), float(head_lr)
        self.epochs, self.lr, self.batch_size, self.seed = epochs, float(lr), batch_size, int(seed)
        self.model = copy.deepcopy(backbone)
        for p in self.model.parameters():
            p.requires_grad_(False)
        names = [n for n, m in self.model.named_modules() if isinstance(m, nn.Linear)]
        chosen = list(layers) if layers is not None else names
        unknown = [n for n in chosen if n not in names]
        if unknown or not chosen:
            raise ValueError(
                f"layers must name nn.Linear modules of the backbone {names}, got {list(chosen)}"
            )
        self.adapted: list[AdaptedLinear] = []
        for i, name in enumerate(chosen):
            parent, attr = self._parent(name)
            wrapped = AdaptedLinear(
                getattr(parent, attr),
                adapter=adapter,
                normalization=normalization,
                rank=rank,
                shared=shared,
                modulation=modulation,
                learn_gamma=learn_gamma,
                train_old_alphas=train_old_alphas,
                seed=self.seed * 1000 + i,
            )
            setattr(parent, attr, wrapped)
            self.adapted.append(wrapped)
        self.classes_: list = []
        self.heads = nn.ModuleList()
        self.task_classes: list[list] = []
        self.n_features_in_: int | None = None

    def _parent(self, name: str) -> tuple[nn.Module, str]:
        parts = name.split(".")
        mod = self.model
        for p in parts[:-1]:
            mod = getattr(mod, p)
        return mod, parts[-1]

    def features(self, X: np.ndarray | torch.Tensor) -> torch.Tensor:
        x = X if isinstance(X, torch.Tensor) else torch.from_numpy(_features(X))
        self._check_width(x)
        return self.model(x)

    def _check_width(self, x: torch.Tensor) -> None:
        """X's feature count must be the one the backbone takes (learned from the first task)."""
        if self.n_features_in_ is not None and x.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} features (columns), got {x.shape[1]}")

    def _backbone_width(self, X: np.ndarray) -> int:
        """Run the backbone on one row: its output width, or a ValueError naming X if it rejects the width."""
        with torch.no_grad():
            try:
                return int(self.model(torch.from_numpy(X[:1])).shape[1])
            except (RuntimeError, ValueError) as err:
                raise ValueError(
                    f"X with {X.shape[1]} features does not fit the backbone's input ({err})"
                ) from None

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        h = self.model(x)
        return torch.cat([head(h) for head in self.heads], dim=1)

    def fit_task(self, X: np.ndarray, y: np.ndarray) -> ClassIncrementalLearner:
        """Learn one task: its classes must all be new (class-incremental); no earlier data is used."""
        X = _features(X)
        y = np.asarray(y)
        if y.shape != (len(X),):
            raise ValueError(f"y must be 1-D with one label per row of X ({len(X)}), got shape {y.shape}")
        new = list(np.unique(y))
        seen = [c for c in new if c in self.classes_]
        if seen:
            raise ValueError(f"y holds classes already learned in an earlier task: {seen}")
        if len(new) < 1:
            raise ValueError("a task needs at least one class")
        if len(new) == 1:
            warnings.warn(
                "a task with one class gives cross-entropy masked to the task's classes no signal: its adapter and "
                "classifier block stay at initialisation (use tasks of two or more classes, or SimpleCIL)",
                stacklevel=2,
            )
        self._check_width(torch.from_numpy(X[:1]))
        d = self._backbone_width(X)
        # the task's seed drives the head's initialisation; torch's global RNG is restored afterwards
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 7919 + len(self.task_classes))
            self._learn_task(X, y, new, d)
        return self

    def _learn_task(self, X: np.ndarray, y: np.ndarray, new: list, d: int) -> None:
        for head in self.heads:
            for p in head.parameters():
                p.requires_grad_(False)
        head = CosineHead(d, len(new), self.head_scale) if self.head == "cosine" else nn.Linear(d, len(new))
        self.heads.append(head)

        for layer in self.adapted:
            layer.start_task()
        offset = len(self.classes_)
        self.classes_ += new
        self.task_classes.append(new)
        index = {c: i for i, c in enumerate(new)}
        target = torch.tensor([index[c] for c in y], dtype=torch.long)
        x = torch.from_numpy(X)
        params = [p for p in self.model.parameters() if p.requires_grad]
        # fused: one kernel for every parameter tensor (many small alphas and cores; ~20 % of a step otherwise)
        opt = torch.optim.Adam(
            [{"params": params, "lr": self.lr}, {"params": list(head.parameters()), "lr": self.head_lr}],
            fused=all(
                p.device.type == "cpu" and p.dtype == torch.float32 for p in [*params, *head.parameters()]
            ),
        )
        g = torch.Generator().manual_seed(self.seed * 104729 + len(self.task_classes))
        for _ in range(self.epochs):
            perm = torch.randperm(len(x), generator=g)
            for i in range(0, len(x), self.batch_size):
                idx = perm[i : i + self.batch_size]
                logits = self._logits(x[idx])[:, offset : offset + len(new)]  # mask to the task's classes
                loss = F.cross_entropy(logits, target[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        for layer in self.adapted:
            layer.end_task()
        if self.n_features_in_ is None:
            self.n_features_in_ = X.shape[1]

    def predict(self, X: np.ndarray, task: int | None = None) -> np.ndarray:
        """Labels among every class seen so far (no task identity; the class-incremental protocol), or, with
        ``task`` (0-based index of a learned task), among that task's classes only (task-aware)."""
        if not self.heads:
            raise RuntimeError("predict called before any task was learned")
        classes = _check_task(task, self.task_classes)
        x = torch.from_numpy(_features(X))
        self._check_width(x)
        with torch.no_grad():
            logits = self._logits(x)
        if task is not None:
            offset = sum(len(c) for c in self.task_classes[:task])
            logits = logits[:, offset : offset + len(classes)]
        idx = logits.argmax(1).numpy()
        return np.asarray(self.classes_ if task is None else classes)[idx]

    def stored_parameters(self) -> int:
        """Adapter parameters stored over all tasks and layers (the classifier heads excluded)."""
        return sum(layer.stored_parameters() for layer in self.adapted)

    def update_norms(self) -> list[float]:
        """||W - W0||_F of every adapted layer."""
        with torch.no_grad():
            return [float(torch.linalg.matrix_norm(layer.update().double())) for layer in self.adapted]


class SimpleCIL:
    """Frozen backbone + class-mean prototypes, cosine similarity (the training-free CIL baseline)."""

    def __init__(self, backbone: nn.Module):
        if not isinstance(backbone, nn.Module):
            raise TypeError(f"backbone must be a torch nn.Module, got {type(backbone).__name__}")
        self.backbone = backbone
        self.classes_: list = []
        self.prototypes: list[torch.Tensor] = []
        self.task_classes: list[list] = []
        self.n_features_in_: int | None = None

    def fit_task(self, X: np.ndarray, y: np.ndarray) -> SimpleCIL:
        X, y = _features(X), np.asarray(y)
        if y.shape != (len(X),):
            raise ValueError(f"y must be 1-D with one label per row of X ({len(X)}), got shape {y.shape}")
        seen = [c for c in np.unique(y) if c in self.classes_]
        if seen:
            raise ValueError(f"y holds classes already learned in an earlier task: {seen}")
        h = self._embed(X)
        self.task_classes.append(list(np.unique(y)))
        for c in np.unique(y):
            self.classes_.append(c)
            self.prototypes.append(F.normalize(h[torch.from_numpy(y == c)].mean(0), dim=0))
        return self

    def predict(self, X: np.ndarray, task: int | None = None) -> np.ndarray:
        """Nearest prototype among every class seen (or, with ``task``, among that task's classes)."""
        if not self.prototypes:
            raise RuntimeError("predict called before any task was learned")
        classes = _check_task(task, self.task_classes)
        h = self._embed(_features(X))
        keep = list(range(len(self.classes_)))
        if task is not None:
            offset = sum(len(c) for c in self.task_classes[:task])
            keep = keep[offset : offset + len(classes)]
        with torch.no_grad():
            idx = (h @ torch.stack([self.prototypes[i] for i in keep]).T).argmax(1).numpy()
        return np.asarray(self.classes_)[keep][idx]

    def _embed(self, X: np.ndarray) -> torch.Tensor:
        """Unit-norm backbone features; a feature count the backbone rejects is a ValueError naming X."""
        if self.n_features_in_ is not None and X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} features (columns), got {X.shape[1]}")
        with torch.no_grad():
            try:
                h = self.backbone(torch.from_numpy(X))
            except (RuntimeError, ValueError) as err:
                raise ValueError(
                    f"X with {X.shape[1]} features does not fit the backbone's input ({err})"
                ) from None
        self.n_features_in_ = X.shape[1]
        return F.normalize(h, dim=1)

    def stored_parameters(self) -> int:
        return 0


@dataclass
class StreamResult:
    """Accuracy matrix acc[t, j]: accuracy (%) on task j's test classes after learning task t (j <= t)."""

    acc: np.ndarray
    stored_parameters: int
    update_norms: list[list[float]] = field(default_factory=list)  # per task: ||W_t - W0||_F per layer
    final_all: float = float("nan")
    incremental: list[float] = field(default_factory=list)  # A_t after each task t

    @property
    def final_accuracy(self) -> float:
        """A_T: accuracy over all seen classes' test samples after the last task (task-size weighted)."""
        return float(self.final_all)

    new_task_accuracy: list[float] = field(default_factory=list)  # task-aware accuracy on task t after it

    @property
    def plasticity(self) -> float:
        """Mean task-aware accuracy (%) on each task's test set right after learning it (prediction among that
        task's classes only): whether the learner fits each task, separate from interference and forgetting."""
        return float(np.mean(self.new_task_accuracy)) if self.new_task_accuracy else float("nan")

    @property
    def average_incremental_accuracy(self) -> float:
        return float(np.mean(self.incremental))

    @property
    def forgetting(self) -> float:
        """F_T: mean over old tasks j < T of (best accuracy on j before T) - (accuracy on j after T)."""
        T = self.acc.shape[0]
        if T < 2:
            return 0.0
        return float(np.mean([np.nanmax(self.acc[: T - 1, j]) - self.acc[T - 1, j] for j in range(T - 1)]))


def run_stream(
    learner: ClassIncrementalLearner | SimpleCIL,
    tasks: Sequence[tuple[np.ndarray, np.ndarray]],
    tests: Sequence[tuple[np.ndarray, np.ndarray]],
) -> StreamResult:
    """Train ``learner`` on ``tasks`` in order; after each, test on every seen task's test set."""
    if len(tasks) != len(tests) or not tasks:
        raise ValueError("tasks and tests must be non-empty and of equal length")
    T = len(tasks)
    acc = np.full((T, T), np.nan)
    incremental, norms, new_task = [], [], []
    for t, (X, y) in enumerate(tasks):
        learner.fit_task(X, y)
        correct = total = 0
        for j in range(t + 1):
            Xt, yt = tests[j]
            pred = learner.predict(Xt)
            acc[t, j] = 100.0 * float(np.mean(pred == yt))
            correct += int(np.sum(pred == yt))
            total += len(yt)
        incremental.append(100.0 * correct / total)
        new_task.append(100.0 * float(np.mean(learner.predict(tests[t][0], task=t) == tests[t][1])))
        if isinstance(learner, ClassIncrementalLearner):
            norms.append(learner.update_norms())
    return StreamResult(
        acc,
        learner.stored_parameters(),
        norms,
        final_all=incremental[-1],
        incremental=incremental,
        new_task_accuracy=new_task,
    )
