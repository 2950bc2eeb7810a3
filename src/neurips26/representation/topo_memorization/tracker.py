"""Train a classifier on (possibly noisy) labels and follow the topology of its penultimate representation.

Paper (descriptive title; no arXiv id found): "Topology of noisy-label memorization: H1 persistent homology of
penultimate representations" (NeurIPS 2026, abstract 11 of seed 000_35944da5716e589d).

Method (digest, steps 1-4 and 6): an MLP ``x -> h_1 -> ... -> h_L -> logits`` is trained with Adam and
cross-entropy on the labels it is given. At each checkpoint epoch the penultimate activations ``h_L`` of a
fixed probe set of training examples (the same examples for every run) are L2-normalised and summarised by
the Vietoris-Rips persistence of equation (1) in :mod:`.persistence`: total H1 persistence is the signal, H0
the contrast. The baselines are recorded at the same checkpoints: activation variance, TwoNN intrinsic
dimension and the clean validation loss (every epoch, to locate its minimum).

Reconstructed [R]: architecture (MLP 256-128, ReLU), optimiser (Adam 1e-3, batch 64), 120 epochs, the
checkpoint schedule 1, 2, 4, ..., 64, 120 and the 200-point class-stratified probe set follow the digest's
prototype, not the paper's text (not available).
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from .persistence import (
    NORMALIZATIONS,
    _check_ripser_options,
    activation_variance,
    topological_summary,
    twonn_dimension,
)

DEFAULT_CHECKPOINTS = (1, 2, 4, 8, 16, 32, 64, 120)


class PenultimateMLP(nn.Module):
    """ReLU MLP whose last hidden layer (the penultimate representation) is exposed by :meth:`features`."""

    def __init__(self, n_features: int, hidden_sizes: Sequence[int], n_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = n_features
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def stratified_probe_index(y, n_probe: int, random_state=None) -> np.ndarray:
    """A fixed probe set: ``n_probe`` indices spread as evenly as possible over the classes of ``y``."""
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y must be a non-empty 1-D array, got shape {y.shape}")
    if not isinstance(n_probe, numbers.Integral) or not 3 <= n_probe <= y.size:
        raise ValueError(f"n_probe must be an integer in [3, len(y) = {y.size}], got {n_probe!r}")
    rng = check_random_state(random_state)
    # a random order within each class, then round-robin over classes
    order = rng.permutation(y.size)
    order = order[np.argsort(y[order], kind="stable")]
    rank = np.empty(y.size, dtype=np.int64)
    _, starts, counts = np.unique(y[order], return_index=True, return_counts=True)
    rank[order] = np.arange(y.size) - np.repeat(starts, counts)
    pick = np.lexsort((rng.random(y.size), rank))[:n_probe]
    return np.sort(pick)


def penultimate_layer(model: nn.Module) -> nn.Module:
    """The classification head of ``model``: its last ``nn.Linear`` submodule (in registration order), whose
    *input* is the penultimate representation."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("model has no nn.Linear head; name the penultimate layer with layer=")
    return linears[-1]


def penultimate_features(model: nn.Module, X, layer: str | None = None, batch_size: int = 4096) -> np.ndarray:
    """Penultimate features of any torch model on ``X`` (float64 array), read with a forward hook.

    ``layer=None`` hooks the *input* of the last ``nn.Linear`` (the head), which is the penultimate
    representation of a classifier; ``layer="name"`` hooks the *output* of ``model.get_submodule(name)``.
    The model runs in eval mode under ``torch.no_grad`` and is put back in its previous mode.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if layer is None:
        target, use_input = penultimate_layer(model), True
    else:
        try:
            target, use_input = model.get_submodule(layer), False
        except AttributeError:
            names = [n for n, _ in model.named_modules() if n]
            raise ValueError(f"layer {layer!r} is not a submodule of the model (has: {names})") from None
    Xt = X if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X))
    if Xt.ndim < 2 or Xt.shape[0] == 0:
        raise ValueError(f"X must hold at least one example (batch first), got shape {tuple(Xt.shape)}")
    if Xt.is_floating_point():
        param = next(model.parameters(), None)
        Xt = Xt.to(param.dtype if param is not None else torch.float32)
    grabbed: list[torch.Tensor] = []

    def grab(_module, inputs, output=None):
        value = inputs[0] if use_input else output
        grabbed.append(value.detach().reshape(value.shape[0], -1))

    handle = target.register_forward_pre_hook(grab) if use_input else target.register_forward_hook(grab)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            for start in range(0, Xt.shape[0], int(batch_size)):
                model(Xt[start : start + int(batch_size)])
    finally:
        handle.remove()
        model.train(was_training)
    if not grabbed:
        raise ValueError("the hooked layer was never called in the forward pass")
    return torch.cat(grabbed).to(torch.float64).numpy()


class TopologyMonitor:
    """Follow the persistence of a fixed probe set's penultimate features during *your own* training loop.

    Parameters
    ----------
    probe : the probe inputs (the same examples at every call), fed to the model as they are.
    layer : None (the input of the model's last ``nn.Linear``) or the name of the submodule whose output is the
        penultimate representation (see :func:`penultimate_features`).
    maxdim, normalize : as in :func:`~.persistence.topological_summary`.
    thresh, n_perm, coeff : ripser options (filtration threshold, greedy subsample size, prime field).
    compute_id : also record the TwoNN intrinsic dimension.

    ``record(epoch, model=...)`` hooks the model; ``record(epoch, features=...)`` takes precomputed embeddings of
    the probe set. ``history_`` holds one dict per call (epoch, h1_total, h0_total, ..., activation_variance,
    twonn_id, and any extra keyword values such as a validation loss).
    """

    def __init__(
        self,
        probe=None,
        *,
        layer: str | None = None,
        maxdim: int = 1,
        normalize: str = "l2",
        thresh: float = np.inf,
        n_perm: int | None = None,
        coeff: int = 2,
        compute_id: bool = True,
    ) -> None:
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
        if not isinstance(maxdim, numbers.Integral) or not 0 <= maxdim <= 2:
            raise ValueError(f"maxdim must be an integer in [0, 2], got {maxdim!r}")
        self.probe = probe
        self.layer = layer
        self.maxdim = int(maxdim)
        self.normalize = normalize
        self.ripser_options = {"thresh": thresh, "n_perm": n_perm, "coeff": coeff}
        self.compute_id = bool(compute_id)
        self.history_: list[dict] = []

    def summarise(self, features) -> dict[str, float]:
        """Persistence summaries and baseline statistics of one feature cloud (rows = probe examples)."""
        feats = np.asarray(features, dtype=np.float64)
        if feats.ndim != 2:
            feats = feats.reshape(feats.shape[0], -1) if feats.ndim > 2 else feats
        if self.history_ and feats.shape[0] != self.history_[0]["n_points"]:
            raise ValueError(
                f"features must keep the probe size fixed across calls ({self.history_[0]['n_points']} "
                f"points so far, got {feats.shape[0]}): clouds of different sizes are not comparable"
            )
        row: dict[str, float] = {"n_points": float(feats.shape[0])}
        row.update(
            topological_summary(feats, maxdim=self.maxdim, normalize=self.normalize, **self.ripser_options)
        )
        row["activation_variance"] = activation_variance(feats)
        if self.compute_id:
            try:
                row["twonn_id"] = twonn_dimension(feats)
            except ValueError:  # collapsed features (fewer than 3 distinct points)
                row["twonn_id"] = float("nan")
        return row

    def record(self, epoch: float, *, model: nn.Module | None = None, features=None, **extra) -> dict:
        """Summarise the probe cloud at ``epoch`` from ``model`` (hooked) or from precomputed ``features``."""
        if (model is None) == (features is None):
            raise ValueError("record needs exactly one of model= or features=")
        if model is not None:
            if self.probe is None:
                raise ValueError("record(model=...) needs the probe inputs: TopologyMonitor(probe, ...)")
            features = penultimate_features(model, self.probe, self.layer)
        row = {"epoch": epoch, **self.summarise(features), **extra}
        self.history_.append(row)
        return row

    def column(self, key: str) -> np.ndarray:
        """One recorded value over the calls, e.g. ``monitor.column("h1_total")``."""
        return np.array([r.get(key, np.nan) for r in self.history_], dtype=float)


def persistence_trajectory(
    embeddings: Mapping[float, object] | Iterable[object],
    epochs: Sequence[float] | None = None,
    **monitor_options,
) -> list[dict]:
    """Summaries of precomputed penultimate embeddings of one probe set, one cloud per checkpoint.

    ``embeddings`` is ``{epoch: (n, d) array}`` (for example loaded from saved checkpoints) or a sequence of
    arrays with ``epochs`` beside it; ``monitor_options`` are :class:`TopologyMonitor`'s (ripser options
    included). Returns the monitor's history.
    """
    if isinstance(embeddings, Mapping):
        if epochs is not None:
            raise ValueError("epochs must be None when embeddings is a mapping {epoch: array}")
        items = sorted(embeddings.items(), key=lambda kv: kv[0])
    else:
        clouds = list(embeddings)
        epochs = list(range(1, len(clouds) + 1)) if epochs is None else list(epochs)
        if len(epochs) != len(clouds):
            raise ValueError(f"epochs must have one entry per cloud ({len(clouds)}), got {len(epochs)}")
        items = list(zip(epochs, clouds, strict=True))
    if not items:
        raise ValueError("embeddings must hold at least one cloud")
    monitor = TopologyMonitor(**monitor_options)
    for epoch, feats in items:
        monitor.record(epoch, features=feats)
    return monitor.history_


class TopologicalMemorizationTracker(ClassifierMixin, BaseEstimator):
    """Train a classifier and record the H1/H0 persistence of its penultimate probe features over epochs.

    Parameters
    ----------
    module : None (train the built-in :class:`PenultimateMLP` with ``hidden_sizes``) or any ``torch.nn.Module``
        mapping a float32 batch of ``X`` rows to ``n_classes`` logits; a deep copy is trained, the argument is left
        untouched. Its penultimate features are read with a forward hook (``layer``).
    layer : None (the input of the module's last ``nn.Linear``) or the name of the submodule whose output is the
        penultimate representation.
    hidden_sizes : widths of the built-in MLP's hidden layers; the last one is the penultimate representation.
    epochs : number of training epochs.
    checkpoints : epochs (1-based, <= ``epochs``) at which the probe cloud is summarised.
    learning_rate, batch_size : Adam step size and mini-batch size.
    n_probe : size of the probe set (drawn stratified from the training set unless ``probe_index`` is given).
    normalize : cloud normalisation before persistence: ``"l2"`` (the pre-registered protocol), ``"median"``
        or ``"none"``.
    compute_id : also record the TwoNN intrinsic dimension at each checkpoint.
    thresh, n_perm : ripser's filtration threshold and greedy-subsample size (see
        :func:`~.persistence.persistence_diagrams`).
    random_state : seed for the initialisation, the batch order and the probe set.

    Attributes
    ----------
    history_ : list of dicts, one per checkpoint: ``epoch``, ``h1_total``, ``h1_count``, ``h1_max``,
        ``h0_total``, ..., ``activation_variance``, ``twonn_id``, ``train_acc``, ``val_loss``, ``val_acc``,
        ``memorized`` (fraction of ``noisy_mask`` examples fitted to their given label).
    checkpoint_epochs_, h1_total_, h0_total_ : arrays over the checkpoints.
    val_loss_curve_ : clean validation loss after every epoch (when validation data is given).
    probe_index_ : the probe set's indices into ``X``.
    model_ : the trained module (a :class:`PenultimateMLP` unless ``module`` was given).
    """

    def __init__(
        self,
        module: nn.Module | None = None,
        layer: str | None = None,
        hidden_sizes: Sequence[int] = (256, 128),
        epochs: int = 120,
        checkpoints: Sequence[int] = DEFAULT_CHECKPOINTS,
        learning_rate: float = 1e-3,
        batch_size: int = 64,
        n_probe: int = 200,
        normalize: str = "l2",
        compute_id: bool = True,
        thresh: float = np.inf,
        n_perm: int | None = None,
        random_state=None,
    ) -> None:
        self.module = module
        self.layer = layer
        self.hidden_sizes = hidden_sizes
        self.epochs = epochs
        self.checkpoints = checkpoints
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_probe = n_probe
        self.normalize = normalize
        self.compute_id = compute_id
        self.thresh = thresh
        self.n_perm = n_perm
        self.random_state = random_state

    def _check_params(self) -> list[int]:
        hs = self.hidden_sizes
        if (
            isinstance(hs, (str, bytes))
            or not hasattr(hs, "__len__")
            or len(hs) == 0
            or not all(isinstance(h, numbers.Integral) and h >= 1 for h in hs)
        ):
            raise ValueError(f"hidden_sizes must be a non-empty sequence of positive integers, got {hs!r}")
        if not isinstance(self.epochs, numbers.Integral) or self.epochs < 1:
            raise ValueError(f"epochs must be a positive integer, got {self.epochs!r}")
        cps = self.checkpoints
        if (
            not hasattr(cps, "__len__")
            or len(cps) == 0
            or not all(isinstance(c, numbers.Integral) and 1 <= c <= self.epochs for c in cps)
        ):
            raise ValueError(
                f"checkpoints must be a non-empty sequence of epochs in [1, epochs], got {cps!r}"
            )
        if not isinstance(self.learning_rate, numbers.Real) or not (0 < self.learning_rate < np.inf):
            raise ValueError(f"learning_rate must be a positive finite float, got {self.learning_rate!r}")
        if not isinstance(self.batch_size, numbers.Integral) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not isinstance(self.n_probe, numbers.Integral) or self.n_probe < 3:
            raise ValueError(f"n_probe must be an integer >= 3, got {self.n_probe!r}")
        if self.normalize not in NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {self.normalize!r}")
        if self.module is not None and not isinstance(self.module, nn.Module):
            raise TypeError(f"module must be None or a torch.nn.Module, got {type(self.module).__name__}")
        if self.layer is not None and not isinstance(self.layer, str):
            raise TypeError(f"layer must be None or a submodule name, got {type(self.layer).__name__}")
        _check_ripser_options(self.thresh, self.n_perm, 2, self.n_probe)
        return sorted(set(int(c) for c in cps))

    def fit(self, X, y, X_val=None, y_val=None, probe_index=None, noisy_mask=None):
        """Train on ``(X, y)`` and record the checkpoint summaries; returns ``self``.

        ``X_val, y_val`` (clean labels) give the validation loss; ``probe_index`` fixes the probe set (the
        same examples across runs); ``noisy_mask`` marks corrupted training labels for the memorisation rate.
        """
        checkpoints = self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float32, ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_, y_idx = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError("y must contain at least 2 classes")
        n = X.shape[0]
        rng = check_random_state(self.random_state)
        if probe_index is None:
            if self.n_probe > n:
                raise ValueError(f"n_probe must be <= n_samples = {n}, got {self.n_probe}")
            probe_index = stratified_probe_index(y_idx, self.n_probe, rng)
        probe_index = np.asarray(probe_index)
        if (
            probe_index.ndim != 1
            or probe_index.size < 3
            or not np.issubdtype(probe_index.dtype, np.integer)
            or probe_index.min() < 0
            or probe_index.max() >= n
            or np.unique(probe_index).size != probe_index.size
        ):
            raise ValueError(f"probe_index must hold >= 3 distinct integer indices in [0, {n})")
        if noisy_mask is not None:
            noisy_mask = np.asarray(noisy_mask, dtype=bool)
            if noisy_mask.shape != (n,):
                raise ValueError(f"noisy_mask must have shape ({n},), got {noisy_mask.shape}")
        has_val = X_val is not None
        if has_val:
            if y_val is None:
                raise ValueError("y_val must be given together with X_val")
            X_val = validate_data(self, X_val, dtype=np.float32, reset=False)
            y_val = np.asarray(y_val)
            if y_val.shape != (X_val.shape[0],):
                raise ValueError(f"y_val must have shape ({X_val.shape[0]},), got {y_val.shape}")
            if not np.isin(y_val, self.classes_).all():
                raise ValueError("y_val holds labels that are not in y")
            yv = torch.as_tensor(np.searchsorted(self.classes_, y_val))
            Xv = torch.as_tensor(X_val)

        seed = int(rng.randint(0, 2**31 - 1))
        Xt, yt = torch.as_tensor(X), torch.as_tensor(y_idx)
        Xp = Xt[torch.as_tensor(probe_index)]
        monitor = TopologyMonitor(
            Xp,
            layer=self.layer,
            normalize=self.normalize,
            thresh=self.thresh,
            n_perm=self.n_perm,
            compute_id=self.compute_id,
        )
        val_curve: list[float] = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if self.module is None:
                model = PenultimateMLP(X.shape[1], list(self.hidden_sizes), self.classes_.size)
            else:
                model = copy.deepcopy(self.module).float()
                with torch.no_grad():
                    out = model(Xt[:2])
                if out.ndim != 2 or out.shape[1] != self.classes_.size:
                    raise ValueError(
                        f"module must map a batch of X rows to ({self.classes_.size},) logits per row, "
                        f"got output shape {tuple(out.shape)}"
                    )
            opt = torch.optim.Adam(model.parameters(), lr=float(self.learning_rate))
            gen = torch.Generator().manual_seed(seed)
            for epoch in range(1, int(self.epochs) + 1):
                model.train()
                perm = torch.randperm(n, generator=gen)
                for start in range(0, n, int(self.batch_size)):
                    idx = perm[start : start + int(self.batch_size)]
                    loss = nn.functional.cross_entropy(model(Xt[idx]), yt[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                model.eval()
                with torch.no_grad():
                    if has_val:
                        logits_v = model(Xv)
                        val_curve.append(float(nn.functional.cross_entropy(logits_v, yv)))
                    if epoch in checkpoints:
                        extra = {}
                        pred = model(Xt).argmax(1).numpy()
                        extra["train_acc"] = float((pred == y_idx).mean())
                        if noisy_mask is not None and noisy_mask.any():
                            extra["memorized"] = float((pred[noisy_mask] == y_idx[noisy_mask]).mean())
                        if has_val:
                            extra["val_loss"] = val_curve[-1]
                            extra["val_acc"] = float((logits_v.argmax(1) == yv).float().mean())
                        monitor.record(epoch, model=model, **extra)
        history = monitor.history_
        self.model_ = model
        self.probe_index_ = probe_index
        self.history_ = history
        self.checkpoint_epochs_ = np.array([r["epoch"] for r in history])
        self.h1_total_ = np.array([r["h1_total"] for r in history])
        self.h0_total_ = np.array([r["h0_total"] for r in history])
        self.val_loss_curve_ = np.array(val_curve)
        return self

    def transform(self, X) -> np.ndarray:
        """Penultimate features of the trained model."""
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float32, reset=False)
        return penultimate_features(self.model_, torch.as_tensor(X), self.layer)

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float32, reset=False)
        with torch.no_grad():
            return self.classes_[self.model_(torch.as_tensor(X)).argmax(1).numpy()]


def crossover_epoch(epochs, clean, noisy) -> float:
    """Digest step 5: the first checkpoint epoch at which the clean run's signal falls below the noisy run's,
    after having been at or above it at an earlier checkpoint; NaN when there is no such crossover."""
    e, c, s = (np.asarray(v, dtype=float).ravel() for v in (epochs, clean, noisy))
    if not (e.shape == c.shape == s.shape) or e.size == 0:
        raise ValueError("epochs, clean and noisy must be non-empty and of equal length")
    above = c >= s
    if not above.any():
        return float("nan")
    first_above = int(np.argmax(above))
    below = np.flatnonzero(~above[first_above:])
    return float(e[first_above + below[0]]) if below.size else float("nan")
