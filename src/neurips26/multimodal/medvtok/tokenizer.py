"""MedVTok: one discrete tokenizer for 2-D medical images and 3-D volumes.

*MedVTok: a unified 2D/3D medical visual tokenizer* (NeurIPS 2026; full text not available, the closest public
design is MedITok, arXiv 2505.19225). Everything MedVTok-specific here is reconstructed [R] from the abstract.

- **Unified 2-D/3-D tokenisation** [R]: a volume ``(C, D, H, W)`` is a sequence of ``D`` slices, a 2-D image is
  a 1-slice volume. A shared per-slice 2-D conv encoder maps each slice to a feature grid; a *causal* convolution
  along the slice axis mixes slice ``k`` only with slices ``<= k`` (so slice 0 is encoded alone and an image gets
  the same tokens as the first slice of a volume that starts with it); a 1x1 projection feeds the quantiser.
- **Vector quantisation**: ``G`` sub-codebooks of ``K`` codes of width ``c``; each sub-vector goes to its nearest
  code (squared Euclidean), straight-through gradients, commitment ``beta ||z - sg(q)||^2``, EMA codebook updates
  initialised from encoder outputs, with restarts of codes whose EMA share of the vectors per call falls below a
  tenth of their fair share (small data leaves codes dead otherwise).
- **Decoder**: 1x1 projection, causal slice convolution, per-slice 2-D conv decoder.
- **Slice-differential regularisation** [R]: ``L_SD = 1/(D-1) sum_k mean |(x^_{k+1} - x^_k) - (x_{k+1} - x_k)|``,
  added to the pixel loss as ``lambda_SD L_SD`` (per-voxel losses ignore inter-slice coherence).
- **Multi-expert representation alignment** (MERA) [R]: frozen experts ``E_1..E_M``, one projection head ``P_e``
  per expert on the mean-pooled quantised features, and per-sample masks marking which experts apply:
  ``L_align = sum_e w_e * sum_i m_ei (1 - cos(P_e(z_i), E_e(x_i))) / max(1, sum_i m_ei)``. The averaged-target
  baseline (one head to the mean of the available, normalised, zero-padded expert targets) is ``mode="averaged"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...vision.modules import ConvDecoder, ConvEncoder, as_image_tensor, check_positive_int, fit_minibatches

__all__ = [
    "CausalSliceConv",
    "MedVTokenizer",
    "MultiExpertAlignment",
    "VectorQuantizer",
    "codebook_usage",
    "inter_slice_difference_error",
    "slice_differential_loss",
    "train_tokenizer",
]


def as_volume(x: Any, name: str = "x", channels: int | None = None) -> Tensor:
    """``(B, C, H, W)`` images become 1-slice volumes; ``(B, C, D, H, W)`` volumes pass; float32 back."""
    t = as_image_tensor(x, name, ndim=(4, 5), channels=channels)
    return t[:, :, None] if t.ndim == 4 else t


class CausalSliceConv(nn.Module):
    """Residual convolution along the slice axis of ``(B, C, D, h, w)`` that sees slices ``<= k`` only."""

    def __init__(self, channels: int, kernel: int = 3) -> None:
        super().__init__()
        self.kernel = check_positive_int(kernel, "kernel")
        channels = check_positive_int(channels, "channels")
        self.conv = nn.Conv3d(channels, channels, (self.kernel, 1, 1))
        nn.init.zeros_(self.conv.weight)  # starts as the identity: 2-D behaviour first, slice mixing learned
        nn.init.zeros_(self.conv.bias)

    def forward(self, h: Tensor) -> Tensor:
        return h + self.conv(F.pad(F.silu(h), (0, 0, 0, 0, self.kernel - 1, 0)))


class VectorQuantizer(nn.Module):
    """``n_codebooks`` sub-codebooks of ``n_codes`` codes of width ``code_dim`` with EMA updates.

    ``forward(z)`` with ``z`` of shape ``(..., n_codebooks * code_dim)`` returns
    ``(quantised (straight-through), indices (..., n_codebooks), commitment loss, perplexity per codebook)``.

    Codes follow exponential moving averages over training calls (``decay`` per call) of their assignment count
    ``ema_count`` and vector sum ``ema_sum`` (the code is their ratio). Dead codes are found from a separate,
    faster EMA (``usage_decay`` per call) of each code's *usage*, its share of the vectors quantised in a call,
    so a call counts the same whatever its batch size (a unified tokenizer alternates large volume batches and
    small image batches that use other codes).

    - Data-dependent initialisation: the first training call draws every code from that batch's encoder outputs
      (as Jukebox does), each with the fair share ``1 / n_codes`` as its usage.
    - Dead-code restarts (Jukebox, SoundStream): after each training call, every code whose usage is below the
      bar ``restart_threshold / n_codes`` (a fraction of the fair share) moves to a random encoder output of the
      current batch, with its usage set to the bar. A code that stops winning vectors falls below the bar within
      ``ceil(ln(restart_threshold) / ln(usage_decay))`` calls from the fair share (22 at the defaults); a
      restarted code that wins less than the bar's share in the next call is restarted again in that call.
      Neither bound depends on how many calls a run makes. ``restart_threshold=0`` turns restarts off.
      ``restarts`` counts the restarts per sub-codebook since the initialisation.
    """

    def __init__(
        self,
        n_codes: int = 512,
        code_dim: int = 16,
        n_codebooks: int = 2,
        beta: float = 0.25,
        decay: float = 0.99,
        restart_threshold: float = 0.1,
        usage_decay: float = 0.9,
    ) -> None:
        super().__init__()
        self.n_codes = check_positive_int(n_codes, "n_codes", 2)
        self.code_dim = check_positive_int(code_dim, "code_dim")
        self.n_codebooks = check_positive_int(n_codebooks, "n_codebooks")
        if not 0 <= decay < 1:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        if not 0 <= restart_threshold < 1:
            raise ValueError(
                f"restart_threshold must be a fraction of the fair share in [0, 1), got {restart_threshold}"
            )
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        if not 0 <= usage_decay < 1:
            raise ValueError(f"usage_decay must be in [0, 1), got {usage_decay}")
        self.beta, self.decay, self.restart_threshold = float(beta), float(decay), float(restart_threshold)
        self.usage_decay = float(usage_decay)
        self.register_buffer("codebooks", torch.randn(self.n_codebooks, self.n_codes, self.code_dim))
        self.register_buffer("ema_count", torch.ones(self.n_codebooks, self.n_codes))
        self.register_buffer("ema_sum", self.codebooks.clone())
        self.register_buffer("ema_usage", torch.zeros(self.n_codebooks, self.n_codes))  # EMA share per call
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))
        self.register_buffer("restarts", torch.zeros(self.n_codebooks, dtype=torch.long))  # restarted codes

    def lookup(self, indices: Tensor) -> Tensor:
        """Codes for ``indices`` ``(..., n_codebooks)`` -> ``(..., n_codebooks * code_dim)``."""
        g = torch.arange(self.n_codebooks, device=indices.device)
        return self.codebooks[g, indices].flatten(-2)

    @torch.no_grad()
    def _restart(self, flat: Tensor, mask: Tensor, count: float, share: float) -> None:
        for g in range(self.n_codebooks):
            n_dead = int(mask[g].sum())
            if n_dead:
                pick = flat[torch.randint(len(flat), (n_dead,), device=flat.device), g]
                self.codebooks[g, mask[g]] = pick
                self.ema_count[g, mask[g]] = count
                self.ema_usage[g, mask[g]] = share
                self.ema_sum[g, mask[g]] = count * pick
                self.restarts[g] += n_dead

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        if z.shape[-1] != self.n_codebooks * self.code_dim:
            raise ValueError(
                f"z must end in {self.n_codebooks * self.code_dim} channels, got {tuple(z.shape)}"
            )
        lead = z.shape[:-1]
        flat = z.reshape(-1, self.n_codebooks, self.code_dim)  # (n, G, c)
        bar = self.restart_threshold / self.n_codes  # the usage below which a code is dead
        if self.training and len(flat) and not self.initialised:  # first training call: codes from the data
            everyone = torch.ones_like(self.ema_count, dtype=torch.bool)
            self._restart(flat.detach(), everyone, len(flat) / self.n_codes, 1.0 / self.n_codes)
            self.restarts.zero_()
            self.initialised.fill_(True)
        # per sub-codebook: nearest code and assignment counts, without an (n, G, K) one-hot
        with torch.no_grad():
            x = flat.detach()
            idx = torch.stack(
                [
                    torch.addmm(self.codebooks[g].pow(2).sum(-1), x[:, g], self.codebooks[g].T, alpha=-2)
                    .min(-1)
                    .indices
                    for g in range(self.n_codebooks)
                ],
                dim=1,
            )  # (n, G); the |x|^2 term is the same for every code
            count = torch.stack(
                [torch.bincount(idx[:, g], minlength=self.n_codes) for g in range(self.n_codebooks)]
            )
            count = count.to(flat.dtype)  # (G, K)
        q = self.lookup(idx).view(*lead, -1)
        if self.training and len(flat):
            with torch.no_grad():
                sums = torch.zeros_like(self.ema_sum)
                for g in range(self.n_codebooks):
                    sums[g].index_add_(0, idx[:, g], x[:, g])
                self.ema_usage.mul_(self.usage_decay).add_(count / len(flat), alpha=1 - self.usage_decay)
                self.ema_count.mul_(self.decay).add_(count, alpha=1 - self.decay)
                self.ema_sum.mul_(self.decay).add_(sums, alpha=1 - self.decay)
                self.codebooks.copy_(self.ema_sum / self.ema_count.clamp_min(1e-5)[..., None])
                dead = self.ema_usage < bar
                if dead.any():  # restart unused codes at random encoder outputs of this batch
                    self._restart(x, dead, bar * len(flat), bar)
        loss = self.beta * F.mse_loss(z, q.detach())
        probs = count / max(len(flat), 1)  # (G, K)
        perplexity = torch.exp(-(probs * torch.log(probs + 1e-10)).sum(-1))
        return z + (q - z).detach(), idx.view(*lead, self.n_codebooks), loss, perplexity


class MedVTokenizer(nn.Module):
    """Per-slice conv encoder + causal slice convolution -> VQ -> causal slice convolution + per-slice decoder.

    Input ``(B, C, H, W)`` images or ``(B, C, D, H, W)`` volumes (``H, W`` multiples of ``2**(len(widths)-1)``).
    :meth:`encode` gives ``(quantised features (B, G*c, D, h, w), indices (B, D, h, w, G), vq loss, perplexity)``;
    :meth:`decode` maps quantised features back; ``forward`` gives ``(reconstruction, indices, vq loss)`` with the
    reconstruction shaped like the input. :meth:`tokenize` returns the integer tokens only.
    """

    def __init__(
        self,
        in_channels: int = 1,
        widths: Sequence[int] = (32, 64),
        n_codes: int = 512,
        code_dim: int = 16,
        n_codebooks: int = 2,
        slice_kernel: int = 3,
    ) -> None:
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        widths = tuple(check_positive_int(w, "widths") for w in widths)
        self.encoder = ConvEncoder(in_channels, widths, dims=2)
        self.enc_slices = CausalSliceConv(widths[-1], slice_kernel)
        self.quant_dim = n_codebooks * check_positive_int(code_dim, "code_dim")
        self.to_code = nn.Conv3d(widths[-1], self.quant_dim, 1)
        self.quantizer = VectorQuantizer(n_codes, code_dim, n_codebooks)
        self.from_code = nn.Conv3d(self.quant_dim, widths[-1], 1)
        self.dec_slices = CausalSliceConv(widths[-1], slice_kernel)
        self.decoder = ConvDecoder(widths[-1], in_channels, tuple(reversed(widths)), dims=2)
        self.downsample = self.encoder.downsample

    def _per_slice(self, module: nn.Module, h: Tensor) -> Tensor:
        B, C, D, H, W = h.shape
        out = module(h.transpose(1, 2).reshape(B * D, C, H, W))
        return out.view(B, D, *out.shape[1:]).transpose(1, 2)

    def _check(self, x: Any) -> Tensor:
        v = as_volume(x, "x", self.in_channels)
        if v.shape[-1] % self.downsample or v.shape[-2] % self.downsample:
            raise ValueError(
                f"x height and width must be multiples of {self.downsample}, got {tuple(v.shape)}"
            )
        return v

    def encode(self, x: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        v = self._check(x)
        h = self.to_code(self.enc_slices(self._per_slice(self.encoder, v)))  # (B, G*c, D, h, w)
        q, idx, loss, perplexity = self.quantizer(h.permute(0, 2, 3, 4, 1))
        return q.permute(0, 4, 1, 2, 3), idx, loss, perplexity

    def decode(self, q: Tensor) -> Tensor:
        return self._per_slice(self.decoder, self.dec_slices(self.from_code(q)))

    def forward(self, x: Any) -> tuple[Tensor, Tensor, Tensor]:
        was_2d = getattr(x, "ndim", 0) == 4
        q, idx, loss, _ = self.encode(x)
        rec = self.decode(q)
        return (rec[:, :, 0] if was_2d else rec), idx, loss

    @torch.no_grad()
    def tokenize(self, x: Any) -> Tensor:
        """Integer tokens ``(B, D, h, w, n_codebooks)`` (images: ``D = 1``)."""
        return self.encode(x)[1]

    @torch.no_grad()
    def pooled_features(self, x: Any) -> Tensor:
        """Mean-pooled quantised features ``(B, G*c)`` (what alignment heads and linear probes read)."""
        return self.encode(x)[0].flatten(2).mean(-1)


def slice_differential_loss(x_hat: Tensor, x: Tensor) -> Tensor:
    """``1/(D-1) sum_k mean |(x^_{k+1} - x^_k) - (x_{k+1} - x_k)|`` over ``(B, C, D, H, W)`` volumes [R]."""
    if x_hat.shape != x.shape or x.ndim != 5:
        raise ValueError(
            f"x_hat and x must be equal-shape (B, C, D, H, W), got {tuple(x_hat.shape)}, {tuple(x.shape)}"
        )
    if x.shape[2] < 2:
        return x.new_zeros(())
    return ((x_hat[:, :, 1:] - x_hat[:, :, :-1]) - (x[:, :, 1:] - x[:, :, :-1])).abs().mean()


def inter_slice_difference_error(x_hat: Any, x: Any) -> float:
    """ISDE, the digest's metric: mean ``|Delta_z x^ - Delta_z x|`` over volumes (as a float)."""
    a, b = as_volume(x_hat, "x_hat"), as_volume(x, "x")
    if a.shape != b.shape or a.shape[2] < 2:
        raise ValueError(
            f"x_hat and x must be equal-shape volumes with >= 2 slices, got {tuple(a.shape)}, {tuple(b.shape)}"
        )
    return float(slice_differential_loss(a, b))


class MultiExpertAlignment(nn.Module):
    """Per-expert projection heads on pooled tokenizer features, with per-sample expert masks [R].

    ``expert_dims`` maps expert names to their feature widths; ``weights`` (default 1) to ``w_e``; each head is a
    one-hidden-layer GELU MLP of width ``hidden``, or linear with ``hidden=None``.
    ``mode="per_expert"`` is MERA; ``mode="averaged"`` is the baseline with one head to the mean of the
    available experts' L2-normalised targets, zero-padded to the widest expert.
    """

    def __init__(
        self,
        feature_dim: int,
        expert_dims: Mapping[str, int],
        weights: Mapping[str, float] | None = None,
        mode: str = "per_expert",
        hidden: int | None = 128,
    ) -> None:
        super().__init__()
        if not expert_dims:
            raise ValueError("expert_dims must name at least one expert")
        if mode not in ("per_expert", "averaged"):
            raise ValueError(f"mode must be 'per_expert' or 'averaged', got {mode!r}")
        self.mode = mode
        self.expert_dims = {k: check_positive_int(v, f"expert_dims[{k!r}]") for k, v in expert_dims.items()}
        self.weights = {k: float((weights or {}).get(k, 1.0)) for k in self.expert_dims}
        feature_dim = check_positive_int(feature_dim, "feature_dim")

        if hidden is not None:
            hidden = check_positive_int(hidden, "hidden")

        def head(out: int) -> nn.Module:
            if hidden is None:  # a linear projection: the pooled features must carry the target linearly
                return nn.Linear(feature_dim, out)
            return nn.Sequential(nn.Linear(feature_dim, hidden), nn.GELU(), nn.Linear(hidden, out))

        if mode == "per_expert":
            self.heads = nn.ModuleDict({k: head(d) for k, d in self.expert_dims.items()})
        else:
            self.width = max(self.expert_dims.values())
            self.heads = nn.ModuleDict({"averaged": head(self.width)})

    def forward(self, features: Tensor, targets: Mapping[str, Tensor], masks: Mapping[str, Tensor]) -> Tensor:
        """The alignment loss for pooled ``features (B, F)``, expert ``targets[e] (B, d_e)`` and ``masks[e] (B,)``."""
        unknown = set(targets) - set(self.expert_dims)
        if unknown or set(targets) != set(masks):
            raise ValueError(
                f"targets and masks must name the same known experts; got {sorted(targets)}, {sorted(masks)}"
            )
        B = features.shape[0]
        if self.mode == "per_expert":
            loss = features.new_zeros(())
            for e, t in targets.items():
                m = masks[e].to(features.dtype)
                cos = F.cosine_similarity(self.heads[e](features), t, dim=-1)
                loss = loss + self.weights[e] * ((1 - cos) * m).sum() / m.sum().clamp_min(1.0)
            return loss
        avg = features.new_zeros(B, self.width)
        count = features.new_zeros(B, 1)
        for e, t in targets.items():
            m = masks[e].to(features.dtype)[:, None]
            avg = avg + m * F.pad(F.normalize(t, dim=-1), (0, self.width - t.shape[1]))
            count = count + m
        has = count[:, 0] > 0
        cos = F.cosine_similarity(self.heads["averaged"](features), avg / count.clamp_min(1.0), dim=-1)
        return ((1 - cos) * has).sum() / has.sum().clamp_min(1)


def _expert_targets(
    targets: Mapping[str, Any] | None, alignment: MultiExpertAlignment, n: int, name: str
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Targets ``{expert: (n, d_e)}`` (NaN rows where the expert does not apply) -> targets and masks for every
    expert of ``alignment``; an expert absent from ``targets`` applies to none of these samples."""
    targets = dict(targets or {})
    unknown = set(targets) - set(alignment.expert_dims)
    if unknown:
        raise ValueError(f"{name} names experts {sorted(unknown)} the alignment does not know")
    out_t, out_m = {}, {}
    for e, d in alignment.expert_dims.items():
        if e in targets:
            t = torch.as_tensor(np.asarray(targets[e], dtype=np.float32))
            if t.shape != (n, d):
                raise ValueError(f"{name}[{e!r}] must have shape {(n, d)}, got {tuple(t.shape)}")
            m = torch.isfinite(t).all(-1)
            out_t[e], out_m[e] = torch.where(m[:, None], t, torch.zeros(())), m
        else:
            out_t[e], out_m[e] = torch.zeros(n, d), torch.zeros(n, dtype=torch.bool)
    return out_t, out_m


def train_tokenizer(
    tokenizer: MedVTokenizer,
    volumes: Any,
    *,
    images: Any = None,
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 2e-3,
    sdr_weight: float = 0.0,
    seed: int = 0,
    clean_volumes: Any = None,
    alignment: MultiExpertAlignment | None = None,
    align_weight: float = 1.0,
    volume_targets: Mapping[str, Any] | None = None,
    image_targets: Mapping[str, Any] | None = None,
) -> MedVTokenizer:
    """Fit with ``L1(pixels) + L_VQ + sdr_weight * L_SD (+ align_weight * L_align)``.

    ``volumes (n, C, D, H, W)`` and, interleaved batch by batch, optional 2-D ``images (m, C, H, W)`` go through
    the same code path. ``clean_volumes`` (same shape as ``volumes``) is the target of the slice-differential term
    when given (noise-free phantoms), so the decoder is not taught to reproduce noise differences. With an
    ``alignment`` (trained jointly), ``volume_targets`` / ``image_targets`` map expert names to frozen expert
    features per sample, ``(n, d_e)`` / ``(m, d_e)``, with NaN rows where that expert does not apply (its mask).
    """
    v = as_volume(volumes, "volumes", tokenizer.in_channels)
    if v.shape[2] < 2 and sdr_weight:
        raise ValueError(
            f"volumes must have at least 2 slices for the slice-differential term, got {tuple(v.shape)}"
        )
    clean = v if clean_volumes is None else as_volume(clean_volumes, "clean_volumes")
    if clean.shape != v.shape:
        raise ValueError(f"clean_volumes must match volumes {tuple(v.shape)}, got {tuple(clean.shape)}")
    im = None
    if images is not None:  # 1-slice volumes, the same code path as the volumes
        im = as_image_tensor(images, "images", ndim=4, channels=tokenizer.in_channels)[:, :, None]
    if sdr_weight < 0:
        raise ValueError(f"sdr_weight must be >= 0, got {sdr_weight}")
    if align_weight < 0:
        raise ValueError(f"align_weight must be >= 0, got {align_weight}")
    if alignment is None and (volume_targets or image_targets):
        raise ValueError("volume_targets / image_targets need an alignment module")
    if alignment is not None:
        if image_targets and im is None:
            raise ValueError("image_targets were given without images")
        vt, vm = _expert_targets(volume_targets, alignment, len(v), "volume_targets")
        it, imask = _expert_targets(image_targets, alignment, 0 if im is None else len(im), "image_targets")
    params = list(tokenizer.parameters()) + ([] if alignment is None else list(alignment.parameters()))

    def loss_on(x: Tensor, targets: dict[str, Tensor] | None, masks: dict[str, Tensor] | None):
        q, _, vq, _ = tokenizer.encode(x)
        rec = tokenizer.decode(q)
        loss = F.l1_loss(rec, x) + vq
        if alignment is not None and align_weight:
            loss = loss + align_weight * alignment(q.flatten(2).mean(-1), targets, masks)
        return loss, rec

    def rows(d: dict[str, Tensor] | None, j: Tensor) -> dict[str, Tensor] | None:
        return None if d is None else {e: t[j] for e, t in d.items()}

    if alignment is None:
        vt = vm = it = imask = None

    def step(idx: Tensor, gen: torch.Generator) -> Tensor:
        loss, rec = loss_on(v[idx], rows(vt, idx), rows(vm, idx))
        if sdr_weight:
            loss = loss + sdr_weight * slice_differential_loss(rec, clean[idx])
        if im is not None:  # one image batch per volume batch, drawn from the loop's generator
            j = torch.randint(len(im), (len(idx),), generator=gen)
            loss = loss + loss_on(im[j], rows(it, j), rows(imask, j))[0]
        return loss

    tokenizer.train()
    if alignment is not None:
        alignment.train()
    fit_minibatches(params, len(v), step, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    if alignment is not None:
        alignment.eval()
    return tokenizer.eval()


def codebook_usage(indices: Tensor, n_codes: int) -> np.ndarray:
    """Fraction of each sub-codebook's codes used in ``indices (..., n_codebooks)``."""
    flat = indices.reshape(-1, indices.shape[-1])
    return np.array([len(torch.unique(flat[:, g])) / n_codes for g in range(flat.shape[1])])
