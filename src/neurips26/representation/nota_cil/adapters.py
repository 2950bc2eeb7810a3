"""Per-task weight updates (LoRA, MPO / tensor-train) and the normalisations that merge them into one weight.

A frozen linear layer W0 (m x n) accumulates one update dW_t per task t:

- ``LoRAAdapter``: dW = B A, B (m x r) zero-initialised, A (r x n) random: r (m + n) parameters;
- ``MPOAdapter``: dW[(i_1..i_K), (j_1..j_K)] = C_1[i_1, j_1] C_2[i_2, j_2] ... C_K[i_K, j_K] with cores
  C_k of shape (r_{k-1}, m_k, n_k, r_k), r_0 = r_K = 1, m = prod m_k, n = prod n_k: sum_k r_{k-1} m_k n_k r_k
  parameters; the last core is zero-initialised so dW = 0 at task start. With ``modulation=True`` (H-NoTA) the
  contraction inserts r x r matrices M_k (identity-initialised) between consecutive cores,
  dW' = C_1 M_1 C_2 M_2 ... C_K, which are trained while LATER tasks are learned.

``AdaptedLinear`` merges the updates with one of three normalisations (``alpha_t`` learnable scalars):

- ``"none"``: W = W0 + sum_t dW_t;
- ``"task"`` (SD-LoRA): W = W0 + sum_{t<T} alpha_t dW_t / ||dW_t||_F + dW_T; when a task ends its update is
  frozen as a direction and alpha_t is set to ||dW_t||_F, so the merged weight is continuous;
- ``"global"`` (NoTA): S_T = sum_{t<=T} alpha_t dW_t, W = W0 + gamma S_T / ||S_T||_F; gamma is set to ||S_1||_F
  when the first task ends (the first task trains unnormalised, since S = 0 at its start), so
  ||W_T - W0||_F = gamma after every task whatever T is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

NORMALIZATIONS = ("none", "task", "global")
ADAPTERS = ("lora", "mpo")


def factorize(n: int, k: int = 3) -> tuple[int, ...]:
    """Split ``n`` into ``k`` integer factors as balanced as possible, largest first (128 -> (8, 4, 4))."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    primes, m, p = [], n, 2
    while m > 1:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    factors = [1] * k
    for q in sorted(primes, reverse=True):
        factors[factors.index(min(factors))] *= q
    return tuple(sorted(factors, reverse=True))


class LoRAAdapter(nn.Module):
    """Low-rank update dW = B A (B zero-initialised, so dW = 0 at creation)."""

    def __init__(
        self, in_features: int, out_features: int, rank: int = 4, generator: torch.Generator | None = None
    ):
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features), ("rank", rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.A = nn.Parameter(torch.randn(rank, in_features, generator=generator) / math.sqrt(in_features))
        self.B = nn.Parameter(torch.zeros(out_features, rank))

    def delta(self) -> torch.Tensor:
        return self.B @ self.A

    @staticmethod
    def count(in_features: int, out_features: int, rank: int) -> int:
        return rank * (in_features + out_features)

    @property
    def n_parameters(self) -> int:
        return self.count(self.in_features, self.out_features, self.rank)

    def freeze(self) -> None:
        for p in self.parameters():
            p.requires_grad_(False)


class MPOAdapter(nn.Module):
    """Tensor-train (matrix product operator) update with bond dimension ``bond_dim``; see the module docstring."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bond_dim: int = 4,
        in_shape: Sequence[int] | None = None,
        out_shape: Sequence[int] | None = None,
        modulation: bool = False,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features), ("bond_dim", bond_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        in_shape = tuple(in_shape) if in_shape is not None else factorize(in_features, 3)
        out_shape = tuple(out_shape) if out_shape is not None else factorize(out_features, len(in_shape))
        if math.prod(in_shape) != in_features:
            raise ValueError(f"in_shape {in_shape} must multiply to in_features = {in_features}")
        if math.prod(out_shape) != out_features:
            raise ValueError(f"out_shape {out_shape} must multiply to out_features = {out_features}")
        if len(in_shape) != len(out_shape) or len(in_shape) < 2:
            raise ValueError("in_shape and out_shape must have the same length, at least 2")
        self.in_features, self.out_features, self.bond_dim = in_features, out_features, bond_dim
        self.in_shape, self.out_shape = in_shape, out_shape
        K = len(in_shape)
        self.ranks = [1] + [bond_dim] * (K - 1) + [1]
        cores = []
        for k in range(K):
            shape = (self.ranks[k], out_shape[k], in_shape[k], self.ranks[k + 1])
            if k == K - 1:
                cores.append(nn.Parameter(torch.zeros(shape)))
            else:
                # unit-variance products: each core scaled by 1/sqrt(r_{k-1} n_k)
                std = 1.0 / math.sqrt(self.ranks[k] * in_shape[k])
                cores.append(nn.Parameter(torch.randn(shape, generator=generator) * std))
        self.cores = nn.ParameterList(cores)
        self.modulation = bool(modulation)
        if self.modulation:
            self.modulations = nn.ParameterList(
                [nn.Parameter(torch.eye(bond_dim), requires_grad=False) for _ in range(K - 1)]
            )

    def delta(self) -> torch.Tensor:
        """The dense (out_features x in_features) matrix of the tensor train (with modulations if any)."""
        T = self.cores[0][0]  # (m1, n1, r1)
        for k in range(1, len(self.cores)):
            if self.modulation:
                T = T @ self.modulations[k - 1]
            C = self.cores[k]  # (r, m, n, s)
            M, N, _ = T.shape
            T = torch.einsum("MNr,rmns->MmNns", T, C).reshape(M * C.shape[1], N * C.shape[2], C.shape[3])
        return T[..., 0]

    @staticmethod
    def count(in_shape: Sequence[int], out_shape: Sequence[int], bond_dim: int) -> int:
        """Core parameters: sum_k r_{k-1} m_k n_k r_k with r_0 = r_K = 1."""
        K = len(in_shape)
        ranks = [1] + [bond_dim] * (K - 1) + [1]
        return sum(ranks[k] * out_shape[k] * in_shape[k] * ranks[k + 1] for k in range(K))

    @property
    def n_parameters(self) -> int:
        n = self.count(self.in_shape, self.out_shape, self.bond_dim)
        return n + (len(self.cores) - 1) * self.bond_dim**2 if self.modulation else n

    def freeze(self, keep_modulations_trainable: bool = False) -> None:
        """Freeze the cores; with H-NoTA the modulation matrices become trainable for later tasks."""
        for p in self.cores:
            p.requires_grad_(False)
        if self.modulation:
            for p in self.modulations:
                p.requires_grad_(bool(keep_modulations_trainable))


class AdaptedLinear(nn.Module):
    """A frozen ``nn.Linear`` plus per-task updates merged by a normalisation (see the module docstring).

    Parameters
    ----------
    base : the pre-trained layer (its weight and bias are copied and frozen).
    adapter : "mpo" (default) or "lora".
    normalization : "global" (default, NoTA), "task" (SD-LoRA) or "none".
    rank : LoRA rank or MPO bond dimension.
    shared : one adapter trained through every task (sequential fine-tuning) instead of one per task.
    modulation : H-NoTA inter-core modulation matrices (MPO only), trained for historical adapters.
    learn_gamma : train the global budget gamma after the first task (default: fixed at ||S_1||_F).
    train_old_alphas : train the historical alpha_t while later tasks are learned (default True).
    eps : floor of ||S_T||_F below which the global normalisation is skipped.
    cache : reuse frozen adapters' dense deltas, and without autograd the merged weight, until a tensor they
        depend on changes (default True; False rebuilds every task's update on every forward).
    """

    def __init__(
        self,
        base: nn.Linear,
        adapter: str = "mpo",
        normalization: str = "global",
        rank: int = 4,
        shared: bool = False,
        modulation: bool = False,
        learn_gamma: bool = False,
        train_old_alphas: bool = True,
        in_shape: Sequence[int] | None = None,
        out_shape: Sequence[int] | None = None,
        eps: float = 1e-8,
        seed: int = 0,
        cache: bool = True,
    ):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
        if adapter not in ADAPTERS:
            raise ValueError(f"adapter must be one of {ADAPTERS}, got {adapter!r}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be a positive integer, got {rank!r}")
        if modulation and adapter != "mpo":
            raise ValueError("modulation (H-NoTA) needs adapter='mpo'")
        if shared and normalization != "none":
            raise ValueError("shared=True (one sequentially fine-tuned adapter) needs normalization='none'")
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps!r}")
        self.register_buffer("weight0", base.weight.detach().clone())
        self.register_buffer("bias0", None if base.bias is None else base.bias.detach().clone())
        self.in_features, self.out_features = base.in_features, base.out_features
        self.adapter, self.normalization, self.rank = adapter, normalization, rank
        self.shared, self.modulation = bool(shared), bool(modulation)
        self.learn_gamma, self.train_old_alphas, self.eps = (
            bool(learn_gamma),
            bool(train_old_alphas),
            float(eps),
        )
        self.in_shape, self.out_shape = in_shape, out_shape
        self.cache = bool(cache)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.adapters = nn.ModuleList()
        self.alphas = nn.ParameterList()
        self.gamma = nn.Parameter(torch.tensor(0.0), requires_grad=False)
        self.register_buffer("gamma_set", torch.tensor(False))
        self.register_buffer("frozen_norms", torch.zeros(0))  # task-wise: ||dW_t||_F of each frozen direction

    # --- task life cycle -----------------------------------------------------------------------------------
    def _new_adapter(self) -> nn.Module:
        if self.adapter == "lora":
            return LoRAAdapter(self.in_features, self.out_features, self.rank, generator=self.generator)
        return MPOAdapter(
            self.in_features,
            self.out_features,
            self.rank,
            self.in_shape,
            self.out_shape,
            modulation=self.modulation,
            generator=self.generator,
        )

    def start_task(self) -> None:
        """Add (or, when shared, keep) the adapter that the coming task trains."""
        if self.shared and len(self.adapters):
            return
        self.clear_cache()
        self.adapters.append(self._new_adapter())
        self.alphas.append(nn.Parameter(torch.tensor(1.0), requires_grad=self.normalization == "global"))

    def end_task(self) -> None:
        """Freeze the task's adapter and fix the normalisation state (continuity of the merged weight)."""
        if not len(self.adapters):
            raise RuntimeError("end_task called before start_task")
        if self.shared:
            return
        current = self.adapters[-1]
        self.clear_cache()
        with torch.no_grad():
            if self.normalization == "task":
                norm = torch.linalg.matrix_norm(current.delta()).clamp_min(self.eps)
                self.frozen_norms = torch.cat([self.frozen_norms, norm.reshape(1)])
                self.alphas[-1].copy_(norm)  # alpha_t dW_t / ||dW_t|| == dW_t at the hand-over
            if self.normalization == "global" and not bool(self.gamma_set):
                self.gamma.copy_(torch.linalg.matrix_norm(self._sum()))
                self.gamma_set.fill_(True)
        if isinstance(current, MPOAdapter):
            current.freeze(keep_modulations_trainable=self.modulation)
        else:
            current.freeze()
        self.alphas[-1].requires_grad_(self.normalization != "none" and self.train_old_alphas)
        self.gamma.requires_grad_(self.normalization == "global" and self.learn_gamma)

    # --- the merged weight ---------------------------------------------------------------------------------
    # Caching. A frozen adapter's dense delta is contracted once and reused until one of its tensors changes
    # (every tensor's identity, storage and in-place version counter form the cache key, so optimizer steps,
    # ``copy_`` under ``no_grad`` and new tasks invalidate it). Without autograd (``torch.no_grad()``,
    # inference) the whole merged weight is cached the same way, so ``predict`` does one matmul per layer
    # instead of rebuilding every task's tensor train. ``use_cache=False`` recomputes everything.
    @staticmethod
    def _key(tensors) -> tuple:
        return tuple((id(t), t.data_ptr(), t._version) for t in tensors)

    def clear_cache(self) -> None:
        """Drop the cached deltas and merged weight (they are also invalidated automatically on any change)."""
        self._merged_cache = None
        for ad in self.adapters:
            ad._delta_cache = None

    def _delta(self, ad: nn.Module, use_cache: bool = True) -> torch.Tensor:
        params = list(ad.parameters())
        if not use_cache or (torch.is_grad_enabled() and any(p.requires_grad for p in params)):
            return ad.delta()
        key = self._key(params)
        hit = getattr(ad, "_delta_cache", None)
        if hit is not None and hit[0] == key:
            return hit[1]
        with torch.no_grad():
            d = ad.delta()
        ad._delta_cache = (key, d)
        return d

    def _sum(self, use_cache: bool = True) -> torch.Tensor:
        return sum(
            (a * self._delta(ad, use_cache) for a, ad in zip(self.alphas, self.adapters, strict=True)),
            torch.zeros_like(self.weight0),
        )

    def update(self, use_cache: bool = True) -> torch.Tensor:
        """W - W0 under the layer's normalisation."""
        if not len(self.adapters):
            return torch.zeros_like(self.weight0)
        if self.normalization == "none":
            return sum((self._delta(ad, use_cache) for ad in self.adapters), torch.zeros_like(self.weight0))
        if self.normalization == "task":
            n_frozen = len(self.frozen_norms)
            out = torch.zeros_like(self.weight0)
            for t, ad in enumerate(self.adapters):
                if t < n_frozen:
                    out = out + self.alphas[t] * self._delta(ad, use_cache) / self.frozen_norms[t]
                else:
                    out = out + self._delta(ad, use_cache)  # the current task's update, unnormalised
            return out
        S = self._sum(use_cache)
        if not bool(self.gamma_set):
            return S  # first task: S starts at zero, nothing to normalise yet
        # in float64, so that ||W - W0||_F = gamma holds to float32 rounding of the entries (~1e-8 relative)
        S64 = S.double()
        return (self.gamma.double() * S64 / torch.linalg.matrix_norm(S64).clamp_min(self.eps)).to(S.dtype)

    def merged_weight(self, use_cache: bool = True) -> torch.Tensor:
        """W = W0 + update; without autograd the result is cached until a parameter, buffer or task changes."""
        if not use_cache or torch.is_grad_enabled():
            return self.weight0 + self.update(use_cache)
        key = (len(self.adapters), self._key([*self.parameters(), *self.buffers()]))
        hit = getattr(self, "_merged_cache", None)
        if hit is not None and hit[0] == key:
            return hit[1]
        W = self.weight0 + self.update()
        self._merged_cache = (key, W)
        return W

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(
                f"x must have {self.in_features} features in its last dimension, got shape {tuple(x.shape)}"
            )
        return F.linear(x, self.merged_weight(use_cache=self.cache), self.bias0)

    # --- parameter accounting -------------------------------------------------------------------------------
    def stored_parameters(self) -> int:
        """Adapter parameters kept after training (cores or LoRA factors, modulations, alphas, gamma)."""
        n = sum(ad.n_parameters for ad in self.adapters)
        n += len(self.alphas) if self.normalization != "none" else 0
        return n + (1 if self.normalization == "global" else 0)

    @property
    def n_tasks(self) -> int:
        return len(self.adapters) if not self.shared else int(bool(len(self.adapters)))
