"""The federated ObsAlign loop: shared modality encoders and classifier (FedAvg), observability-gated InfoNCE
alignment, calibrated missing-modality transfer through consolidated prototypes (see the package docstring)."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .sketch import Observability, SourceSketch, compute_sketch, observability

GATES = ("observability", "uniform", "bridge", "none")


@dataclass
class Source:
    """One source's training data: ``views[modality]`` is ``(n, p_m)`` with all-NaN rows where it is missing.

    A modality the source never observes may be left out of ``views``. ``y`` holds integer labels.
    """

    views: Mapping[str, np.ndarray]
    y: np.ndarray
    name: str = ""
    meta: dict = field(default_factory=dict)


class _Net(nn.Module):
    def __init__(self, dims: Sequence[int], n_classes: int, d: int, hidden: int) -> None:
        super().__init__()
        self.encoders = nn.ModuleList(
            nn.Sequential(nn.Linear(p, hidden), nn.ReLU(), nn.Linear(hidden, d)) for p in dims
        )
        self.classifier = nn.Linear(d, n_classes)

    def embed(self, xs: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([enc(x) for enc, x in zip(self.encoders, xs)], dim=1)  # (n, K, d)

    def fuse(self, f, mask, protos, transfer):
        """Observed mean plus gated prototype imputation of the missing modalities; returns (logits, z).

        ``transfer[k, j, c]`` weighs the imputation of a missing modality j from an observed k for class c and
        ``protos[k, j, c]`` is the prototype of (j, c) that relation uses (global or the source's own).
        """
        m = mask.float()
        n_obs = m.sum(1, keepdim=True)
        z_obs = (f * m[..., None]).sum(1) / n_obs
        post = F.softmax(self.classifier(z_obs), dim=1).detach()  # p(c | observed), never the label
        gate = torch.einsum("nk,kjc,nj->nkjc", m, transfer, 1 - m) / n_obs[..., None, None]
        weight = torch.einsum("nkjc,nc->n", gate, post)
        imputed = torch.einsum("nkjc,nc,kjcd->nd", gate, post, protos)
        z = ((f * m[..., None]).sum(1) + imputed) / (n_obs + weight[:, None])
        return self.classifier(z), z


class ObsAlign:
    """Observability-gated multi-source multimodal learning (reconstructed ObsAlign) and its baselines.

    Parameters
    ----------
    gate : "observability" (ObsAlign), "uniform" (every relation aligned and transferred, global prototypes),
        "bridge" (ablation: o_r = bridge evidence only), "none" (FedAvg fusion, zero-imputation, no alignment).
    local_only : train one model per source on its own data (no federation, no alignment).
    d, hidden : embedding and hidden width of the per-modality MLP encoders.
    rounds, local_epochs, batch_size, lr : the federated schedule (Adam, re-initialised each round).
    lambda_align, temperature : weight and temperature of the gated InfoNCE.
    theta : consolidation threshold: a relation (m, m', c) with o_r >= theta imputes a missing m' from the global
        prototype of (m', c); a weaker one only from the source's own prototype, so at theta = 1 (o_r < 1 always)
        nothing is transferred into a modality a source never observes. ``consolidated_`` (K, K, C) records
        which relations use the global prototype after fitting.
    kappa_bridge, kappa_side, eta, lam, rho_side : observability constants (``lam=None``: median U).
    """

    def __init__(
        self,
        gate: str = "observability",
        *,
        local_only: bool = False,
        d: int = 32,
        hidden: int = 64,
        rounds: int = 20,
        local_epochs: int = 1,
        batch_size: int = 64,
        lr: float = 5e-3,
        lambda_align: float = 0.5,
        temperature: float = 0.1,
        theta: float = 0.5,
        kappa_bridge: float = 20.0,
        kappa_side: float = 20.0,
        eta: float = 0.05,
        lam: float | None = None,
        rho_side: float = 0.3,
        align_only: tuple[int, int, int] | None = None,
        random_state: int | None = 0,
    ) -> None:
        self.gate = gate
        self.local_only = local_only
        self.d = d
        self.hidden = hidden
        self.rounds = rounds
        self.local_epochs = local_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lambda_align = lambda_align
        self.temperature = temperature
        self.theta = theta
        self.obs_kw = dict(
            kappa_bridge=kappa_bridge, kappa_side=kappa_side, eta=eta, lam=lam, rho_side=rho_side
        )
        self.align_only = align_only
        self.random_state = random_state

    # --- validation ----------------------------------------------------------------------------------------
    def _validate(self) -> None:
        if self.gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {self.gate!r}")
        for name in ("d", "hidden", "rounds", "local_epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("lr", "temperature"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        if not isinstance(self.lambda_align, (int, float)) or not (0 <= self.lambda_align < math.inf):
            raise ValueError(f"lambda_align must be a finite number >= 0, got {self.lambda_align!r}")
        if not isinstance(self.theta, (int, float)) or not 0 <= self.theta <= 1:
            raise ValueError(f"theta must be in [0, 1], got {self.theta!r}")

    def _prepare(self, sources: Sequence[Source]) -> None:
        if isinstance(sources, Source) or len(sources) == 0:
            raise ValueError("sources must be a non-empty sequence of Source")
        dims: dict[str, int] = {}
        for s in sources:
            if not isinstance(s, Source):
                raise TypeError(f"sources must hold Source objects, got {type(s).__name__}")
            for name, v in s.views.items():
                v = np.asarray(v)
                if v.ndim != 2:
                    raise ValueError(f"source {s.name!r}: view {name!r} must be 2-D (n, p), got {v.shape}")
                if dims.setdefault(name, v.shape[1]) != v.shape[1]:
                    raise ValueError(
                        f"mismatched modality sets: view {name!r} has {v.shape[1]} features in source {s.name!r}, "
                        f"{dims[name]} elsewhere"
                    )
        if not dims:
            raise ValueError("sources hold no modality views")
        self.modalities_ = sorted(dims)
        self.dims_ = [dims[m] for m in self.modalities_]
        labels = np.concatenate([np.asarray(s.y).ravel() for s in sources])
        if not np.issubdtype(labels.dtype, np.integer) or labels.size == 0 or labels.min() < 0:
            raise ValueError("y must hold non-negative integer class labels in every source")
        self.n_classes_ = int(labels.max()) + 1

    def _tensors(self, source: Source) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Zero-filled per-modality inputs and the observed mask of one source."""
        unknown = set(source.views) - set(self.modalities_)
        if unknown:
            raise ValueError(
                f"mismatched modality sets: {sorted(unknown)} not among the fitted {self.modalities_}"
            )
        n = None
        xs, mask = [], []
        for m, p in zip(self.modalities_, self.dims_):
            v = source.views.get(m)
            if v is not None:
                v = np.asarray(v, dtype=np.float32)
                if v.ndim != 2 or v.shape[1] != p:
                    raise ValueError(f"mismatched modality sets: view {m!r} must be (n, {p}), got {v.shape}")
                n = len(v) if n is None else n
                if len(v) != n:
                    raise ValueError(f"source {source.name!r}: views have different row counts")
        if not n:
            raise ValueError(f"source {source.name!r} is empty: it has no rows")
        for m, p in zip(self.modalities_, self.dims_):
            v = source.views.get(m)
            v = np.full((n, p), np.nan, np.float32) if v is None else np.asarray(v, dtype=np.float32)
            obs = ~np.isnan(v).all(1)
            if np.isnan(v[obs]).any():
                raise ValueError(f"source {source.name!r}: view {m!r} mixes NaN into observed rows")
            if np.isinf(v[obs]).any():
                raise ValueError(f"source {source.name!r}: view {m!r} holds infinite values")
            xs.append(torch.as_tensor(np.where(obs[:, None], v, 0.0)))
            mask.append(obs)
        mask_t = torch.as_tensor(np.stack(mask, 1))
        if not bool(mask_t.any(1).all()):
            raise ValueError(f"source {source.name!r}: every row must observe at least one modality")
        return xs, mask_t

    # --- the loop ------------------------------------------------------------------------------------------
    def fit(self, sources: Sequence[Source]) -> ObsAlign:
        self._validate()
        self._prepare(sources)
        seeds = np.random.SeedSequence(self.random_state).generate_state(2)
        torch.manual_seed(int(seeds[0]))
        self._rng = np.random.default_rng(int(seeds[1]))
        data = []
        for s in sources:
            xs, mask = self._tensors(s)
            y = torch.as_tensor(np.asarray(s.y), dtype=torch.long)
            if len(y) != len(mask):
                raise ValueError(f"source {s.name!r}: y has {len(y)} labels for {len(mask)} rows")
            data.append((xs, mask, y))
        self.n_sources_ = len(data)
        K, C = len(self.modalities_), self.n_classes_
        net = _Net(self.dims_, C, self.d, self.hidden)
        if self.local_only:
            self.nets_ = []
            for xs, mask, y in data:
                local = copy.deepcopy(net)
                for _ in range(self.rounds * self.local_epochs):
                    self._epoch(local, xs, mask, y, *self._no_transfer(), torch.zeros(K, K, C))
                self.nets_.append(local)
            self.protos_ = [torch.zeros(K, K, C, self.d)] * len(data)
            self.transfer_ = [torch.zeros(K, K, C)] * len(data)
            self.consolidated_ = np.zeros((K, K, C), bool)
            return self
        global_state = net.state_dict()
        self.history_ = []
        for _round in range(self.rounds):
            net.load_state_dict(global_state)
            sketches = self._sketches(net, data)
            report = observability(sketches, **self.obs_kw)
            protos, transfer, align = self._consolidate(sketches, report)
            states, sizes = [], []
            for i, (xs, mask, y) in enumerate(data):
                net.load_state_dict(global_state)
                self._epochs(net, xs, mask, y, protos[i], transfer[i], align)
                states.append(copy.deepcopy(net.state_dict()))
                sizes.append(len(y))
            w = np.asarray(sizes, float) / sum(sizes)
            global_state = {k: sum(wi * st[k] for wi, st in zip(w, states)) for k in global_state}
            self.history_.append(float(np.mean(report.o[np.triu_indices(K, 1)])) if K > 1 else 1.0)
        net.load_state_dict(global_state)
        self.net_ = net
        self.sketches_ = self._sketches(net, data)
        self.observability_ = observability(self.sketches_, **self.obs_kw)
        self.protos_, self.transfer_, self.align_ = self._consolidate(self.sketches_, self.observability_)
        return self

    def _no_transfer(self):
        K, C = len(self.modalities_), self.n_classes_
        return torch.zeros(K, K, C, self.d), torch.zeros(K, K, C)

    @torch.no_grad()
    def _sketches(self, net: _Net, data) -> list[SourceSketch]:
        out = []
        for xs, mask, y in data:
            f = net.embed(xs).numpy()
            out.append(compute_sketch(f, mask.numpy(), y.numpy(), self.n_classes_))
        return out

    def _consolidate(self, sketches, report: Observability):
        """Per source: prototypes (K, C, d) and transfer weights (K, K, C); the alignment weights (K, K, C)."""
        K, C = len(self.modalities_), self.n_classes_
        pooled = sketches[0]
        for s in sketches[1:]:
            pooled = pooled + s
        global_protos = pooled.prototypes
        has_global = pooled.counts > 0  # (K, C)
        if self.gate == "none":
            o = np.zeros((K, K, C))
        elif self.gate == "uniform":
            o = np.ones((K, K, C))
        elif self.gate == "bridge":
            o = report.bridge.copy()
        else:
            o = report.o.copy()
        align = o.copy()
        if self.align_only is not None:
            m, j, c = self.align_only
            align = np.zeros((K, K, C))
            align[m, j, c] = align[j, m, c] = 1.0
        # consolidation, per relation (m, j, c): a relation with o >= theta imputes j from the global
        # (count-weighted) prototype of (j, c); a weaker one only from the source's own prototype, so a source that
        # never observes (j, c) receives nothing through it. The diagonal (m = j) is never a transfer.
        trusted = o >= self.theta if self.gate != "uniform" else np.ones((K, K, C), bool)
        off_diagonal = ~np.eye(K, dtype=bool)[:, :, None]
        protos, transfer = [], []
        for s in sketches:
            local = s.counts > 0  # (j, C): the source has its own prototype of (j, c)
            P = np.where(trusted[..., None], global_protos[None], s.prototypes[None])  # (K, K, C, d)
            avail = np.where(trusted, has_global[None], local[None]) & off_diagonal
            T = np.where(avail, o, 0.0)
            protos.append(torch.as_tensor(P, dtype=torch.float32))
            transfer.append(torch.as_tensor(T, dtype=torch.float32))
        self.consolidated_ = trusted & off_diagonal
        return protos, transfer, torch.as_tensor(align, dtype=torch.float32)

    def _epochs(self, net, xs, mask, y, protos, transfer, align) -> None:
        for _ in range(self.local_epochs):
            self._epoch(net, xs, mask, y, protos, transfer, align)

    def _epoch(self, net, xs, mask, y, protos, transfer, align) -> None:
        opt = getattr(net, "_opt", None)
        if opt is None or not self.local_only:
            opt = torch.optim.Adam(net.parameters(), lr=self.lr)
            if self.local_only:
                net._opt = opt
        n = len(y)
        K = len(xs)
        order = torch.as_tensor(self._rng.permutation(n))
        for start in range(0, n, self.batch_size):
            b = order[start : start + self.batch_size]
            xb, mb, yb = [x[b] for x in xs], mask[b], y[b]
            f = net.embed(xb)
            logits, _ = net.fuse(f, mb, protos, transfer)
            loss = F.cross_entropy(logits, yb)
            if self.lambda_align > 0 and align is not None and float(align.abs().sum()) > 0:
                loss = loss + self.lambda_align * self._align_loss(f, mb, yb, align, K)
            opt.zero_grad()
            loss.backward()
            opt.step()

    def _align_loss(self, f, mask, y, align, K) -> torch.Tensor:
        total = f.new_zeros(())
        for m in range(K):
            for j in range(m + 1, K):
                both = mask[:, m] & mask[:, j]
                if int(both.sum()) < 2:
                    continue
                w = align[m, j, y[both]]
                if float(w.sum()) == 0:
                    continue
                a = F.normalize(f[both, m], dim=1)
                b = F.normalize(f[both, j], dim=1)
                logits = a @ b.T / self.temperature
                target = torch.arange(len(a))
                ce = 0.5 * (
                    F.cross_entropy(logits, target, reduction="none")
                    + F.cross_entropy(logits.T, target, reduction="none")
                )
                total = total + (w * ce).mean()
        return total

    # --- prediction ----------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "protos_"):
            raise RuntimeError("ObsAlign is not fitted: call fit(sources) first")

    @torch.no_grad()
    def predict_proba(self, views: Mapping[str, np.ndarray], source: int = 0) -> np.ndarray:
        """Class probabilities for rows of ``views`` seen by fitted source ``source`` (its consolidation)."""
        self._check_fitted()
        if (
            isinstance(source, bool)
            or not isinstance(source, (int, np.integer))
            or not 0 <= source < self.n_sources_
        ):
            raise ValueError(f"source must be an index in [0, {self.n_sources_ - 1}], got {source!r}")
        xs, mask = self._tensors(Source(views, np.zeros(0, int), name=f"query for source {source}"))
        net = self.nets_[source] if self.local_only else self.net_
        logits, _ = net.fuse(net.embed(xs), mask, self.protos_[source], self.transfer_[source])
        return F.softmax(logits, 1).numpy()

    def predict(self, views: Mapping[str, np.ndarray], source: int = 0) -> np.ndarray:
        return self.predict_proba(views, source).argmax(1)
