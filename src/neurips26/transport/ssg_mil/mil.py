"""Attention-MIL networks and estimators: the baselines (ABMIL, gated ABMIL, mean and max pooling) and the
Sparse Support Grounding MIL trainer that adds the unbalanced-transport grounding loss.

Baselines: Ilse, Tomczak, Welling (2018), "Attention-based deep multiple instance learning" (ABMIL, eq. 8;
gated ABMIL, eq. 9), and the mean/max pooling operators of the same paper (embedding-level pooling).

Sparse Support Grounding (digest ``ssg-mil``; paper text not available, every step below is [R]econstructed from
the abstract, see the package docstring):

1. encoder ``h_i = f(x_i)``; the bag head is gated attention over *all* instances (the full-bag classifier);
2. bag-specific evidence support ``S_b``: top-``k`` instances by ``a_i * p_inst(y | h_i)`` (no gradient), pushed
   into a per-class FIFO memory of the last ``M`` training bags (raw inputs, re-encoded at every step);
3. label-consistent support ``U_y`` = memory of class ``y`` (without the bag itself), inconsistent ``U_not_y``;
4. entropic unbalanced OT (cost ``1 - cos``, ``a = 1/m``, uniform targets, blur ``eps``, KL relaxation ``rho``)
   gives the retained masses ``r+`` (to ``U_y``) and ``r-`` (to ``U_not_y``);
5. grounding strength ``w_i = relu(r+_i - r-_i)`` on the *unclipped* retained masses (a mass above 1 is the
   support's demand pulling on the instance: evidence, not surplus), normalised within the bag; the
   reconstructions ``relu(log r+ - log r-)`` and a tempered softmax of ``log r+ - log r-`` are options;
6. ``L = L_bag + lambda L_g``, ``L_g = -sum_i w_i log p_inst(1 | h_i)`` on positive bags and
   ``-mean_i log p_inst(0 | h_i)`` on negative bags (optionally with ``lambda`` ramped in after the warm-up),
   plus, optionally (weight ``align_weight``), an attention alignment ``KL(w || attention)``. The digest writes
   ``KL(attention || w)``, which is infinite wherever the sparse ``w`` is 0: we use the other direction;
7. inference: the bag head only; instance scores are ``p_inst`` (or the attention).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from torch import nn
from torch.nn import functional as F

from .bags import check_bags, pad_bags
from .uot import _check_params, _plan

__all__ = [
    "MILNet",
    "AttentionMIL",
    "SparseSupportGroundingMIL",
    "support_retained_mass",
    "grounding_weights",
    "CONTRASTS",
]

POOLINGS = ("gated", "attention", "mean", "max")


class MILNet(nn.Module):
    """Instance encoder, a pooling operator, a bag head and an instance head.

    ``pooling``: ``"attention"`` (ABMIL, ``a_i ∝ exp(w^T tanh(V h_i))``), ``"gated"`` (gated ABMIL,
    ``a_i ∝ exp(w^T (tanh(V h_i) * sigm(U h_i)))``), ``"mean"`` or ``"max"`` (feature-wise). Padding instances
    (``mask == False``) never enter the pooling. ``generator`` seeds the initialisation (PyTorch's default
    ``nn.Linear`` scheme) without touching the global torch random state.
    """

    def __init__(
        self,
        n_features: int,
        hidden: int = 64,
        attention_dim: int = 32,
        pooling: str = "gated",
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling

        def linear(n_in: int, n_out: int) -> nn.Linear:
            # with a generator the layer is created uninitialised (the global torch RNG is never drawn from)
            return nn.Linear(n_in, n_out) if generator is None else nn.utils.skip_init(nn.Linear, n_in, n_out)

        self.encoder = nn.Sequential(
            linear(n_features, hidden), nn.ReLU(), linear(hidden, hidden)
        )  # no final ReLU: non-negative embeddings would squeeze every cosine cost towards 0
        self.att_v = linear(hidden, attention_dim)
        self.att_u = linear(hidden, attention_dim)
        self.att_w = linear(attention_dim, 1)
        self.bag_head = linear(hidden, 1)
        self.instance_head = linear(hidden, 1)
        if generator is not None:
            for layer in self.modules():
                if isinstance(layer, nn.Linear):  # nn.Linear.reset_parameters, drawn from ``generator``
                    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
                    bound = 1.0 / math.sqrt(layer.in_features)
                    nn.init.uniform_(layer.bias, -bound, bound, generator=generator)

    def forward(self, X: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.encoder(X)  # (B, m, H)
        neg = torch.finfo(h.dtype).min
        if self.pooling in ("attention", "gated"):
            v = torch.tanh(self.att_v(h))
            if self.pooling == "gated":
                v = v * torch.sigmoid(self.att_u(h))
            att_logit = self.att_w(v).squeeze(-1).masked_fill(~mask, neg)
            att = torch.softmax(att_logit, dim=-1)
            z = torch.einsum("bm,bmh->bh", att, h)
        else:
            att_logit = None
            att = mask.to(h.dtype) / mask.sum(-1, keepdim=True)
            if self.pooling == "mean":
                z = torch.einsum("bm,bmh->bh", att, h)
            else:
                z = h.masked_fill(~mask.unsqueeze(-1), neg).amax(1)
        return {
            "h": h,
            "attention": att,
            "attention_logit": att_logit,
            "bag_logit": self.bag_head(z).squeeze(-1),
            "instance_logit": self.instance_head(h).squeeze(-1),
            # embedding-level pooling has no attention: localise with the bag head applied to each instance
            "bag_head_instance_logit": self.bag_head(h).squeeze(-1),
        }


def support_retained_mass(
    h: torch.Tensor,
    mask: torch.Tensor,
    support: torch.Tensor,
    support_mask: torch.Tensor,
    eps: float = 0.05,
    rho: float = 0.5,
    n_iter: int = 50,
) -> torch.Tensor:
    """Retained mass of every instance of every bag when transported onto a support set (step 4 of the method).

    Parameters
    ----------
    h : (B, m, H) instance embeddings (normalised here; the cost is ``1 - cos``).
    mask : (B, m) valid instances; source masses ``a_i = 1 / m_b`` on them.
    support : (S, H) support embeddings shared by the batch, or (B, S, H) one support set per bag.
    support_mask : (B, S) which support points each bag may use (uniform target mass on them).
    eps, rho : entropic blur and KL marginal relaxation of the unbalanced OT (``rho = inf``: balanced).

    Returns
    -------
    r : (B, m) unclipped retained mass ``(P 1)_i / a_i`` (0 on padding, and 0 for a bag whose support is
        empty). It exceeds 1 where the support's demand pulls extra mass onto an instance (the target marginal
        is KL-relaxed too); that excess is label evidence (many support points of the same kind), so it is kept.
    """
    if h.ndim != 3 or mask.shape != h.shape[:2]:
        raise ValueError(f"h must be (B, m, H) and mask (B, m); got {tuple(h.shape)} and {tuple(mask.shape)}")
    shared = support.ndim == 2
    if (
        support.ndim not in (2, 3)
        or (not shared and support.shape[0] != h.shape[0])
        or support.shape[-1] != h.shape[2]
        or support_mask.shape != (h.shape[0], support.shape[-2])
    ):
        raise ValueError(
            "support must be (S, H) or (B, S, H) with the embedding size of h, and support_mask (B, S)"
        )
    _check_params(eps, rho, n_iter)
    hn = F.normalize(h, dim=-1)
    sn = F.normalize(support, dim=-1)
    C = (1.0 - hn @ sn.transpose(-1, -2)).clamp_min(0.0)  # (B, m, S)
    a = mask.to(h.dtype) / mask.sum(-1, keepdim=True).clamp_min(1)
    b = support_mask.to(h.dtype) / support_mask.sum(-1, keepdim=True).clamp_min(1)
    method = "scaling" if 2.0 / eps <= 300.0 else "log"  # cos costs lie in [0, 2]
    P = _plan(a, b, C, eps, rho, n_iter, 1e-3, False, method)  # finite by construction: no re-validation
    r = torch.where(mask, P.sum(-1) / a.clamp_min(torch.finfo(a.dtype).tiny), torch.zeros_like(a))
    return r * support_mask.any(-1, keepdim=True).to(r.dtype)


CONTRASTS = ("difference", "log_ratio", "softmax", "none")


def grounding_weights(
    r_plus: torch.Tensor,
    r_minus: torch.Tensor | None,
    mask: torch.Tensor,
    contrast: str = "difference",
    temperature: float = 0.25,
) -> torch.Tensor:
    """Grounding strengths ``w`` from the retained masses, normalised within each bag (step 5 of the method).

    ``contrast``:

    - ``"difference"``: ``w_i = relu(r+_i - r-_i)`` on the unclipped masses (the digest's form);
    - ``"log_ratio"``: ``w_i = relu(log r+_i - log r-_i)`` (scale-free: ``log r = -f / rho`` at the fixed point);
    - ``"softmax"``: ``w = softmax((log r+ - log r-) / temperature)`` over the bag (a tempered contrast that
      never zeroes a whole bag; ``temperature -> 0`` puts all weight on the best-grounded instance);
    - ``"none"``: ``w_i = r+_i`` (the "r+ only" ablation: matchable anywhere counts, no label contrast).

    ``r_minus`` is ignored (and may be None) for ``"none"``. A bag in which no instance matches label-consistent
    evidence better than label-inconsistent evidence gets ``w = 0`` (no grounding signal), never a uniform
    fallback; so does a bag whose masses are all 0 (empty support).
    """
    if contrast not in CONTRASTS:
        raise ValueError(f"contrast must be one of {CONTRASTS}, got {contrast!r}")
    if contrast != "none" and r_minus is None:
        raise ValueError(f"contrast={contrast!r} needs r_minus")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite float > 0, got {temperature!r}")
    valid = mask & (r_plus > 0)
    if contrast == "none":
        w = r_plus
    else:
        tiny = torch.finfo(r_plus.dtype).tiny
        log_ratio = torch.log(r_plus.clamp_min(tiny)) - torch.log(r_minus.clamp_min(tiny))
        if contrast == "difference":
            w = F.relu(r_plus - r_minus)
        elif contrast == "log_ratio":
            w = F.relu(log_ratio)
        else:
            logits = (log_ratio / temperature).masked_fill(~valid, -math.inf)
            w = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # an all-invalid bag: 0
    w = w * valid.to(w.dtype)
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp_min(1e-12), torch.zeros_like(w))


def _check_int(value, name: str, low: int) -> None:
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_float(value, name: str, low: float, high: float = math.inf, low_open: bool = False) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        rng = f"{'(' if low_open else '['}{low}, {high}]"
        raise ValueError(f"{name} must be a float in {rng}, got {value!r}")


class _MILEstimator(ClassifierMixin, BaseEstimator):
    """Shared training loop and inference of the MIL estimators (scikit-learn conventions: ``__init__`` stores
    parameters, ``fit`` returns ``self``, learned state ends in ``_``; ``X`` is a list of bags)."""

    def _check_params(self) -> None:
        _check_int(self.hidden, "hidden", 1)
        _check_int(self.attention_dim, "attention_dim", 1)
        _check_int(self.epochs, "epochs", 1)
        _check_int(self.batch_size, "batch_size", 1)
        _check_float(self.lr, "lr", 0.0, low_open=True)
        _check_float(self.weight_decay, "weight_decay", 0.0)

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(bags, y) first")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "net_")

    # --- training --------------------------------------------------------------------------------------------
    def fit(self, bags, y):
        """Train on a list of bags (2-D arrays with one feature size) with bag labels in {0, 1}.

        Randomness (weight initialisation, mini-batch order) comes from ``random_state`` only, through a private
        ``torch.Generator``: the global torch and numpy random states are left untouched.
        """
        self._check_params()
        bags, y = check_bags(bags, y)
        if len(np.unique(y)) < 2:
            raise ValueError("y must contain both bag labels 0 and 1")
        try:
            rng = check_random_state(self.random_state)
        except ValueError:
            raise ValueError(
                f"random_state must be None, an integer >= 0 or a numpy RandomState, got {self.random_state!r}"
            ) from None
        seed = int(rng.randint(np.iinfo(np.int32).max))
        generator = torch.Generator().manual_seed(seed)
        order_rng = np.random.default_rng(seed)
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = bags[0].shape[1]
        self.net_ = MILNet(
            self.n_features_in_, self.hidden, self.attention_dim, self._net_pooling(), generator=generator
        )
        X, mask = pad_bags(bags)
        yt = torch.as_tensor(y, dtype=torch.float32)
        opt = torch.optim.Adam(
            self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay, foreach=True
        )
        self._init_training(X, mask, y)
        self.loss_curve_ = []
        for epoch in range(self.epochs):
            perm = order_rng.permutation(len(bags))
            total = 0.0
            for start in range(0, len(bags), self.batch_size):
                idx = torch.as_tensor(perm[start : start + self.batch_size])
                mb = mask[idx]
                width = int(mb.sum(-1).max())
                Xb, mb = X[idx, :width], mb[:, :width]
                out = self.net_(Xb, mb)
                loss = F.binary_cross_entropy_with_logits(out["bag_logit"], yt[idx])
                loss = loss + self._extra_loss(out, Xb, mb, yt[idx], idx, epoch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            self.loss_curve_.append(total / len(bags))
        self.net_.eval()
        return self

    def _net_pooling(self) -> str:
        raise NotImplementedError

    def _init_training(self, X: torch.Tensor, mask: torch.Tensor, y: np.ndarray) -> None:
        pass

    def _extra_loss(self, out, Xb, mb, yb, idx, epoch) -> torch.Tensor:
        return torch.zeros(())

    # --- inference -------------------------------------------------------------------------------------------
    def _forward(self, bags) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        self._check_fitted()
        bags, _ = check_bags(bags, n_features=self.n_features_in_)
        X, mask = pad_bags(bags)
        with torch.no_grad():
            return self.net_(X, mask), mask

    def decision_function(self, bags) -> np.ndarray:
        """Bag logits (the full-bag head)."""
        out, _ = self._forward(bags)
        return out["bag_logit"].numpy().astype(np.float64)

    def predict_proba(self, bags) -> np.ndarray:
        """``(n_bags, 2)`` class probabilities of the bag head."""
        p = 1.0 / (1.0 + np.exp(-self.decision_function(bags)))
        return np.column_stack([1.0 - p, p])

    def predict(self, bags) -> np.ndarray:
        return (self.decision_function(bags) > 0).astype(np.int64)

    def instance_scores(self, bags, score: str = "auto") -> list[np.ndarray]:
        """Per-instance localisation scores, one array per bag.

        ``score``: ``"attention"`` (attention logits; attention pooling only), ``"bag_head"`` (the bag head applied
        to each instance embedding), ``"instance"`` (the instance head), or ``"auto"`` (the estimator's default:
        attention for attention pooling, the bag head for mean/max pooling, ``instance_score`` for SSG).
        """
        if score not in ("auto", "attention", "bag_head", "instance"):
            raise ValueError(f"score must be 'auto', 'attention', 'bag_head' or 'instance', got {score!r}")
        out, mask = self._forward(bags)
        if score == "auto":
            score = self._default_score()
        if score == "attention":
            if out["attention_logit"] is None:
                raise ValueError(
                    f"score='attention' needs attention pooling, this model uses {self._net_pooling()!r}"
                )
            s = out["attention_logit"]
        elif score == "bag_head":
            s = out["bag_head_instance_logit"]
        else:
            s = out["instance_logit"]
        s = s.numpy().astype(np.float64)
        return [s[i, : int(mask[i].sum())] for i in range(len(s))]

    def _default_score(self) -> str:
        return "attention" if self._net_pooling() in ("attention", "gated") else "bag_head"


class AttentionMIL(_MILEstimator):
    """Attention-MIL bag classifier (ABMIL, gated ABMIL, mean or max pooling), trained with the bag loss only.

    A scikit-learn classifier whose ``X`` is a list of bags (2-D arrays ``(n_instances, n_features)``, one
    feature size): ``get_params`` / ``set_params`` / ``clone`` and model selection work; ``score`` is accuracy.

    Parameters
    ----------
    pooling : ``"gated"`` (gated ABMIL), ``"attention"`` (ABMIL), ``"mean"`` or ``"max"``.
    hidden, attention_dim : encoder width and attention width.
    epochs, batch_size, lr, weight_decay : Adam training on padded mini-batches of bags.
    random_state : None, int or ``numpy.random.RandomState``: seeds the weight initialisation and the mini-batch
        order (through a private generator; the global torch seed is never touched).

    Attributes
    ----------
    net_ : the trained :class:`MILNet`; n_features_in_ : instance feature size; loss_curve_ : mean loss per epoch;
    classes_ : ``[0, 1]``.
    """

    def __init__(
        self,
        pooling: str = "gated",
        hidden: int = 64,
        attention_dim: int = 32,
        epochs: int = 20,
        batch_size: int = 16,
        lr: float = 2e-3,
        weight_decay: float = 1e-4,
        random_state=None,
    ):
        self.pooling = pooling
        self.hidden = hidden
        self.attention_dim = attention_dim
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.random_state = random_state

    def _check_params(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        super()._check_params()

    def _net_pooling(self) -> str:
        return self.pooling


class SparseSupportGroundingMIL(_MILEstimator):
    """Sparse Support Grounding MIL: gated-attention MIL whose instance supervision is grounded by unbalanced
    transport onto label-consistent vs label-inconsistent evidence supports (digest ``ssg-mil``, all [R]).

    Parameters
    ----------
    k : size of each bag's evidence support (top-k by attention x instance probability of the bag label).
    memory_size : number of recent training bags whose supports each per-class FIFO memory keeps (``M``).
    eps, rho : entropic blur and KL marginal relaxation of the unbalanced OT (digest: 0.05 and 0.5).
    grounding_weight : ``lambda`` in ``L = L_bag + lambda L_g`` (digest: 0.5).
    ramp_epochs : after the warm-up, ``lambda`` rises linearly from ``lambda / ramp_epochs`` to ``lambda`` over
        this many epochs (0: full ``lambda`` at once, the digest's schedule).
    align_weight : weight of the attention alignment term on positive bags. Direction: ``KL(w || attention)``
        (the cross-entropy ``-sum_i w_i log a_i``), not the digest's optional ``KL(attention || w)``, which is
        infinite wherever the sparse ``w`` is 0 and the attention is not. 0 (default) drops the term: ``w`` then
        only weights the instance loss.
    warmup_epochs : epochs with the bag loss only (supports chosen by an untrained model are noise).
    warmup_instance_head : during the warm-up, also train the instance head (on detached embeddings, so the
        encoder still sees the bag loss only) with the bag label spread uniformly over the bag. Without it the
        head is untrained when the first supports are picked by ``a_i * p_inst(y | h_i)``, and the grounding can
        lock onto the wrong instances (the feedback loop of the digest's pitfalls).
    contrast : how the retained masses become ``w`` (see :func:`grounding_weights`): ``"difference"``
        (``relu(r+ - r-)``, the digest's form), ``"log_ratio"``, ``"softmax"`` (tempered, see ``temperature``) or
        ``"none"`` (``w = r+``: the "no label contrast" ablation).
    temperature : temperature of the ``"softmax"`` contrast.
    transport : ``"unbalanced"`` or ``"balanced"`` (ablation: with balanced marginals every instance keeps its
        full mass, ``r+ = r- = 1``, so the weights are uniform over the bag).
    n_sinkhorn : Sinkhorn iterations per plan.
    instance_score : default localisation score of :meth:`instance_scores` (``"instance"``: the instance head
        ``p_inst``; or ``"attention"``).
    Other parameters as :class:`AttentionMIL` (the pooling is gated attention).

    Attributes
    ----------
    memory_X_ : dict class -> (M, k, d) raw support instances; memory_valid_, memory_bag_ : slot validity and owner.
    """

    def __init__(
        self,
        k: int = 4,
        memory_size: int = 64,
        eps: float = 0.05,
        rho: float = 0.5,
        grounding_weight: float = 0.5,
        ramp_epochs: int = 0,
        align_weight: float = 0.0,
        warmup_epochs: int = 5,
        warmup_instance_head: bool = True,
        contrast: str = "difference",
        temperature: float = 0.25,
        transport: str = "unbalanced",
        n_sinkhorn: int = 50,
        instance_score: str = "instance",
        hidden: int = 64,
        attention_dim: int = 32,
        epochs: int = 20,
        batch_size: int = 16,
        lr: float = 2e-3,
        weight_decay: float = 1e-4,
        random_state=None,
    ):
        self.k = k
        self.memory_size = memory_size
        self.eps = eps
        self.rho = rho
        self.grounding_weight = grounding_weight
        self.ramp_epochs = ramp_epochs
        self.align_weight = align_weight
        self.warmup_epochs = warmup_epochs
        self.warmup_instance_head = warmup_instance_head
        self.contrast = contrast
        self.temperature = temperature
        self.transport = transport
        self.n_sinkhorn = n_sinkhorn
        self.instance_score = instance_score
        self.hidden = hidden
        self.attention_dim = attention_dim
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.random_state = random_state

    def _check_params(self) -> None:
        super()._check_params()
        _check_int(self.k, "k", 1)
        _check_int(self.memory_size, "memory_size", 1)
        _check_float(self.eps, "eps", 0.0, low_open=True)
        _check_float(self.rho, "rho", 0.0, low_open=True)
        _check_float(self.grounding_weight, "grounding_weight", 0.0)
        _check_int(self.ramp_epochs, "ramp_epochs", 0)
        _check_float(self.align_weight, "align_weight", 0.0)
        _check_int(self.warmup_epochs, "warmup_epochs", 0)
        if not isinstance(self.warmup_instance_head, bool):
            raise ValueError(f"warmup_instance_head must be a bool, got {self.warmup_instance_head!r}")
        _check_int(self.n_sinkhorn, "n_sinkhorn", 1)
        _check_float(self.temperature, "temperature", 0.0, low_open=True)
        if self.contrast not in CONTRASTS:
            raise ValueError(f"contrast must be one of {CONTRASTS}, got {self.contrast!r}")
        if self.transport not in ("unbalanced", "balanced"):
            raise ValueError(f"transport must be 'unbalanced' or 'balanced', got {self.transport!r}")
        if self.instance_score not in ("instance", "attention"):
            raise ValueError(f"instance_score must be 'instance' or 'attention', got {self.instance_score!r}")

    def _net_pooling(self) -> str:
        return "gated"

    def _default_score(self) -> str:
        return self.instance_score

    # --- the per-class FIFO memory of bag supports (step 2-3) ------------------------------------------------
    def _init_training(self, X: torch.Tensor, mask: torch.Tensor, y: np.ndarray) -> None:
        M, k, d = self.memory_size, self.k, X.shape[-1]
        self.memory_X_ = {c: torch.zeros(M, k, d) for c in (0, 1)}
        self.memory_valid_ = {c: torch.zeros(M, k, dtype=torch.bool) for c in (0, 1)}
        self.memory_bag_ = {c: torch.full((M,), -1, dtype=torch.long) for c in (0, 1)}
        self._memory_next = {0: 0, 1: 0}

    def _push_supports(self, out, Xb, mb, yb, idx) -> None:
        """Top-k evidence instances of every bag of the batch (score a_i * p_inst(y|h_i), no gradient)."""
        with torch.no_grad():
            p1 = torch.sigmoid(out["instance_logit"])
            p_y = torch.where(yb[:, None] > 0.5, p1, 1.0 - p1)
            ev = (out["attention"] * p_y).masked_fill(~mb, -1.0)
            k = min(self.k, ev.shape[1])
            top = ev.topk(k, dim=1).indices  # (B, k)
            sel = torch.gather(Xb, 1, top[..., None].expand(-1, -1, Xb.shape[-1]))
            valid = torch.gather(mb, 1, top)
            for i in range(len(idx)):  # one slot write per bag (B is a mini-batch, not the data)
                c = int(yb[i])
                slot = self._memory_next[c]
                self.memory_X_[c][slot].zero_()
                self.memory_X_[c][slot, :k] = sel[i]
                self.memory_valid_[c][slot] = False
                self.memory_valid_[c][slot, :k] = valid[i]
                self.memory_bag_[c][slot] = int(idx[i])
                self._memory_next[c] = (slot + 1) % self.memory_size

    def _supports(self, c: int, bag_ids: torch.Tensor | None, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoded memory of class ``c`` (S, H) and, per bag, which entries it may use (never its own)."""
        with torch.no_grad():
            sup = self.net_.encoder(self.memory_X_[c].reshape(-1, self.memory_X_[c].shape[-1]))
        valid = self.memory_valid_[c].reshape(1, -1).expand(n, -1)
        if bag_ids is not None:
            owner = self.memory_bag_[c].repeat_interleave(self.k)[None, :]
            valid = valid & (owner != bag_ids[:, None])
        return sup, valid

    def _masses(self, h, mb, yb, bag_ids) -> tuple[torch.Tensor, torch.Tensor]:
        """Unclipped retained masses ``r+`` (onto the bag label's memory) and ``r-`` (the other label's)."""
        with torch.no_grad():
            n = h.shape[0]
            rho = math.inf if self.transport == "balanced" else self.rho
            (s0, m0), (s1, m1) = (self._supports(c, bag_ids, n) for c in (0, 1))
            # both memories in one batched transport: rows [0, n) go to class 0, rows [n, 2n) to class 1
            S = max(s0.shape[0], s1.shape[0])
            sup = torch.zeros(2 * n, S, s0.shape[1], dtype=s0.dtype)
            smask = torch.zeros(2 * n, S, dtype=torch.bool)
            sup[:n, : s0.shape[0]], smask[:n, : s0.shape[0]] = s0, m0
            sup[n:, : s1.shape[0]], smask[n:, : s1.shape[0]] = s1, m1
            r = support_retained_mass(
                torch.cat([h, h]), torch.cat([mb, mb]), sup, smask, self.eps, rho, self.n_sinkhorn
            )
            r0, r1 = r[:n], r[n:]
            pos = yb[:, None] > 0.5
            return torch.where(pos, r1, r0), torch.where(pos, r0, r1)

    def _weights(self, h, mb, yb, bag_ids, contrast: str) -> torch.Tensor:
        """Grounding strengths ``w`` (B, m) of a batch (steps 4-5), without gradient."""
        r_plus, r_minus = self._masses(h, mb, yb, bag_ids)
        if self.transport == "balanced":
            contrast = "none"  # r+ = r- = 1: any contrast is 0, the ablation keeps every instance's mass
        return grounding_weights(r_plus, r_minus, mb, contrast, self.temperature)

    def _lambda(self, epoch: int) -> float:
        after = epoch - self.warmup_epochs
        if after < 0:
            return 0.0
        if self.ramp_epochs == 0:
            return float(self.grounding_weight)
        return float(self.grounding_weight) * min(1.0, (after + 1) / self.ramp_epochs)

    def _extra_loss(self, out, Xb, mb, yb, idx, epoch) -> torch.Tensor:
        loss = torch.zeros(())
        ready = all(bool(self.memory_valid_[c].any()) for c in (0, 1))
        lam = self._lambda(epoch)
        if epoch < self.warmup_epochs and self.warmup_instance_head:
            # the instance head learns from the bag labels alone (uniform weights on positive bags, the balanced
            # limit of w) on detached embeddings: the encoder still sees the bag loss only, and the evidence score
            # a_i * p_inst(y | h_i) that picks the first supports is not a random head's output
            logit = self.net_.instance_head(out["h"].detach()).squeeze(-1)
            pos = yb > 0.5
            lp = -(F.logsigmoid(logit) * mb).sum(-1) / mb.sum(-1)
            ln = -(F.logsigmoid(-logit) * mb).sum(-1) / mb.sum(-1)
            loss = torch.where(pos, lp, ln).mean()
        elif lam > 0 and ready:
            logit = out["instance_logit"]
            pos = yb > 0.5
            # w only enters the loss of positive bags: transport those alone
            w = torch.zeros_like(logit)
            if pos.any():
                w[pos] = self._weights(out["h"].detach()[pos], mb[pos], yb[pos], idx[pos], self.contrast)
            # L_g: grounded positive-instance loss on positive bags, all instances negative in negative bags
            lp = -(w * F.logsigmoid(logit)).sum(-1)
            ln = -(F.logsigmoid(-logit) * mb).sum(-1) / mb.sum(-1)
            lg = torch.where(pos, lp, ln).mean()
            # KL(w || attention) on positive bags with a grounding signal (the constant sum w log w dropped)
            has = pos & (w.sum(-1) > 0)
            if has.any() and self.align_weight > 0:
                la = -(w * torch.log(out["attention"].clamp_min(1e-12))).sum(-1)
                lg = lg + self.align_weight * (la * has).sum() / len(yb)
            loss = lam * lg
        self._push_supports(out, Xb, mb, yb, idx)
        return loss

    def _encode(self, bags, y):
        self._check_fitted()
        bags, y = check_bags(bags, y, n_features=self.n_features_in_)
        X, mask = pad_bags(bags)
        with torch.no_grad():
            h = self.net_.encoder(X)
        return h, mask, torch.as_tensor(y, dtype=torch.float32)

    def retained_masses(self, bags, y) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Unclipped retained masses ``(r+, r-)`` of (new) bags against the fitted supports, one array per bag."""
        h, mask, yt = self._encode(bags, y)
        r_plus, r_minus = self._masses(h, mask, yt, None)
        lengths = mask.sum(-1).tolist()
        return (
            [r_plus[i, :m].numpy().astype(np.float64) for i, m in enumerate(lengths)],
            [r_minus[i, :m].numpy().astype(np.float64) for i, m in enumerate(lengths)],
        )

    def grounding(self, bags, y, contrast: str | None = None) -> list[np.ndarray]:
        """Grounding strengths ``w`` of (new) bags against the fitted supports, one array per bag.

        ``contrast`` overrides the fitted setting (one of :data:`CONTRASTS`).
        """
        if contrast is not None and contrast not in CONTRASTS:
            raise ValueError(f"contrast must be None or one of {CONTRASTS}, got {contrast!r}")
        h, mask, yt = self._encode(bags, y)
        w = self._weights(h, mask, yt, None, self.contrast if contrast is None else contrast)
        w = w.numpy().astype(np.float64)
        return [w[i, : int(mask[i].sum())] for i in range(len(w))]
