"""ModelLens: rank candidate models for a new data set from leaderboard records, without running any candidate.

Paper: "ModelLens: Finding the Best for Your Task from Myriads of Models", arXiv 2605.07075 (the network and
losses follow the official code's "MLPMetricFull" model and "ensemble" loss, as summarised in our digest).

Records ``r = (m, d, t, mu, y)``: model, data set, task, metric and score. Targets are z-values within each
``(d, t, mu)`` group, sign-flipped for lower-is-better metrics and clipped at ``+-alpha`` [R: the config's
``alpha = 3`` read as a z clip].

Representation (all concatenated, then a two-layer MLP ``h``)::

    h_model  = [E_id(m) (UNK with prob. id_dropout), mean E_tok(hashed name tokens), W_card e(card)]
    h_data   = [E_id(d) (UNK for a new data set),   W_meta x_meta(d),                W_text e(description)]
    h        = MLP2([h_model, h_data, E_size(bucket(size)), E_family(family), E_task(t), E_metric(mu)])
    s        = (w_s . h + MLP([E_size, E_family])) / T,     z_hat = w_z . h,     T >= 1e-3 learnable

with ``e(.)`` a frozen sentence embedding (all-MiniLM-L6-v2 by default) and ``x_meta`` numeric meta-features
(signed log1p, then standardised on the training data sets; missing values imputed by the training median).

Losses (``loss="ensemble"``): ``0.5 L_list + 1.0 L_pair`` with

    L_list = mean_g mean_i [logsumexp_{j >= i} s_j / tau - s_i / tau]  (items of group g sorted by true z)
             + 0.1 MSE(z_hat, z)
    L_pair = mean_{z_p > z_q} w_pq softplus(-(s_p - s_q)) + 0.1 MSE(z_hat, z) over both items,

``w_pq = |z_p - z_q|`` normalised to mean one within the batch [R: the code's "sample weights" were not
specified further]. ``loss="pointwise"`` trains the MSE head alone and ranks by ``z_hat`` (the ablation).
Inference scores every candidate with one forward pass per (data set, candidate): a new data set enters
through its description and meta-features, a new model through its name tokens, card, size and family.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

LOSSES = ("ensemble", "listwise", "pairwise", "pointwise")
DEFAULT_LOWER_IS_BETTER = (
    "logloss",
    "log_loss",
    "loss",
    "error",
    "error_rate",
    "rmse",
    "mse",
    "mae",
    "perplexity",
)
# 21 bucket edges in billions of parameters, 0.001 .. 1000 (log-spaced), as in the official config
SIZE_EDGES = np.logspace(-3, 3, 21)
_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def name_tokens(name: str) -> list[str]:
    """Lower-case tokens of a model name: split on punctuation and camelCase (``ExtraTreesClassifier`` ->
    ``extra``, ``trees``, ``classifier``)."""
    return [t.lower() for t in _TOKEN.findall(str(name))]


def family_from_name(name: str) -> str:
    """A model family from its name: the module of a dotted path (``sklearn.tree.X`` -> ``tree``), else the
    leading name token (``llama-3-8b`` -> ``llama``)."""
    parts = str(name).split(".")
    if len(parts) >= 3:
        return parts[-2].lower()
    toks = name_tokens(name)
    return toks[0] if toks else "unknown"


def zscore_groups(
    scores: np.ndarray, groups: np.ndarray, higher_is_better: np.ndarray | None = None, alpha: float = 3.0
) -> np.ndarray:
    """z-values of ``scores`` within each group (population std; a constant group gives zeros), sign-flipped
    where ``higher_is_better`` is False, clipped to ``[-alpha, alpha]``."""
    y = np.asarray(scores, dtype=float)
    g = pd.factorize(np.asarray(groups))[0]
    if y.shape != g.shape:
        raise ValueError("scores and groups must have one length")
    if not np.all(np.isfinite(y)):
        raise ValueError("scores must be finite")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    n = np.bincount(g).astype(float)
    mean = np.bincount(g, y) / n
    var = np.bincount(g, y * y) / n - mean**2
    std = np.sqrt(np.maximum(var, 0.0))
    rel = std / np.maximum(np.abs(mean), 1.0)
    z = np.where((rel > 1e-12)[g], (y - mean[g]) / np.where(std > 0, std, 1.0)[g], 0.0)
    if higher_is_better is not None:
        z = np.where(np.asarray(higher_is_better, dtype=bool), z, -z)
    return np.clip(z, -alpha, alpha)


class _TextCache:
    """Frozen text embeddings, computed once per distinct text (within the process)."""

    def __init__(self, encoder: Callable[[list[str]], np.ndarray]) -> None:
        self.encoder = encoder
        self.vectors: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if missing:
            emb = np.asarray(self.encoder(missing), dtype=np.float32)
            if emb.ndim != 2 or emb.shape[0] != len(missing) or not np.all(np.isfinite(emb)):
                raise ValueError("text_encoder must return a finite (n_texts, dim) array")
            self.vectors.update(zip(missing, emb))
        return np.stack([self.vectors[t] for t in texts])


_MINILM_CACHE: _TextCache | None = None


def minilm_text_encoder() -> _TextCache:
    """The offline all-MiniLM-L6-v2 sentence encoder, with one vector cache shared by the process."""
    global _MINILM_CACHE
    if _MINILM_CACHE is None:
        from neurips26.data.text_embeddings import encode_minilm

        _MINILM_CACHE = _TextCache(encode_minilm)
    return _MINILM_CACHE


class _LensNet(nn.Module):
    def __init__(self, n_models, n_datasets, n_families, n_tasks, n_metrics, n_meta, text_dim, cfg) -> None:
        super().__init__()
        d_id, d_tok, d_text, d_small, hidden = (
            cfg["id_dim"],
            cfg["token_dim"],
            cfg["text_dim"],
            cfg["small_dim"],
            cfg["hidden"],
        )
        self.model_id = nn.Embedding(n_models + 1, d_id)  # row 0 = UNK
        self.tokens = nn.EmbeddingBag(cfg["n_hash"], d_tok, mode="mean")
        self.card = nn.Linear(text_dim, d_text) if text_dim else None
        self.data_id = nn.Embedding(n_datasets + 1, d_id)
        self.meta = nn.Linear(n_meta, d_text) if n_meta else None
        self.desc = nn.Linear(text_dim, d_text) if text_dim else None
        self.size = nn.Embedding(len(SIZE_EDGES) + 2, d_small)  # + UNK
        self.family = nn.Embedding(n_families + 1, d_small)
        self.task = nn.Embedding(n_tasks + 1, d_small)
        self.metric = nn.Embedding(n_metrics + 1, d_small)
        d_model = d_id + d_tok + (d_text if text_dim else 0)
        d_data = d_id + (d_text if n_meta else 0) + (d_text if text_dim else 0)
        # the first MLP layer acts on a concatenation, so it splits into one linear map per block: each block is
        # projected once per distinct model / data set and the projections are gathered per record (exact)
        self.first_model = nn.Linear(d_model, hidden)
        self.first_data = nn.Linear(d_data, hidden, bias=False)
        self.first_small = nn.Linear(4 * d_small, hidden, bias=False)
        self.mlp = nn.Sequential(
            nn.ReLU(),
            nn.Dropout(cfg["dropout"]),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Dropout(cfg["dropout"]),
        )
        self.w_score = nn.Linear(hidden, 1)
        self.w_z = nn.Linear(hidden, 1)
        self.prior = nn.Sequential(nn.Linear(2 * d_small, d_small), nn.ReLU(), nn.Linear(d_small, 1))
        self.log_temperature = nn.Parameter(torch.zeros(()))

    def model_side(self, ids, tok_idx, tok_off, card):
        parts = [self.model_id(ids), self.tokens(tok_idx, tok_off)]
        if self.card is not None:
            parts.append(self.card(card))
        return torch.cat(parts, 1)

    def data_side(self, ids, meta, desc):
        parts = [self.data_id(ids)]
        if self.meta is not None:
            parts.append(self.meta(meta))
        if self.desc is not None:
            parts.append(self.desc(desc))
        return torch.cat(parts, 1)

    def forward(self, pm, pd_, m_idx, d_idx, size, family, task, metric):
        """Scores and pointwise predictions for records (model projection pm[m_idx], data projection pd_[d_idx]).

        ``pm`` / ``pd_`` are ``first_model(h_model)`` / ``first_data(h_data)`` of the distinct models / data sets.
        """
        e_size, e_fam = self.size(size), self.family(family)
        small = torch.cat([e_size, e_fam, self.task(task), self.metric(metric)], 1)
        h = self.mlp(pm[m_idx] + pd_[d_idx] + self.first_small(small))
        temperature = self.log_temperature.exp().clamp_min(1e-3)
        s = (self.w_score(h).squeeze(1) + self.prior(torch.cat([e_size, e_fam], 1)).squeeze(1)) / temperature
        return s, self.w_z(h).squeeze(1)


def _check_int(name, value, lo):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")


def _check_float(name, value, lo, hi, lo_open=False, hi_open=False):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}") from None
    ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok or math.isnan(v):
        lb, rb = "(" if lo_open else "[", ")" if hi_open else "]"
        raise ValueError(f"{name} must be in {lb}{lo}, {hi}{rb}, got {value!r}")


class ModelLens:
    """Learn-to-rank recommender of models for data sets from leaderboard records.

    Parameters
    ----------
    loss : "ensemble" (0.5 listwise + pairwise, the paper's), "listwise", "pairwise" or "pointwise" (ablation).
    hidden, id_dim, token_dim, text_dim, small_dim : widths (paper: 512 / 1536 / 512 / 1536 / 64).
    id_dropout : probability that a training record's model ID and data-set ID are replaced by UNK, so that
        new models and new data sets are scored from their side information (paper: 0.1).
    dropout : MLP dropout (0.02). tau : listwise temperature (10). alpha : z clip (3).
    epochs, patience : training epochs and early-stopping patience on held-out training groups.
    list_batch, pair_batch : groups per listwise batch (8) and pairs per pairwise batch (1024).
    lr, weight_decay, clip_norm : Adam settings (1e-3, 1e-4) and gradient-norm clip (5).
    validation_fraction : share of training data sets held out for early stopping (0 disables it).
    text_encoder : "minilm" (offline all-MiniLM-L6-v2, vectors cached per process), None (no text features),
        or a callable ``list[str] -> (n, dim) array``.
    lower_is_better : metric names whose scores are losses (their z-values are sign-flipped).
    random_state : seed of the initialisation, ID dropout and batches.
    """

    def __init__(
        self,
        *,
        loss: str = "ensemble",
        hidden: int = 256,
        id_dim: int = 32,
        token_dim: int = 32,
        text_dim: int = 32,
        small_dim: int = 16,
        n_hash: int = 4096,
        id_dropout: float = 0.1,
        dropout: float = 0.02,
        tau: float = 10.0,
        alpha: float = 3.0,
        epochs: int = 200,
        patience: int = 20,
        list_batch: int = 8,
        pair_batch: int = 1024,
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        clip_norm: float = 5.0,
        validation_fraction: float = 0.1,
        text_encoder: str | Callable[[list[str]], np.ndarray] | None = "minilm",
        lower_is_better: Sequence[str] = DEFAULT_LOWER_IS_BETTER,
        random_state: int | None = 0,
    ) -> None:
        self.loss = loss
        self.hidden = hidden
        self.id_dim = id_dim
        self.token_dim = token_dim
        self.text_dim = text_dim
        self.small_dim = small_dim
        self.n_hash = n_hash
        self.id_dropout = id_dropout
        self.dropout = dropout
        self.tau = tau
        self.alpha = alpha
        self.epochs = epochs
        self.patience = patience
        self.list_batch = list_batch
        self.pair_batch = pair_batch
        self.lr = lr
        self.weight_decay = weight_decay
        self.clip_norm = clip_norm
        self.validation_fraction = validation_fraction
        self.text_encoder = text_encoder
        self.lower_is_better = lower_is_better
        self.random_state = random_state

    # --- validation -----------------------------------------------------------------------------------------
    def _validate_params(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        for name in ("hidden", "id_dim", "token_dim", "text_dim", "small_dim", "n_hash", "epochs"):
            _check_int(name, getattr(self, name), 1)
        _check_int("patience", self.patience, 0)
        _check_int("list_batch", self.list_batch, 1)
        _check_int("pair_batch", self.pair_batch, 1)
        _check_float("id_dropout", self.id_dropout, 0, 1, hi_open=True)
        _check_float("dropout", self.dropout, 0, 1, hi_open=True)
        _check_float("validation_fraction", self.validation_fraction, 0, 1, hi_open=True)
        for name in ("tau", "alpha", "lr", "clip_norm"):
            _check_float(name, getattr(self, name), 0, math.inf, lo_open=True)
        _check_float("weight_decay", self.weight_decay, 0, math.inf)
        te = self.text_encoder
        if not (te is None or te == "minilm" or callable(te)):
            raise ValueError(f"text_encoder must be 'minilm', None or a callable, got {te!r}")

    def _encoder(self) -> Callable[[Sequence[str]], np.ndarray] | None:
        if self.text_encoder is None:
            return None
        if self.text_encoder == "minilm":
            return minilm_text_encoder()
        if not hasattr(self, "_own_cache") or self._own_cache.encoder is not self.text_encoder:
            self._own_cache = _TextCache(self.text_encoder)
        return self._own_cache

    @staticmethod
    def _records(records: Any) -> pd.DataFrame:
        if not isinstance(records, pd.DataFrame):
            try:
                records = pd.DataFrame(records)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"records must be a DataFrame or a list of dicts: {exc}") from None
        need = {"model", "dataset", "metric", "score"}
        missing = need - set(records.columns)
        if missing:
            raise ValueError(
                f"records lack the columns {sorted(missing)} (need model, dataset, metric, score)"
            )
        if len(records) == 0:
            raise ValueError("records must not be empty")
        df = records.copy()
        for c in ("model", "dataset", "metric"):
            df[c] = df[c].astype(str)
        df["task"] = df["task"].astype(str) if "task" in df else "default"
        try:
            df["score"] = df["score"].astype(float)
        except (TypeError, ValueError):
            raise TypeError("records['score'] must be numeric") from None
        if not np.all(np.isfinite(df["score"].to_numpy())):
            raise ValueError("records['score'] must be finite (drop missing cells instead of NaN)")
        return df

    # --- side information -----------------------------------------------------------------------------------
    def _model_table(self, names: Sequence[str], models: pd.DataFrame | None) -> pd.DataFrame:
        table = pd.DataFrame(index=pd.Index(list(dict.fromkeys(names)), name="model"))
        table["card"], table["family"], table["size"] = "", "", np.nan
        if models is not None:
            if not isinstance(models, pd.DataFrame):
                raise TypeError("models must be a DataFrame indexed by model name")
            m = models.copy()
            m.index = m.index.astype(str)
            table = table.reindex(table.index.union(m.index, sort=False))
            for c in ("card", "family", "size"):
                if c in m:
                    table.loc[m.index, c] = m[c].to_numpy()
        table["card"] = table["card"].fillna("").astype(str)
        fam = table["family"].fillna("").astype(str)
        table["family"] = [f if f else family_from_name(n) for n, f in zip(table.index, fam)]
        size = pd.to_numeric(table["size"], errors="coerce").to_numpy(float)
        if np.any(size[np.isfinite(size)] <= 0):
            raise ValueError("models['size'] (parameters, billions) must be > 0 where given")
        table["size"] = size
        return table

    def _dataset_table(self, names: Sequence[str], datasets: pd.DataFrame | None) -> pd.DataFrame:
        table = pd.DataFrame(index=pd.Index(list(dict.fromkeys(names)), name="dataset"))
        if datasets is not None:
            if not isinstance(datasets, pd.DataFrame):
                raise TypeError("datasets must be a DataFrame indexed by data-set name")
            d = datasets.copy()
            d.index = d.index.astype(str)
            table = d.reindex(table.index.union(d.index, sort=False))
        if "description" not in table:
            table["description"] = ""
        table["description"] = table["description"].fillna("").astype(str)
        return table

    def _meta_matrix(self, table: pd.DataFrame) -> np.ndarray:
        if not self.meta_columns_:
            return np.zeros((len(table), 0), np.float32)
        X = table.reindex(columns=self.meta_columns_).apply(pd.to_numeric, errors="coerce").to_numpy(float)
        X = np.sign(X) * np.log1p(np.abs(X))
        X = np.where(np.isfinite(X), X, self.meta_median_)
        return ((X - self.meta_median_) / self.meta_scale_).astype(np.float32)

    def _texts(self, texts: Sequence[str]) -> np.ndarray:
        enc = self._encoder()
        if enc is None or self.text_width_ == 0:
            return np.zeros((len(texts), self.text_width_), np.float32)
        out = np.zeros((len(texts), self.text_width_), np.float32)
        has = [i for i, t in enumerate(texts) if t]
        if has:
            out[has] = enc([texts[i] for i in has])
        return out

    def _token_ids(self, name: str) -> list[int]:
        return [zlib.crc32(t.encode()) % self.n_hash for t in name_tokens(name) or ["<empty>"]]

    def _token_bags(self, names: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Hashed name tokens as EmbeddingBag input. Once fitted, hash buckets that no training model used are
        dropped: their embeddings never received a gradient, so they would add initialisation noise to a new
        model's score (a name with no trained token gets the zero vector) [R]."""
        seen = getattr(self, "seen_tokens_", None)
        idx, off = [], []
        for n in names:
            off.append(len(idx))
            ids = self._token_ids(n)
            idx.extend(ids if seen is None else [i for i in ids if i in seen])
        return torch.tensor(idx, dtype=torch.long), torch.tensor(off, dtype=torch.long)

    def _size_bucket(self, size: np.ndarray) -> np.ndarray:
        b = np.searchsorted(SIZE_EDGES, size) + 1  # 1 .. len(edges) + 1
        return np.where(np.isfinite(size), b, 0)

    def _model_inputs(self, table: pd.DataFrame, known_ids: bool) -> dict[str, torch.Tensor]:
        names = list(table.index)
        ids = [self.model_index_.get(n, 0) if known_ids else 0 for n in names]
        tok_idx, tok_off = self._token_bags(names)
        return {
            "ids": torch.tensor(ids, dtype=torch.long),
            "tok_idx": tok_idx,
            "tok_off": tok_off,
            "card": torch.from_numpy(self._texts(list(table["card"]))),
            "size": torch.from_numpy(self._size_bucket(table["size"].to_numpy(float))).long(),
            "family": torch.tensor([self.family_index_.get(f, 0) for f in table["family"]], dtype=torch.long),
        }

    def _data_inputs(self, table: pd.DataFrame, known_ids: bool) -> dict[str, torch.Tensor]:
        ids = [self.dataset_index_.get(n, 0) if known_ids else 0 for n in table.index]
        return {
            "ids": torch.tensor(ids, dtype=torch.long),
            "meta": torch.from_numpy(self._meta_matrix(table)),
            "desc": torch.from_numpy(self._texts(list(table["description"]))),
        }

    # --- fit ------------------------------------------------------------------------------------------------
    def fit(
        self, records: Any, datasets: pd.DataFrame | None = None, models: pd.DataFrame | None = None
    ) -> ModelLens:
        """Fit on leaderboard ``records`` (columns model, dataset, metric, score, optional task).

        ``datasets``: side information indexed by data-set name: an optional ``description`` text column and
        numeric meta-feature columns (NaN allowed). ``models``: indexed by model name, optional ``card`` (text),
        ``family`` and ``size`` (parameters in billions) columns; it may list models without records (a
        catalogue), which are then scored from side information alone.
        """
        self._validate_params()
        df = self._records(records)
        lib = {str(m).lower() for m in self.lower_is_better}
        df["higher"] = ~df["metric"].str.lower().isin(lib)
        df["group"] = df["dataset"] + "\x1f" + df["task"] + "\x1f" + df["metric"]
        dup = df.duplicated(["group", "model"])
        if dup.any():
            raise ValueError(
                f"records hold {int(dup.sum())} duplicate (model, dataset, task, metric) rows; aggregate them first"
            )
        df["z"] = zscore_groups(
            df["score"].to_numpy(), df["group"].to_numpy(), df["higher"].to_numpy(), self.alpha
        )

        rng = np.random.default_rng(self.random_state)
        seed = int(rng.integers(2**31 - 1))
        self.model_table_ = self._model_table(sorted(df["model"].unique()), models)
        self.seen_tokens_ = {i for m in df["model"].unique() for i in self._token_ids(m)}
        self.dataset_table_ = self._dataset_table(sorted(df["dataset"].unique()), datasets)
        self.model_index_ = {m: i + 1 for i, m in enumerate(sorted(df["model"].unique()))}
        self.dataset_index_ = {d: i + 1 for i, d in enumerate(sorted(df["dataset"].unique()))}
        self.family_index_ = {
            f: i + 1
            for i, f in enumerate(sorted(self.model_table_.loc[list(self.model_index_), "family"].unique()))
        }
        self.task_index_ = {t: i + 1 for i, t in enumerate(sorted(df["task"].unique()))}
        self.metric_index_ = {m: i + 1 for i, m in enumerate(sorted(df["metric"].unique()))}
        self.metric_higher_ = df.groupby("metric")["higher"].first().to_dict()

        # numeric meta-features: signed log1p, median-imputed and standardised on the training data sets only
        train_d = self.dataset_table_.loc[list(self.dataset_index_)]
        numeric = [
            c for c in train_d.columns if c != "description" and pd.api.types.is_numeric_dtype(train_d[c])
        ]
        X = train_d[numeric].to_numpy(float) if numeric else np.zeros((len(train_d), 0))
        X = np.sign(X) * np.log1p(np.abs(X))
        keep = [j for j in range(X.shape[1]) if np.isfinite(X[:, j]).mean() >= 0.5 and np.nanstd(X[:, j]) > 0]
        self.meta_columns_ = [numeric[j] for j in keep]
        X = X[:, keep]
        self.meta_median_ = np.nanmedian(X, axis=0) if keep else np.zeros(0)
        blank = ~np.isfinite(X).any(axis=1) if keep else np.zeros(len(train_d), bool)
        if blank.any():
            names = list(train_d.index[blank])
            warnings.warn(
                f"{len(names)} of {len(names) + int((~blank).sum())} data sets with records have no meta-feature "
                f"values (e.g. {', '.join(map(str, names[:3]))}); they take the training medians",
                UserWarning,
                stacklevel=2,
            )
        Xi = np.where(np.isfinite(X), X, self.meta_median_)
        self.meta_scale_ = np.where(Xi.std(0) > 0, Xi.std(0), 1.0) if keep else np.zeros(0)

        enc = self._encoder()
        has_text = (self.model_table_["card"] != "").any() or (self.dataset_table_["description"] != "").any()
        self.text_width_ = 0
        if enc is not None and has_text:
            self.text_width_ = int(enc(["probe"]).shape[1])

        with torch.random.fork_rng(devices=[]):  # seeded; torch's global RNG is left as it was
            torch.manual_seed(seed)
            self._build_and_train(df, rng)
        self.n_records_ = len(df)
        return self

    def _build_and_train(self, df: pd.DataFrame, rng: np.random.Generator) -> None:
        cfg = {
            "id_dim": self.id_dim,
            "token_dim": self.token_dim,
            "text_dim": self.text_dim,
            "small_dim": self.small_dim,
            "hidden": self.hidden,
            "n_hash": self.n_hash,
            "dropout": self.dropout,
        }
        self.net_ = _LensNet(
            len(self.model_index_),
            len(self.dataset_index_),
            len(self.family_index_),
            len(self.task_index_),
            len(self.metric_index_),
            len(self.meta_columns_),
            self.text_width_,
            cfg,
        )
        # one row per known model / data set; the record arrays index into them
        mtab = self.model_table_.loc[list(self.model_index_)]
        dtab = self.dataset_table_.loc[list(self.dataset_index_)]
        self._train_models = self._model_inputs(mtab, known_ids=True)
        self._train_data = self._data_inputs(dtab, known_ids=True)
        m_row = df["model"].map({m: i for i, m in enumerate(mtab.index)}).to_numpy()
        d_row = df["dataset"].map({d: i for i, d in enumerate(dtab.index)}).to_numpy()
        task = df["task"].map(self.task_index_).to_numpy()
        metric = df["metric"].map(self.metric_index_).to_numpy()
        self._train_loop(df, m_row, d_row, task, metric, rng)
        del self._train_models, self._train_data

    def val_loss_plateau(self, window: int = 5) -> float:
        """Relative improvement of the best validation loss during the last ``window`` epochs of training,
        (min over earlier epochs - min over all) / |min over all|: 0 when early stopping fired (with ``window``
        at most ``patience`` + 1), small on a plateau, large while the model is still learning; inf when fewer
        than ``window`` + 1 epochs ran, NaN without validation data."""
        self._check_fitted()
        _check_int("window", window, 1)
        vals = [h["val_loss"] for h in self.history_ if "val_loss" in h]
        if not vals:
            return math.nan
        if len(vals) <= window:
            return math.inf
        best = min(vals)
        return (min(vals[:-window]) - best) / max(abs(best), 1e-12)

    def _forward(self, m_inp, d_inp, m_row, d_row, task, metric, drop_rng=None):
        net = self.net_
        m_ids, d_ids = m_inp["ids"], d_inp["ids"]
        pm = net.first_model(net.model_side(m_ids, m_inp["tok_idx"], m_inp["tok_off"], m_inp["card"]))
        pd_ = net.first_data(net.data_side(d_ids, d_inp["meta"], d_inp["desc"]))
        if drop_rng is not None and self.id_dropout > 0:
            # ID dropout per record: the record's model / data-set ID is replaced by UNK (row 0). Each entity has
            # two projections (own ID, UNK ID); rows [n, 2n) of the stacked table hold the UNK variants.
            nm, nd, n = len(m_ids), len(d_ids), len(m_row)
            pm_unk = net.first_model(
                net.model_side(torch.zeros_like(m_ids), m_inp["tok_idx"], m_inp["tok_off"], m_inp["card"])
            )
            pd_unk = net.first_data(net.data_side(torch.zeros_like(d_ids), d_inp["meta"], d_inp["desc"]))
            pm, pd_ = torch.cat([pm, pm_unk]), torch.cat([pd_, pd_unk])
            m_row = m_row + nm * torch.from_numpy(drop_rng.random(n) < self.id_dropout)
            d_row_drop = d_row + nd * torch.from_numpy(drop_rng.random(n) < self.id_dropout)
            return net(
                pm,
                pd_,
                m_row,
                d_row_drop,
                m_inp["size"][m_row % nm],
                m_inp["family"][m_row % nm],
                task,
                metric,
            )
        return net(pm, pd_, m_row, d_row, m_inp["size"][m_row], m_inp["family"][m_row], task, metric)

    def _train_loop(self, df, m_row, d_row, task, metric, rng) -> None:
        z = df["z"].to_numpy(float)
        gid = pd.factorize(df["group"])[0]
        n_groups = gid.max() + 1
        # validation groups: every group of a held-out share of training data sets
        datasets = np.array(sorted(df["dataset"].unique()))
        n_val = int(round(self.validation_fraction * len(datasets))) if len(datasets) >= 5 else 0
        val_sets = set(rng.choice(datasets, n_val, replace=False)) if n_val else set()
        g_dataset = df.groupby(gid)["dataset"].first().to_numpy()
        is_val = np.array([d in val_sets for d in g_dataset])
        sizes = np.bincount(gid, minlength=n_groups)
        usable = sizes >= 2
        order = np.lexsort((-z, gid))  # records grouped, by descending z within each group
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        width = int(sizes.max())
        # padded [group, position] -> record index (-1 = padding), positions sorted by true z
        pos = np.arange(len(order)) - starts[gid[order]]
        padded = np.full((n_groups, width), -1, dtype=np.int64)
        padded[gid[order], pos] = order
        train_groups = np.flatnonzero(usable & ~is_val)
        val_groups = np.flatnonzero(usable & is_val)
        if len(train_groups) == 0:
            raise ValueError("records hold no (dataset, task, metric) group with two or more models to rank")
        # all ordered pairs (p better than q) within training groups
        pairs = []
        for g in train_groups:
            members = padded[g][padded[g] >= 0]
            zp = z[members]
            a, b = np.triu_indices(len(members), 1)
            better = zp[a] > zp[b]
            pairs.append(np.stack([members[a][better], members[b][better]], 1))
        pairs = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)

        t_z = torch.from_numpy(z.astype(np.float32))
        t_task, t_metric = (
            torch.as_tensor(np.array(task), dtype=torch.long),
            torch.as_tensor(np.array(metric), dtype=torch.long),
        )
        t_m, t_d = (
            torch.as_tensor(np.array(m_row), dtype=torch.long),
            torch.as_tensor(np.array(d_row), dtype=torch.long),
        )
        opt = torch.optim.Adam(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        drop_rng = np.random.default_rng(rng.integers(2**31 - 1))
        best, best_state, waited = math.inf, None, 0
        self.history_ = []
        n_list_batches = max(1, math.ceil(len(train_groups) / self.list_batch))
        for epoch in range(self.epochs):
            self.net_.train()
            perm = rng.permutation(train_groups)
            epoch_loss = 0.0
            for b in range(n_list_batches):
                groups = perm[b * self.list_batch : (b + 1) * self.list_batch]
                loss = self._batch_loss(groups, padded, pairs, rng, drop_rng, t_z, t_m, t_d, t_task, t_metric)
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.net_.parameters(), self.clip_norm)
                opt.step()
                epoch_loss += float(loss.detach())
            entry = {"epoch": epoch, "train_loss": epoch_loss / n_list_batches}
            if len(val_groups):
                val = self._validation_loss(val_groups, padded, t_z, t_m, t_d, t_task, t_metric)
                entry["val_loss"] = val
                if val < best - 1e-6:
                    best, best_state, waited = val, copy.deepcopy(self.net_.state_dict()), 0
                else:
                    waited += 1
            self.history_.append(entry)
            if len(val_groups) and waited > self.patience:
                break
        if best_state is not None:
            self.net_.load_state_dict(best_state)
        self.n_epochs_ = len(self.history_)
        self.stopped_early_ = bool(len(val_groups) and waited > self.patience)
        self.net_.eval()

    def _listwise(self, s, z_hat, idx, t_z):
        """ListMLE over padded groups ``idx`` [G, L] (-1 = padding), positions sorted by true z."""
        mask = idx >= 0
        S = torch.full(idx.shape, -math.inf)
        S[mask] = s / self.tau
        # logsumexp over the suffix j >= i, by a reversed cumulative logsumexp
        suffix = torch.logcumsumexp(S.flip(1), 1).flip(1)
        term = torch.where(mask, suffix - torch.where(mask, S, torch.zeros(())), torch.zeros(()))
        per_group = term.sum(1) / mask.sum(1)
        return per_group.mean() + 0.1 * F.mse_loss(z_hat, t_z)

    def _batch_loss(self, groups, padded, pairs, rng, drop_rng, t_z, t_m, t_d, t_task, t_metric):
        idx = padded[groups]
        idx = idx[:, : int((idx >= 0).sum(1).max())]
        list_rec = idx[idx >= 0]
        parts = [list_rec]
        use_pairs = self.loss in ("ensemble", "pairwise") and len(pairs)
        if use_pairs:
            chosen = pairs[rng.integers(0, len(pairs), self.pair_batch)]
            parts += [chosen[:, 0], chosen[:, 1]]
        rec = torch.from_numpy(np.concatenate(parts))
        s, z_hat = self._forward(
            self._train_models, self._train_data, t_m[rec], t_d[rec], t_task[rec], t_metric[rec], drop_rng
        )
        zt = t_z[rec]
        n_list = len(list_rec)
        if self.loss == "pointwise":
            return F.mse_loss(z_hat, zt)
        total = torch.zeros(())
        if self.loss in ("ensemble", "listwise"):
            weight = 0.5 if self.loss == "ensemble" else 1.0
            total = total + weight * self._listwise(
                s[:n_list], z_hat[:n_list], torch.from_numpy(idx), zt[:n_list]
            )
        if use_pairs:
            P = self.pair_batch
            sp, sq = s[n_list : n_list + P], s[n_list + P :]
            zp, zq = zt[n_list : n_list + P], zt[n_list + P :]
            w = (zp - zq).abs()
            w = w / w.mean().clamp_min(1e-8)
            bpr = (w * F.softplus(-(sp - sq))).mean()
            total = total + bpr + 0.1 * F.mse_loss(z_hat[n_list:], zt[n_list:])
        return total

    @torch.no_grad()
    def _validation_loss(self, groups, padded, t_z, t_m, t_d, t_task, t_metric) -> float:
        """Early-stopping criterion: the training objective on held-out data sets scored as NEW (UNK IDs)."""
        self.net_.eval()
        idx = padded[groups]
        rec = torch.from_numpy(idx[idx >= 0])
        m_inp = dict(self._train_models)
        d_inp = dict(self._train_data, ids=torch.zeros_like(self._train_data["ids"]))
        s, z_hat = self._forward(m_inp, d_inp, t_m[rec], t_d[rec], t_task[rec], t_metric[rec])
        if self.loss == "pointwise":
            return float(F.mse_loss(z_hat, t_z[rec]))
        # ranks compared through ListMLE (scale-free in the ranking sense); the pointwise term keeps z_hat honest
        return float(self._listwise(s, z_hat, torch.from_numpy(idx), t_z[rec]))

    # --- inference ------------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError("this ModelLens is not fitted yet: call fit(records) first")

    def _resolve_candidates(self, candidates, models) -> pd.DataFrame:
        if isinstance(candidates, str) or not isinstance(candidates, Sequence | np.ndarray | pd.Index):
            raise TypeError("candidates must be a sequence of model names")
        names = [str(c) for c in candidates]
        if not names:
            raise ValueError("candidates must name at least one model")
        if len(set(names)) != len(names):
            raise ValueError("candidates must not repeat a model name")
        table = self.model_table_
        if models is not None:
            extra = self._model_table([], models)
            table = pd.concat([table[~table.index.isin(extra.index)], extra])
        unknown = [n for n in names if n not in table.index]
        if unknown:
            raise ValueError(
                f"unknown candidates {unknown[:5]}{' ...' if len(unknown) > 5 else ''}: a candidate must appear "
                "in the fitted records, in fit(models=...) or in rank(models=...) (its side information)"
            )
        return table.loc[names]

    def _resolve_datasets(self, datasets) -> tuple[pd.DataFrame, bool]:
        if isinstance(datasets, str):
            if datasets not in self.dataset_table_.index:
                raise ValueError(
                    f"dataset {datasets!r} is not a fitted data set; pass its description as a mapping "
                    "({'description': text, <meta-feature>: value, ...}) to rank a new one"
                )
            return self.dataset_table_.loc[[datasets]], True
        if isinstance(datasets, Mapping | pd.Series):
            frame = pd.DataFrame([dict(datasets)], index=["<new>"])
        elif isinstance(datasets, pd.DataFrame):
            frame = datasets
        else:
            raise TypeError(
                "dataset must be a fitted data-set name, a mapping of its description, or a DataFrame"
            )
        if len(frame) == 0:
            raise ValueError("datasets must not be empty")
        if "description" not in frame:
            frame = frame.assign(description="")
        frame = frame.assign(description=frame["description"].fillna("").astype(str))
        # extra columns are ignored: side information the model was not trained on
        for c in (c for c in self.meta_columns_ if c in frame):
            raw = frame[c]
            vals = pd.to_numeric(raw, errors="coerce")
            bad = vals.isna() & raw.notna()
            if bad.any():
                raise ValueError(
                    f"dataset meta-feature {c!r} must be numeric (NaN or None for missing), got {raw[bad].iloc[0]!r}"
                )
            if np.isinf(vals.to_numpy(float)).any():
                raise ValueError(f"dataset meta-feature {c!r} must be finite or NaN (missing)")
        return frame, False

    @torch.no_grad()
    def score_matrix(
        self,
        datasets: pd.DataFrame | Mapping | str,
        candidates: Sequence[str],
        metric: str | None = None,
        task: str = "default",
        *,
        models: pd.DataFrame | None = None,
        new_datasets: bool = True,
    ) -> np.ndarray:
        """Scores (higher = better) of every candidate on every data set: an (n_datasets, n_candidates) array.

        ``datasets``: a DataFrame of side information (one row each), a mapping for one data set, or a fitted
        data set's name. With ``new_datasets=True`` (default) rows are scored as new data sets (UNK ID) even if
        their index names a fitted one; a fitted name passed as a string uses its learned ID.
        """
        self._check_fitted()
        if metric is None:
            if len(self.metric_index_) != 1:
                raise ValueError(
                    f"metric must be given: the records hold the metrics {sorted(self.metric_index_)}"
                )
            metric = next(iter(self.metric_index_))
        if metric not in self.metric_index_:
            raise ValueError(
                f"metric {metric!r} was not in the records; fitted metrics: {sorted(self.metric_index_)}"
            )
        if task not in self.task_index_:
            raise ValueError(
                f"task {task!r} was not in the records; fitted tasks: {sorted(self.task_index_)}"
            )
        cand = self._resolve_candidates(candidates, models)
        dtab, known = self._resolve_datasets(datasets)
        if isinstance(datasets, pd.DataFrame) and not new_datasets:
            known = True
        m_inp = self._model_inputs(cand, known_ids=True)
        d_inp = self._data_inputs(dtab, known_ids=known)
        nd, nm = len(dtab), len(cand)
        m_row = torch.arange(nm).repeat(nd)
        d_row = torch.arange(nd).repeat_interleave(nm)
        n = nd * nm
        t = torch.full((n,), self.task_index_[task], dtype=torch.long)
        mu = torch.full((n,), self.metric_index_[metric], dtype=torch.long)
        self.net_.eval()
        s, z_hat = self._forward(m_inp, d_inp, m_row, d_row, t, mu)
        out = z_hat if self.loss == "pointwise" else s
        return out.numpy().reshape(nd, nm).astype(float)

    def rank(
        self,
        dataset_description: Mapping | pd.Series | str,
        candidates: Sequence[str],
        metric: str | None = None,
        task: str = "default",
        *,
        models: pd.DataFrame | None = None,
        top_k: int | None = None,
    ) -> pd.DataFrame:
        """Rank ``candidates`` for one data set, best first: a DataFrame with ``model``, ``score``, ``rank``.

        ``dataset_description``: a mapping ``{"description": text, <meta-feature>: value, ...}`` for a new data
        set, or the name of a fitted one. ``metric`` may be omitted when the records hold one. New candidates (not in the records) need side information, given in
        ``fit(models=...)`` or ``rank(models=...)``; an unknown name raises ValueError.
        """
        if top_k is not None:
            _check_int("top_k", top_k, 1)
        scores = self.score_matrix(dataset_description, candidates, metric, task, models=models)[0]
        order = np.argsort(-scores, kind="stable")
        out = pd.DataFrame({"model": [str(candidates[i]) for i in order], "score": scores[order]})
        out["rank"] = np.arange(1, len(out) + 1)
        return out.head(top_k) if top_k else out
