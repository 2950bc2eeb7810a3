"""SMFSR: noise-started one-step super-resolution with an LR-conditioned SplitMeanFlow and GAN refinement.

*Noise-Started One-Step Real-World Super-Resolution via LR-Conditioned SplitMeanFlow and GAN Refinement*
(Zhu, Zhang, Zheng, Luo, Guo, Yang; arXiv 2605.09328). Average-velocity training from SplitMeanFlow
(arXiv 2507.16884).

Time convention (as the released code): ``t = 0`` is noise, ``t = 1`` is data. Rectified path
``z_t = t x + (1 - t) eps``, velocity ``v = x - eps``. ``c`` is the LR condition.

- **Teacher** (conditional flow matching): ``v_phi(z_t, t | c)`` trained with ``||v_phi(z_t, t | c) - (x - eps)||^2``;
  sampled by Euler steps from ``eps``.
- **Average velocity** ``u(z_a, a, b | c) = (z_b - z_a) / (b - a)`` of the ODE from time ``a`` to ``b``. Interval
  splitting consistency (additivity of integrals), for ``m = a + lam (b - a)`` and
  ``z_m = z_a + (m - a) u(z_a, a, m)``: ``u(z_a, a, b) = lam u(z_a, a, m) + (1 - lam) u(z_m, m, b)``.
- **Stage 1** (SplitMeanFlow distillation): ``|| u_theta(z_a, a, b) - sg[lam u_theta(z_a, a, m) +
  (1 - lam) u_theta(z_m, m, b)] ||^2`` on ``z_a`` from the path, plus the boundary term on ``a = b``:
  ``u_theta(z_a, a, a) = v_phi(z_a, a)``; the student starts from the teacher's weights (its interval embedding
  ``MLP([emb(a), emb(b)])`` reduces to the teacher's at ``a = b``). Boundary fraction and ``lam ~ U(0, 1)``
  are reconstructed [R].
- **One step**: ``x = eps + u_theta(eps, 0, 1 | c)``, ``eps ~ N(0, I)``: one network evaluation, still stochastic.
- **FlowSR** (the user-facing estimator) runs the same recipe on the standardised residual to the bicubic image
  and lets the network predict the data end of the straight line (``u = (D - z_a) / (1 - a)``) rather than the
  velocity; the digits experiment keeps the digest's image-space velocity networks. See :class:`FlowSR`.
- **Stage 2** (GAN refinement) [R: wiring]: the one-step generator is fine-tuned against a discriminator made of
  the teacher's frozen feature trunk and a trainable head (non-saturating loss), plus an L2 fidelity term to HR.
  The paper's VSD term is not built here.

Networks here are residual MLPs over the flattened image (the digest's "small conv/MLP net") with FiLM from the
time/interval embedding; the condition is the bicubic-upsampled LR image, concatenated.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..modules import as_image_tensor, check_positive_int, fit_minibatches, sinusoidal_embedding

__all__ = [
    "FlowSR",
    "IntervalVelocityNet",
    "euler_sample",
    "splitmeanflow_loss",
    "train_flow_matching",
    "train_gan_refinement",
    "train_regression",
    "train_splitmeanflow",
    "upsample_condition",
]


def upsample_condition(lr: Tensor, size: int) -> Tensor:
    """Bicubic upsampling of the LR batch ``(B, C, h, w)`` to ``size x size`` (the condition the nets see)."""
    return F.interpolate(lr, size=(size, size), mode="bicubic", align_corners=False)


class _FiLMBlock(nn.Module):
    def __init__(self, width: int, emb_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, width)
        self.film = nn.Linear(emb_dim, 2 * width)

    def forward(self, h: Tensor, emb: Tensor) -> Tensor:
        scale, shift = self.film(emb).chunk(2, dim=-1)
        return h + self.fc2(F.silu(self.fc1(self.norm(h)) * (1 + scale) + shift))


class IntervalVelocityNet(nn.Module):
    """``f(z, a, b | c)``: a residual MLP on ``[z, upsample(c)]`` with FiLM from ``MLP([emb(a), emb(b)])``.

    As a teacher velocity call it with ``b = a`` (:meth:`velocity`); as the average-velocity student with
    ``a < b``. Images are ``(B, C, H, W)``; the condition ``(B, C, H/s, W/s)``.
    """

    def __init__(
        self, size: int, channels: int = 1, width: int = 256, blocks: int = 3, emb_dim: int = 64
    ) -> None:
        super().__init__()
        self.size, self.channels = check_positive_int(size, "size"), check_positive_int(channels, "channels")
        self.emb_dim = check_positive_int(emb_dim, "emb_dim", 2)
        width = check_positive_int(width, "width")
        d = channels * size * size
        self.time_mlp = nn.Sequential(nn.Linear(2 * emb_dim, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        self.inp = nn.Linear(2 * d, width)
        self.blocks = nn.ModuleList(
            _FiLMBlock(width, emb_dim) for _ in range(check_positive_int(blocks, "blocks"))
        )
        self.out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, d))

    def trunk(self, z: Tensor, a: Tensor, b: Tensor, cond: Tensor) -> Tensor:
        """Hidden features ``(B, width)`` (the stage-2 discriminator reuses a frozen copy)."""
        emb = self.time_mlp(
            torch.cat(
                [sinusoidal_embedding(a * 1000, self.emb_dim), sinusoidal_embedding(b * 1000, self.emb_dim)],
                dim=-1,
            )
        )
        c = upsample_condition(cond, self.size)
        h = self.inp(torch.cat([z.flatten(1), c.flatten(1)], dim=1))
        for block in self.blocks:
            h = block(h, emb)
        return h

    def forward(self, z: Tensor, a: Tensor, b: Tensor, cond: Tensor) -> Tensor:
        return self.out(self.trunk(z, a, b, cond)).view_as(z)

    def velocity(self, z: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        return self(z, t, t, cond)


def _times(t: Any, batch: int) -> Tensor:
    t = torch.as_tensor(t, dtype=torch.float32)
    return t.expand(batch) if t.ndim == 0 else t


@torch.no_grad()
def euler_sample(net: IntervalVelocityNet, noise: Tensor, cond: Tensor, steps: int) -> Tensor:
    """Integrate ``dz/dt = v(z, t | c)`` from ``t = 0`` (noise) to ``t = 1`` with ``steps`` Euler steps."""
    steps = check_positive_int(steps, "steps")
    z, dt = noise, 1.0 / steps
    for i in range(steps):
        z = z + dt * net.velocity(z, _times(i * dt, len(z)), cond)
    return z


def splitmeanflow_loss(
    student: IntervalVelocityNet,
    teacher: IntervalVelocityNet,
    x: Tensor,
    cond: Tensor,
    generator: torch.Generator | None = None,
    boundary_fraction: float = 0.25,
) -> Tensor:
    """One batch of the stage-1 loss: interval-splitting consistency (stop-gradient target) on ``a < b`` pairs
    plus the boundary term ``u(z_a, a, a) = v_teacher(z_a, a)`` on a ``boundary_fraction`` of the batch."""
    if not 0 <= boundary_fraction <= 1:
        raise ValueError(f"boundary_fraction must be in [0, 1], got {boundary_fraction}")
    B = len(x)
    eps = torch.randn(x.shape, generator=generator)
    t2 = torch.rand(B, 2, generator=generator)
    a, b = t2.min(1).values, t2.max(1).values
    lam = torch.rand(B, generator=generator)
    boundary = torch.rand(B, generator=generator) < boundary_fraction
    b = torch.where(boundary, a, b)
    z_a = a.view(-1, 1, 1, 1) * x + (1 - a.view(-1, 1, 1, 1)) * eps
    m = a + lam * (b - a)
    with torch.no_grad():
        u_am = student(z_a, a, m, cond)
        z_m = z_a + (m - a).view(-1, 1, 1, 1) * u_am
        target = lam.view(-1, 1, 1, 1) * u_am + (1 - lam.view(-1, 1, 1, 1)) * student(z_m, m, b, cond)
        target = torch.where(boundary.view(-1, 1, 1, 1), teacher.velocity(z_a, a, cond), target)
    return F.mse_loss(student(z_a, a, b, cond), target)


def _pair(hr: Any, lr_images: Any) -> tuple[Tensor, Tensor]:
    x = as_image_tensor(hr, "hr", ndim=4)
    c = as_image_tensor(lr_images, "lr_images", ndim=4)
    if len(x) != len(c) or x.shape[1] != c.shape[1]:
        raise ValueError(
            f"hr {tuple(x.shape)} and lr_images {tuple(c.shape)} must pair up (same n and channels)"
        )
    return x, c


def _fit(
    params: Any,
    n: int,
    step: Any,
    losses: list[float] | None,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> None:
    """:func:`fit_minibatches`, appending each epoch's mean mini-batch loss to ``losses`` (when a list)."""
    if losses is not None and not isinstance(losses, list):
        raise ValueError(f"losses must be a list (or None), got {type(losses).__name__}")
    batch_losses: list[float] = []

    def recorded(idx, gen):
        loss = step(idx, gen)
        batch_losses.append(float(loss.detach()))
        return loss

    fit_minibatches(params, n, recorded, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    if losses is not None:
        per = -(-n // batch_size)
        losses.extend(float(np.mean(batch_losses[i : i + per])) for i in range(0, len(batch_losses), per))


def train_flow_matching(
    net: IntervalVelocityNet,
    hr: Any,
    lr_images: Any,
    *,
    epochs: int = 30,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    losses: list[float] | None = None,
) -> IntervalVelocityNet:
    """Conditional flow matching on the rectified path: ``||v(z_t, t | c) - (x - eps)||^2``, ``t ~ U(0, 1)``.

    Every trainer here appends each epoch's mean mini-batch loss to ``losses`` when given a list."""
    x, c = _pair(hr, lr_images)

    def step(idx, gen):
        xb = x[idx]
        eps = torch.randn(xb.shape, generator=gen)
        t = torch.rand(len(xb), generator=gen)
        z = t.view(-1, 1, 1, 1) * xb + (1 - t.view(-1, 1, 1, 1)) * eps
        return F.mse_loss(net.velocity(z, t, c[idx]), xb - eps)

    net.train()
    _fit(net.parameters(), len(x), step, losses, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    return net.eval()


def train_splitmeanflow(
    student: IntervalVelocityNet,
    teacher: IntervalVelocityNet,
    hr: Any,
    lr_images: Any,
    *,
    epochs: int = 30,
    batch_size: int = 128,
    lr: float = 1e-3,
    boundary_fraction: float = 0.25,
    seed: int = 0,
    losses: list[float] | None = None,
) -> IntervalVelocityNet:
    """Stage 1: distil the frozen ``teacher`` into the average-velocity ``student`` (see the module docstring)."""
    x, c = _pair(hr, lr_images)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)

    def step(idx, gen):
        return splitmeanflow_loss(student, teacher, x[idx], c[idx], gen, boundary_fraction)

    student.train()
    _fit(student.parameters(), len(x), step, losses, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    return student.eval()


def train_regression(
    net: IntervalVelocityNet,
    hr: Any,
    lr_images: Any,
    *,
    epochs: int = 30,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    losses: list[float] | None = None,
) -> IntervalVelocityNet:
    """The direct LR -> HR baseline: the same network, input noise fixed at zero, trained with MSE."""
    x, c = _pair(hr, lr_images)
    zeros = torch.zeros_like(x[:1])

    def step(idx, gen):
        n = len(idx)
        out = net(zeros.expand(n, -1, -1, -1), torch.zeros(n), torch.ones(n), c[idx])
        return F.mse_loss(out, x[idx])

    net.train()
    _fit(net.parameters(), len(x), step, losses, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    return net.eval()


def train_gan_refinement(
    generator: IntervalVelocityNet,
    teacher: IntervalVelocityNet,
    hr: Any,
    lr_images: Any,
    *,
    epochs: int = 10,
    batch_size: int = 128,
    lr: float = 2e-4,
    fidelity_weight: float = 1.0,
    seed: int = 0,
    losses: list[float] | None = None,
) -> IntervalVelocityNet:
    """Stage 2 [R]: fine-tune the one-step generator ``x = eps + u(eps, 0, 1 | c)`` against a discriminator made of
    the teacher's frozen trunk (evaluated at ``t = 1``, the data end) and a trainable linear head on it and the
    condition; non-saturating GAN loss + ``fidelity_weight`` x MSE to HR. One discriminator step per generator step."""
    x, c = _pair(hr, lr_images)
    if fidelity_weight < 0:
        raise ValueError(f"fidelity_weight must be >= 0, got {fidelity_weight}")
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    width = teacher.inp.out_features
    head = nn.Sequential(nn.Linear(width, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
    opt_d = torch.optim.Adam(head.parameters(), lr=4 * lr, betas=(0.5, 0.999))

    def disc(img: Tensor, cond: Tensor) -> Tensor:
        n = len(img)
        return head(teacher.trunk(img, torch.ones(n), torch.ones(n), cond)).squeeze(-1)

    def step(idx, gen):
        xb, cb = x[idx], c[idx]
        n = len(xb)
        eps = torch.randn(xb.shape, generator=gen)
        fake = eps + generator(eps, torch.zeros(n), torch.ones(n), cb)
        d_loss = F.softplus(-disc(xb, cb)).mean() + F.softplus(disc(fake.detach(), cb)).mean()
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()
        return F.softplus(-disc(fake, cb)).mean() + fidelity_weight * F.mse_loss(fake, xb)

    generator.train()
    _fit(generator.parameters(), len(x), step, losses, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    return generator.eval()


class _DataPrediction(nn.Module):
    """``u(z, a, b | c) = (D(z, a, b | c) - z) / max(1 - a, 0.05)``: ``net`` predicts the data end ``D`` and the
    average velocity is read off the straight line to it (at ``b = a``: the rectified path's velocity
    ``(x_hat - z_t) / (1 - t)``; at ``a = 0, b = 1`` the one-step output is ``D(eps, 0, 1 | c)`` itself)."""

    def __init__(self, net: IntervalVelocityNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, z: Tensor, a: Tensor, b: Tensor, cond: Tensor) -> Tensor:
        return (self.net(z, a, b, cond) - z) / (1 - a).clamp(min=0.05).view(-1, *([1] * (z.ndim - 1)))

    def velocity(self, z: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        return self(z, t, t, cond)

    @property
    def inp(self) -> nn.Linear:
        return self.net.inp

    def trunk(self, z: Tensor, a: Tensor, b: Tensor, cond: Tensor) -> Tensor:
        return self.net.trunk(z, a, b, cond)


class FlowSR:
    """The SMFSR recipe for a user's paired images, scikit-learn style.

    ``fit(hr, lr_images)`` trains the conditional flow-matching teacher, distils it into the one-step
    SplitMeanFlow student (stage 1) and, if ``gan_epochs > 0``, refines it adversarially (stage 2).
    ``predict(lr_images, seed=0)`` returns one HR sample per LR image in one network evaluation;
    ``predict(..., n_samples=k)`` returns ``(k, n, C, H, W)`` different plausible outputs.
    Images ``(n, C, H, W)``, values in ``[-1, 1]``; HR side ``scale`` times the LR side; outputs are clipped
    to ``[-1, 1]``.

    ``target`` is what the flow carries from noise to data:

    - ``"residual"`` (default): the HR image minus the bicubic upsampling of its LR image, divided by the
      residual's standard deviation over the training pairs (``residual_scale_``, the analogue of a latent
      diffusion model's latent scaling factor). Noise still starts every sample; the output is
      ``bicubic(LR) + residual_scale_ * (eps + u(eps, 0, 1 | LR))``. A network that has learnt nothing returns
      about the bicubic image; on natural images the image target below falls far short of bicubic.
    - ``"image"``: the HR image itself, as in the paper's latent space and in this paper's digits experiment.

    ``parametrization`` is what the network outputs: ``"data"`` (default) the data end ``D`` of a straight line,
    ``u(z_a, a, b) = (D - z_a) / max(1 - a, 0.05)``, so the one-step sample is ``D(eps, 0, 1 | LR)`` and a
    flat region needs a constant output rather than an exact cancellation of the noise; ``"velocity"`` the
    average velocity itself (the paper's and the experiment's). ``teacher_losses_`` and ``student_losses_`` hold
    each epoch's mean training loss.
    """

    def __init__(
        self,
        width: int = 256,
        blocks: int = 3,
        teacher_epochs: int = 60,
        student_epochs: int = 60,
        gan_epochs: int = 0,
        boundary_fraction: float = 0.25,
        batch_size: int = 128,
        target: str = "residual",
        parametrization: str = "data",
        seed: int = 0,
    ) -> None:
        self.width, self.blocks, self.teacher_epochs, self.student_epochs = (
            width,
            blocks,
            teacher_epochs,
            student_epochs,
        )
        self.gan_epochs, self.boundary_fraction, self.batch_size = gan_epochs, boundary_fraction, batch_size
        self.target, self.parametrization, self.seed = target, parametrization, seed
        self._validate_params()

    def _validate_params(self) -> None:
        for name in ("width", "blocks", "teacher_epochs", "student_epochs", "batch_size"):
            check_positive_int(getattr(self, name), name)
        g = self.gan_epochs
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0:
            raise ValueError(f"gan_epochs must be an integer >= 0, got {g!r}")
        if not 0 <= self.boundary_fraction <= 1:
            raise ValueError(f"boundary_fraction must be in [0, 1], got {self.boundary_fraction}")
        if self.target not in ("residual", "image"):
            raise ValueError(f"target must be 'residual' or 'image', got {self.target!r}")
        if self.parametrization not in ("data", "velocity"):
            raise ValueError(f"parametrization must be 'data' or 'velocity', got {self.parametrization!r}")

    def _net(self) -> nn.Module:
        net = IntervalVelocityNet(self.shape_[-1], self.shape_[0], self.width, self.blocks)
        return _DataPrediction(net) if self.parametrization == "data" else net

    @staticmethod
    def _in_range(t: Tensor, name: str) -> None:
        lo, hi = float(t.min()), float(t.max())
        if lo < -1 - 1e-4 or hi > 1 + 1e-4:
            raise ValueError(
                f"{name} values must lie in [-1, 1] (rescale the images, e.g. x / 127.5 - 1 for 8-bit), "
                f"got [{lo:.4g}, {hi:.4g}]"
            )

    def _base(self, c: Tensor) -> Tensor:
        if self.target == "image":
            return torch.zeros((len(c), *self.shape_))
        return upsample_condition(c, self.shape_[-1])

    def fit(self, hr: Any, lr_images: Any) -> FlowSR:
        self._validate_params()
        x, c = _pair(hr, lr_images)
        if x.shape[-1] != x.shape[-2] or c.shape[-1] != c.shape[-2] or x.shape[-1] % c.shape[-1]:
            raise ValueError(
                f"hr and lr_images must be square, hr's side a whole multiple of lr_images', got "
                f"{tuple(x.shape)}, {tuple(c.shape)}"
            )
        self._in_range(x, "hr")
        self._in_range(c, "lr_images")
        self.shape_ = tuple(x.shape[1:])
        self.lr_shape_ = tuple(c.shape[1:])
        target = x - self._base(c)
        self.residual_scale_ = 1.0
        if self.target == "residual":
            self.residual_scale_ = max(float(target.std()), 1e-6)
        target = target / self.residual_scale_
        torch.manual_seed(self.seed)
        self.teacher_ = self._net()
        self.teacher_losses_: list[float] = []
        train_flow_matching(
            self.teacher_,
            target,
            c,
            epochs=self.teacher_epochs,
            batch_size=self.batch_size,
            seed=self.seed,
            losses=self.teacher_losses_,
        )
        self.student_ = self._net()
        self.student_.load_state_dict(self.teacher_.state_dict())
        self.student_losses_: list[float] = []
        train_splitmeanflow(
            self.student_,
            self.teacher_,
            target,
            c,
            epochs=self.student_epochs,
            batch_size=self.batch_size,
            boundary_fraction=self.boundary_fraction,
            seed=self.seed,
            losses=self.student_losses_,
        )
        if self.gan_epochs:
            train_gan_refinement(
                self.student_,
                self.teacher_,
                target,
                c,
                epochs=self.gan_epochs,
                batch_size=self.batch_size,
                seed=self.seed,
            )
        return self

    @torch.no_grad()
    def predict(self, lr_images: Any, n_samples: int | None = None, seed: int = 0) -> np.ndarray:
        if not hasattr(self, "student_"):
            raise RuntimeError("this FlowSR is not fitted yet; call fit first")
        c = as_image_tensor(lr_images, "lr_images", ndim=4)
        if tuple(c.shape[1:]) != self.lr_shape_:
            raise ValueError(
                f"lr_images must be (N, {', '.join(map(str, self.lr_shape_))}) like the training inputs, "
                f"got {tuple(c.shape)}"
            )
        self._in_range(c, "lr_images")
        k = 1 if n_samples is None else check_positive_int(n_samples, "n_samples")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        gen = torch.Generator().manual_seed(int(seed))
        base = self._base(c)
        zeros, ones = torch.zeros(len(c)), torch.ones(len(c))
        out = []
        for _ in range(k):
            eps = torch.randn((len(c), *self.shape_), generator=gen)
            sample = eps + self.student_(eps, zeros, ones, c)
            out.append((base + self.residual_scale_ * sample).clamp(-1, 1))
        res = torch.stack(out).numpy()
        return res[0] if n_samples is None else res
