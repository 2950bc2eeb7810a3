"""Next-Latent prediction (NextLat): a transformer LM trained to also predict its own next hidden state.

Teoh et al., "Next-Latent Prediction Transformers Learn Compact World Models", arXiv 2511.05963. Notation: ``h_t``
is the final hidden vector at position t, exactly what the LM head ``W`` reads (after the final norm), and
``E`` the token embedding. A latent dynamics MLP ``p_psi`` predicts the next latent from the current one and the
next token, as a residual step on a normalised concatenation:

    h_hat_{t+1} = h_t + MLP(Norm([h_t, E(x_{t+1})]))

Losses (targets are stop-gradient; the KL branch decodes with detached head weights):

    L_NTP = CE(W h_t, x_{t+1})
    L_h   = SmoothL1(h_hat_{t+1}, sg(h_{t+1}))                                   (element mean)
    L_KL  = KL( sg(softmax(W h_{t+1})) || softmax(sg(W) h_hat_{t+1}) )
    L     = L_NTP + lambda_h L_h + lambda_KL L_KL

With horizon ``d > 1`` the dynamics roll out with teacher-forced tokens, ``h_hat_{t+k} = p_psi(h_hat_{t+k-1},
x_{t+k})``, and both latent losses are averaged over k = 1..d. Gradients reach the transformer through the source
latent ``h_t`` and through ``E``; the dynamics model is used only in training and by self-speculative decoding
(:func:`~neurips26.lm.nextlat.self_speculative_decode`); the deployed LM is the unchanged transformer.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..transformer import GPT, GPTConfig, next_token_loss

__all__ = ["LatentDynamics", "MultiTokenModel", "NextLatModel"]


def _nonneg(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 and math.isfinite(value))
    ):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


def _posint(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


class LatentDynamics(nn.Module):
    """``p_psi(h, e) = h + MLP(LayerNorm([h, e]))`` with ``layers`` linear layers (GELU between them).

    The last layer starts at zero, so at initialisation the prediction is the identity ``h_hat_{t+1} = h_t``.
    """

    def __init__(self, d_model: int, hidden: int | None = None, layers: int = 3) -> None:
        super().__init__()
        _posint("d_model", d_model)
        _posint("layers", layers)
        hidden = _posint("hidden", hidden) if hidden is not None else 2 * d_model
        self.norm = nn.LayerNorm(2 * d_model)
        widths = [2 * d_model] + [hidden] * (layers - 1) + [d_model]
        mods: list[nn.Module] = []
        for i in range(layers):
            mods.append(nn.Linear(widths[i], widths[i + 1]))
            if i < layers - 1:
                mods.append(nn.GELU())
        self.mlp = nn.Sequential(*mods)
        nn.init.zeros_(self.mlp[-1].weight)
        nn.init.zeros_(self.mlp[-1].bias)

    def forward(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        if h.shape != e.shape:
            raise ValueError(f"h and e must have the same shape, got {tuple(h.shape)} and {tuple(e.shape)}")
        return h + self.mlp(self.norm(torch.cat([h, e], dim=-1)))


class NextLatModel(nn.Module):
    """A :class:`~neurips26.lm.GPT` plus NextLat's latent dynamics and its two auxiliary losses.

    Parameters
    ----------
    gpt : the language model (a :class:`GPT` or a :class:`GPTConfig` to build one).
    horizon : roll-out steps d of the dynamics (1 in the paper's default; 4 and 8 swept).
    lambda_h : weight of the Smooth-L1 next-latent loss. lambda_kl : weight of the KL consistency loss.
    dynamics_layers, dynamics_hidden : the MLP of ``p_psi`` (3 layers; hidden 2 x d_model by default).

    ``forward(idx)`` returns the LM's logits (the deployed model is the transformer alone), so
    :func:`neurips26.lm.evaluate` and ``generate`` work as for a GPT; :func:`neurips26.lm.train` calls
    :meth:`training_loss`.
    """

    def __init__(
        self,
        gpt: GPT | GPTConfig,
        horizon: int = 1,
        lambda_h: float = 1.0,
        lambda_kl: float = 0.5,
        dynamics_layers: int = 3,
        dynamics_hidden: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(gpt, GPTConfig):
            gpt = GPT(gpt)
        if not isinstance(gpt, GPT):
            raise TypeError(f"gpt must be a GPT or a GPTConfig, got {type(gpt).__name__}")
        self.gpt = gpt
        self.config = gpt.config
        self.horizon = _posint("horizon", horizon)
        self.lambda_h = _nonneg("lambda_h", lambda_h)
        self.lambda_kl = _nonneg("lambda_kl", lambda_kl)
        self.dynamics = LatentDynamics(gpt.config.d_model, dynamics_hidden, dynamics_layers)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.gpt(idx)

    def hidden_states(self, idx: torch.Tensor) -> torch.Tensor:
        return self.gpt.hidden_states(idx)

    def step(self, h: torch.Tensor, next_tokens: torch.Tensor) -> torch.Tensor:
        """One dynamics step: ``h_hat_{t+1} = p_psi(h_t, E(x_{t+1}))``."""
        return self.dynamics(h, self.gpt.embed(next_tokens))

    def rollout(
        self, h: torch.Tensor, tokens: torch.Tensor, horizon: int | None = None
    ) -> list[torch.Tensor]:
        """Teacher-forced roll-out from every source latent.

        ``h``: (B, T, D) latents of ``tokens`` (B, T). Returns ``[h_hat^(1), ..., h_hat^(d)]`` where
        ``h_hat^(k)[:, t]`` predicts ``h[:, t + k]`` from ``h[:, t]`` and tokens ``x_{t+1..t+k}``; its shape is
        (B, T - k, D).
        """
        horizon = self.horizon if horizon is None else _posint("horizon", horizon)
        T = tokens.shape[1]
        if h.shape[:2] != tokens.shape:
            raise ValueError(
                f"h must be (B, T, D) for tokens (B, T), got {tuple(h.shape)} and {tuple(tokens.shape)}"
            )
        if horizon >= T:
            raise ValueError(f"horizon must be smaller than the sequence length {T}, got {horizon}")
        preds, pred = [], h
        for k in range(1, horizon + 1):
            pred = self.step(pred[:, : T - k], tokens[:, k:])  # x_{t+k} for sources t = 0 .. T-1-k
            preds.append(pred)
        return preds

    def latent_losses(self, h: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(L_h, L_KL), each averaged over the horizon's steps."""
        W = self.gpt.head.weight
        loss_h = h.new_zeros(())
        loss_kl = h.new_zeros(())
        preds = self.rollout(h, tokens)
        for k, pred in enumerate(preds, start=1):
            target = h[:, k:].detach()
            loss_h = loss_h + F.smooth_l1_loss(pred, target)
            with torch.no_grad():
                p_log = F.log_softmax(F.linear(target, W), dim=-1)
            q_log = F.log_softmax(F.linear(pred, W.detach()), dim=-1)
            kl = (p_log.exp() * (p_log - q_log)).sum(-1).mean()
            loss_kl = loss_kl + kl
        return loss_h / len(preds), loss_kl / len(preds)

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        h = self.gpt.hidden_states(x)
        ntp = next_token_loss(self.gpt.head(h), y)
        loss_h, loss_kl = self.latent_losses(h, x)
        loss = ntp + self.lambda_h * loss_h + self.lambda_kl * loss_kl
        logs = {
            "ntp": float(ntp.detach()),
            "latent": float(loss_h.detach()),
            "kl": float(loss_kl.detach()),
            "latent_var": float(h.detach().var(dim=(0, 1)).mean()),  # collapse check
        }
        return loss, logs

    def num_parameters(self, part: str = "deployed") -> int:
        """``"deployed"`` (the transformer alone), ``"dynamics"`` (training-only) or ``"all"``."""
        if part == "deployed":
            return self.gpt.num_parameters()
        if part == "dynamics":
            return sum(p.numel() for p in self.dynamics.parameters())
        if part == "all":
            return sum(p.numel() for p in self.parameters())
        raise ValueError(f"part must be 'deployed', 'dynamics' or 'all', got {part!r}")


class MultiTokenModel(nn.Module):
    """Multi-token prediction baseline (MTP): extra linear heads on ``h_t`` predict ``x_{t+2} .. x_{t+n}``.

    ``heads=1`` is MTP-2 (next token from the tied head, the token after it from one extra head). The extra losses
    are averaged and added to the next-token loss with weight ``weight``.
    """

    def __init__(self, gpt: GPT | GPTConfig, heads: int = 1, weight: float = 1.0) -> None:
        super().__init__()
        if isinstance(gpt, GPTConfig):
            gpt = GPT(gpt)
        if not isinstance(gpt, GPT):
            raise TypeError(f"gpt must be a GPT or a GPTConfig, got {type(gpt).__name__}")
        self.gpt = gpt
        self.config = gpt.config
        self.weight = _nonneg("weight", weight)
        self.extra = nn.ModuleList(
            nn.Linear(gpt.config.d_model, gpt.config.vocab_size, bias=False)
            for _ in range(_posint("heads", heads))
        )
        for head in self.extra:
            nn.init.normal_(head.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.gpt(idx)

    def hidden_states(self, idx: torch.Tensor) -> torch.Tensor:
        return self.gpt.hidden_states(idx)

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        h = self.gpt.hidden_states(x)
        ntp = next_token_loss(self.gpt.head(h), y)
        extra = h.new_zeros(())
        for j, head in enumerate(self.extra, start=1):  # head j predicts y shifted by j (x_{t+1+j})
            extra = extra + next_token_loss(head(h[:, :-j]), y[:, j:])
        extra = extra / len(self.extra)
        return ntp + self.weight * extra, {"ntp": float(ntp.detach()), "mtp": float(extra.detach())}

    def num_parameters(self, part: str = "deployed") -> int:
        if part == "deployed":
            return self.gpt.num_parameters()
        if part == "all":
            return sum(p.numel() for p in self.parameters())
        raise ValueError(f"part must be 'deployed' or 'all', got {part!r}")
