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
5. grounding strength ``w_i = relu(r+_i - r-_i)``, normalised within the bag;
6. ``L = L_bag + lambda L_g``, ``L_g = -sum_i w_i log p_inst(1 | h_i)`` on positive bags and
   ``-mean_i log p_inst(0 | h_i)`` on negative bags, plus ``KL(w || attention)`` (weight ``align_weight``) that
   aligns the bag head's attention with the grounding;
7. inference: the bag head only; instance scores are ``p_inst`` (or the attention).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .bags import check_bags, pad_bags
from .uot import retained_mass, unbalanced_sinkhorn_log

__all__ = [
    "MILNet",
    "AttentionMIL",
    "SparseSupportGroundingMIL",
    "support_retained_mass",
    "grounding_weights",
]

POOLINGS = ("gated", "attention", "mean", "max")


class MILNet(nn.Module):
    """Instance encoder, a pooling operator, a bag head and an instance head.

    ``pooling``: ``"attention"`` (ABMIL, ``a_i ∝ exp(w^T tanh(V h_i))``), ``"gated"`` (gated ABMIL,
    ``a_i ∝ exp(w^T (tanh(V h_i) * sigm(U h_i)))``), ``"mean"`` or ``"max"`` (feature-wise). Padding instances
    (``mask == False``) never enter the pooling.
    """

    def __init__(self, n_features: int, hidden: int = 64, attention_dim: int = 32, pooling: str = "gated"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.encoder = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden)
        )  # no final ReLU: non-negative embeddings would squeeze every cosine cost towards 0
        self.att_v = nn.Linear(hidden, attention_dim)
        self.att_u = nn.Linear(hidden, attention_dim)
        self.att_w = nn.Linear(attention_dim, 1)
        self.bag_head = nn.Linear(hidden, 1)
        self.instance_head = nn.Linear(hidden, 1)

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
    """Retained mass of every instance of every bag when transported onto a support set (steps 4 of the method).

    Parameters
    ----------
    h : (B, m, H) instance embeddings (normalised here; the cost is ``1 - cos``).
    mask : (B, m) valid instances; source masses ``a_i = 1 / m_b`` on them.
    support : (S, H) support embeddings (shared by the batch).
    support_mask : (B, S) which support points each bag may use (uniform target mass on them).
    eps, rho : entropic blur and KL marginal relaxation of the unbalanced OT (``rho = inf``: balanced).

    Returns
    -------
    r : (B, m) retained mass in [0, 1] (0 on padding, and 0 for a bag whose support is empty).
    """
    if h.ndim != 3 or mask.shape != h.shape[:2]:
        raise ValueError(f"h must be (B, m, H) and mask (B, m); got {tuple(h.shape)} and {tuple(mask.shape)}")
    if (
        support.ndim != 2
        or support.shape[1] != h.shape[2]
        or support_mask.shape != (h.shape[0], support.shape[0])
    ):
        raise ValueError("support must be (S, H) with the embedding size of h, and support_mask (B, S)")
    hn = F.normalize(h, dim=-1)
    sn = F.normalize(support, dim=-1)
    C = (1.0 - hn @ sn.T).clamp_min(0.0)  # (B, m, S)
    a = mask.to(h.dtype) / mask.sum(-1, keepdim=True).clamp_min(1)
    b = support_mask.to(h.dtype) / support_mask.sum(-1, keepdim=True).clamp_min(1)
    method = "scaling" if 2.0 / eps <= 300.0 else "log"  # cos costs lie in [0, 2]
    P = unbalanced_sinkhorn_log(a, b, C, eps=eps, rho=rho, n_iter=n_iter, tol=1e-3, method=method)
    r = retained_mass(P, a)
    return r * support_mask.any(-1, keepdim=True).to(r.dtype)


def grounding_weights(r_plus: torch.Tensor, r_minus: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
    """Grounding strength ``w_i = relu(r+_i - r-_i)`` (or ``r+_i`` when ``r_minus`` is None), normalised per bag.

    A bag in which no instance matches label-consistent evidence better than label-inconsistent evidence gets
    ``w = 0`` (no grounding signal), never a uniform fallback.
    """
    w = r_plus if r_minus is None else F.relu(r_plus - r_minus)
    w = w * mask.to(w.dtype)
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


class AttentionMIL:
    """Attention-MIL bag classifier (ABMIL, gated ABMIL, mean or max pooling), trained with the bag loss only.

    Parameters
    ----------
    pooling : ``"gated"`` (gated ABMIL), ``"attention"`` (ABMIL), ``"mean"`` or ``"max"``.
    hidden, attention_dim : encoder width and attention width.
    epochs, batch_size, lr, weight_decay : Adam training on padded mini-batches of bags.
    random_state : seed of the weight initialisation and of the mini-batch order.

    Attributes
    ----------
    net_ : the trained :class:`MILNet`; n_features_in_ : instance feature size; loss_curve_ : mean loss per epoch.
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
        random_state: int | None = None,
    ):
        self.pooling = pooling
        self.hidden = hidden
        self.attention_dim = attention_dim
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.random_state = random_state

    # --- validation ------------------------------------------------------------------------------------------
    def _validate_params(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        _check_int(self.hidden, "hidden", 1)
        _check_int(self.attention_dim, "attention_dim", 1)
        _check_int(self.epochs, "epochs", 1)
        _check_int(self.batch_size, "batch_size", 1)
        _check_float(self.lr, "lr", 0.0, low_open=True)
        _check_float(self.weight_decay, "weight_decay", 0.0)
        if self.random_state is not None:
            _check_int(self.random_state, "random_state", 0)

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(bags, y) first")

    # --- training --------------------------------------------------------------------------------------------
    def fit(self, bags, y) -> AttentionMIL:
        """Train on a list of bags (2-D arrays with one feature size) with bag labels in {0, 1}."""
        self._validate_params()
        bags, y = check_bags(bags, y)
        if len(np.unique(y)) < 2:
            raise ValueError("y must contain both bag labels 0 and 1")
        seed = 0 if self.random_state is None else int(self.random_state)
        torch.manual_seed(seed)
        order_rng = np.random.default_rng(seed)
        self.n_features_in_ = bags[0].shape[1]
        self.net_ = MILNet(self.n_features_in_, self.hidden, self.attention_dim, self._net_pooling())
        X, mask = pad_bags(bags)
        yt = torch.as_tensor(y, dtype=torch.float32)
        opt = torch.optim.Adam(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
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
        return self.pooling

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
        to each instance embedding), ``"instance"`` (the instance head), or ``"auto"`` (attention for attention
        pooling, else the bag head).
        """
        if score not in ("auto", "attention", "bag_head", "instance"):
            raise ValueError(f"score must be 'auto', 'attention', 'bag_head' or 'instance', got {score!r}")
        out, mask = self._forward(bags)
        if score == "auto":
            score = self._default_score()
        if score == "attention":
            if out["attention_logit"] is None:
                raise ValueError(
                    f"score='attention' needs attention pooling, this model uses {self.pooling!r}"
                )
            s = out["attention_logit"]
        elif score == "bag_head":
            s = out["bag_head_instance_logit"]
        else:
            s = out["instance_logit"]
        s = s.numpy().astype(np.float64)
        return [s[i, : int(mask[i].sum())] for i in range(len(s))]

    def _default_score(self) -> str:
        return "attention" if self.pooling in ("attention", "gated") else "bag_head"


class SparseSupportGroundingMIL(AttentionMIL):
    """Sparse Support Grounding MIL: gated-attention MIL whose instance supervision is grounded by unbalanced
    transport onto label-consistent vs label-inconsistent evidence supports (digest ``ssg-mil``, all [R]).

    Parameters
    ----------
    k : size of each bag's evidence support (top-k by attention x instance probability of the bag label).
    memory_size : number of recent training bags whose supports each per-class FIFO memory keeps (``M``).
    eps, rho : entropic blur and KL marginal relaxation of the unbalanced OT.
    grounding_weight : ``lambda`` in ``L = L_bag + lambda L_g``.
    align_weight : weight of ``KL(w || attention)`` on positive bags (aligns the bag head with the grounding;
        optional in the digest; without it the quick experiment's SSG collapsed to instance AUC 0.22).
    warmup_epochs : epochs with the bag loss only (supports chosen by an untrained model are noise).
    contrast : ``w = relu(r+ - r-)`` (True) or ``w = r+`` (False, the "no label contrast" ablation).
    transport : ``"unbalanced"`` or ``"balanced"`` (ablation: with balanced marginals every instance keeps its
        full mass, ``r+ = r- = 1``, the contrast vanishes and the weights are uniform over the bag).
    n_sinkhorn : Sinkhorn iterations per plan.
    score : default localisation score of :meth:`instance_scores` (``"instance"``: ``p_inst``; or ``"attention"``).
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
        align_weight: float = 1.0,
        warmup_epochs: int = 5,
        contrast: bool = True,
        transport: str = "unbalanced",
        n_sinkhorn: int = 50,
        score: str = "instance",
        hidden: int = 64,
        attention_dim: int = 32,
        epochs: int = 20,
        batch_size: int = 16,
        lr: float = 2e-3,
        weight_decay: float = 1e-4,
        random_state: int | None = None,
    ):
        super().__init__("gated", hidden, attention_dim, epochs, batch_size, lr, weight_decay, random_state)
        self.k = k
        self.memory_size = memory_size
        self.eps = eps
        self.rho = rho
        self.grounding_weight = grounding_weight
        self.align_weight = align_weight
        self.warmup_epochs = warmup_epochs
        self.contrast = contrast
        self.transport = transport
        self.n_sinkhorn = n_sinkhorn
        self.score = score

    def _validate_params(self) -> None:
        super()._validate_params()
        _check_int(self.k, "k", 1)
        _check_int(self.memory_size, "memory_size", 1)
        _check_float(self.eps, "eps", 0.0, low_open=True)
        _check_float(self.rho, "rho", 0.0, low_open=True)
        _check_float(self.grounding_weight, "grounding_weight", 0.0)
        _check_float(self.align_weight, "align_weight", 0.0)
        _check_int(self.warmup_epochs, "warmup_epochs", 0)
        _check_int(self.n_sinkhorn, "n_sinkhorn", 1)
        if not isinstance(self.contrast, bool):
            raise ValueError(f"contrast must be a bool, got {self.contrast!r}")
        if self.transport not in ("unbalanced", "balanced"):
            raise ValueError(f"transport must be 'unbalanced' or 'balanced', got {self.transport!r}")
        if self.score not in ("instance", "attention"):
            raise ValueError(f"score must be 'instance' or 'attention', got {self.score!r}")

    def _default_score(self) -> str:
        return self.score

    # --- the per-class FIFO memory of bag supports (step 2-3) ------------------------------------------------
    def _init_training(self, X: torch.Tensor, mask: torch.Tensor, y: np.ndarray) -> None:
        M, k, d = self.memory_size, self.k, X.shape[-1]
        self.memory_X_ = {c: torch.zeros(M, k, d) for c in (0, 1)}
        self.memory_valid_ = {c: torch.zeros(M, k, dtype=torch.bool) for c in (0, 1)}
        self.memory_bag_ = {c: torch.full((M,), -1, dtype=torch.long) for c in (0, 1)}
        self._memory_next = {0: 0, 1: 0}
        self.grounding_log_ = []

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

    def _weights(self, h, mb, yb, bag_ids, contrast: bool) -> torch.Tensor:
        """Grounding strengths ``w`` (B, m) of a batch (steps 4-5), without gradient."""
        with torch.no_grad():
            n = h.shape[0]
            rho = math.inf if self.transport == "balanced" else self.rho
            r = {}
            for c in (0, 1):
                sup, smask = self._supports(c, bag_ids, n)
                r[c] = support_retained_mass(h, mb, sup, smask, self.eps, rho, self.n_sinkhorn)
            pos = yb[:, None] > 0.5
            r_plus = torch.where(pos, r[1], r[0])
            r_minus = torch.where(pos, r[0], r[1])
            if self.transport == "balanced" or not contrast:
                return grounding_weights(r_plus, None, mb)
            return grounding_weights(r_plus, r_minus, mb)

    def _extra_loss(self, out, Xb, mb, yb, idx, epoch) -> torch.Tensor:
        loss = torch.zeros(())
        ready = all(bool(self.memory_valid_[c].any()) for c in (0, 1))
        if epoch >= self.warmup_epochs and ready:
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
            loss = self.grounding_weight * lg
        self._push_supports(out, Xb, mb, yb, idx)
        return loss

    def grounding(self, bags, y, contrast: bool | None = None) -> list[np.ndarray]:
        """Grounding strengths ``w`` of (new) bags against the fitted supports, one array per bag.

        ``contrast`` overrides the fitted setting (``False``: ``w = r+`` normalised, the ablation's weighting).
        """
        self._check_fitted()
        bags, y = check_bags(bags, y, n_features=self.n_features_in_)
        if contrast is not None and not isinstance(contrast, bool):
            raise ValueError(f"contrast must be None or a bool, got {contrast!r}")
        X, mask = pad_bags(bags)
        with torch.no_grad():
            h = self.net_.encoder(X)
        w = self._weights(
            h,
            mask,
            torch.as_tensor(y, dtype=torch.float32),
            None,
            self.contrast if contrast is None else contrast,
        )
        w = w.numpy().astype(np.float64)
        return [w[i, : int(mask[i].sum())] for i in range(len(w))]
