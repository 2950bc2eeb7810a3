"""LCDB (Learning Curve Database, Mohr et al.) as a leaderboard: the CSVs that ship inside the PyPI ``lcdb`` wheel.

The ``lcdb`` package (0.1.0) bundles ``database-{accuracy,f1,auc,logloss}.csv`` (one row per data set, learner,
training-set size "anchor" and outer/inner seed) and ``datasets.csv`` (OpenML meta-features). Its own helpers
import ``openml`` and ``pkg_resources`` and fetch data sets from OpenML, so they are never imported here: the
CSVs are located with :func:`importlib.util.find_spec` and read directly. Nothing is downloaded.

Reading one metric's CSV takes about two seconds; the per-(data set, learner, anchor) means of ``score_test``
over the seeds are cached as ``.npz`` in ``$NEURIPS26_CACHE`` (or ``$XDG_CACHE_HOME/neurips26``, default
``~/.cache/neurips26``) ``/lcdb/``, keyed by the CSV's size and modification time, and in memory for the process.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

METRICS = ("accuracy", "f1", "auc", "logloss")
LOWER_IS_BETTER = {"logloss"}
CACHE_FORMAT = "neurips26.lcdb.aggregate/1"

# the 20 LCDB learners: family (scikit-learn module) and a one-line "model card" used as the card text
LEARNERS: dict[str, tuple[str, str]] = {
    "sklearn.linear_model.LogisticRegression": (
        "linear_model",
        "Logistic regression: a linear classifier fit by L2-regularised maximum likelihood.",
    ),
    "sklearn.linear_model.SGDClassifier": (
        "linear_model",
        "Linear classifier (hinge loss) trained by stochastic gradient descent.",
    ),
    "sklearn.linear_model.Perceptron": (
        "linear_model",
        "Perceptron: a linear classifier updated on each misclassified example.",
    ),
    "sklearn.linear_model.PassiveAggressiveClassifier": (
        "linear_model",
        "Passive-aggressive online linear classifier with a hinge-loss margin update.",
    ),
    "sklearn.linear_model.RidgeClassifier": (
        "linear_model",
        "Ridge classifier: least-squares regression on +-1 targets with an L2 penalty.",
    ),
    "SVC_linear": ("svm", "Support vector machine with a linear kernel."),
    "SVC_poly": ("svm", "Support vector machine with a polynomial kernel."),
    "SVC_rbf": ("svm", "Support vector machine with a Gaussian (RBF) kernel."),
    "SVC_sigmoid": ("svm", "Support vector machine with a sigmoid kernel."),
    "sklearn.discriminant_analysis.LinearDiscriminantAnalysis": (
        "discriminant_analysis",
        "Linear discriminant analysis: Gaussian classes with a shared covariance.",
    ),
    "sklearn.discriminant_analysis.QuadraticDiscriminantAnalysis": (
        "discriminant_analysis",
        "Quadratic discriminant analysis: Gaussian classes with their own covariances.",
    ),
    "sklearn.naive_bayes.BernoulliNB": ("naive_bayes", "Naive Bayes for binary (Bernoulli) features."),
    "sklearn.naive_bayes.MultinomialNB": ("naive_bayes", "Naive Bayes for count (multinomial) features."),
    "sklearn.neighbors.KNeighborsClassifier": ("neighbors", "k-nearest-neighbour majority vote classifier."),
    "sklearn.tree.DecisionTreeClassifier": ("tree", "A single CART decision tree grown to purity."),
    "sklearn.tree.ExtraTreeClassifier": ("tree", "A single extremely randomised decision tree."),
    "sklearn.ensemble.RandomForestClassifier": (
        "ensemble",
        "Random forest: an average of decision trees grown on bootstrap samples.",
    ),
    "sklearn.ensemble.ExtraTreesClassifier": (
        "ensemble",
        "Extra trees: an average of extremely randomised decision trees.",
    ),
    "sklearn.ensemble.GradientBoostingClassifier": (
        "ensemble",
        "Gradient boosting of shallow regression trees on the log-loss.",
    ),
    "sklearn.neural_network.MLPClassifier": (
        "neural_network",
        "Multi-layer perceptron: a feed-forward neural network trained with Adam.",
    ),
}


def lcdb_dir() -> Path:
    """The folder of the installed ``lcdb`` package (its CSVs), found without importing it."""
    spec = importlib.util.find_spec("lcdb")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the PyPI package 'lcdb' (0.1.0, bundled learning curves) is not installed: pip install lcdb"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def cache_dir() -> Path:
    root = os.environ.get("NEURIPS26_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neurips26"
    )
    return Path(root) / "lcdb"


def _read_aggregate(metric: str) -> pd.DataFrame:
    csv = lcdb_dir() / f"database-{metric}.csv"
    if not csv.exists():
        raise FileNotFoundError(f"{csv} is missing from the lcdb package")
    st = csv.stat()
    key = f"{metric}-{st.st_size}-{int(st.st_mtime)}"
    path = cache_dir() / f"{key}.npz"
    if path.exists():
        try:
            z = np.load(path, allow_pickle=False)
            if str(z["format"]) == CACHE_FORMAT:
                return pd.DataFrame(
                    {
                        "openmlid": z["openmlid"],
                        "learner": z["learners"][z["learner_code"]],
                        "anchor": z["anchor"],
                        "score": z["score"],
                        "n_seeds": z["n_seeds"],
                    }
                )
        except (OSError, KeyError, ValueError):
            pass  # a damaged cache file is rebuilt below
    raw = pd.read_csv(
        csv,
        usecols=["openmlid", "learner", "size_train", "score_test"],
        dtype={"openmlid": np.int32, "learner": "category", "size_train": np.int64, "score_test": np.float64},
    )
    raw = raw[np.isfinite(raw["score_test"])]
    agg = (
        raw.groupby(["openmlid", "learner", "size_train"], observed=True)["score_test"]
        .agg(["mean", "size"])
        .reset_index()
    )
    learners = np.array(sorted(agg["learner"].astype(str).unique()))
    codes = np.searchsorted(learners, agg["learner"].astype(str).to_numpy())
    arrays = {
        "format": np.array(CACHE_FORMAT),
        "openmlid": agg["openmlid"].to_numpy(np.int32),
        "learners": learners,
        "learner_code": codes.astype(np.int16),
        "anchor": agg["size_train"].to_numpy(np.int64),
        "score": agg["mean"].to_numpy(np.float64),
        "n_seeds": agg["size"].to_numpy(np.int32),
    }
    try:  # written atomically: a concurrent reader never sees half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home still works, uncached
    return pd.DataFrame(
        {
            "openmlid": arrays["openmlid"],
            "learner": learners[codes],
            "anchor": arrays["anchor"],
            "score": arrays["score"],
            "n_seeds": arrays["n_seeds"],
        }
    )


@lru_cache(maxsize=8)
def _aggregate_cached(metric: str) -> pd.DataFrame:
    return _read_aggregate(metric)


def load_lcdb(metrics: tuple[str, ...] | list[str] = METRICS) -> pd.DataFrame:
    """LCDB learning curves as leaderboard records: one row per (data set, learner, anchor, metric).

    Columns: ``openmlid``, ``learner``, ``anchor`` (training-set size), ``metric``, ``score`` (mean test score
    over LCDB's outer x inner seeds), ``n_seeds``. Cached after the first load (see the module docstring).
    """
    if isinstance(metrics, str):
        metrics = (metrics,)
    metrics = tuple(metrics)
    if not metrics:
        raise ValueError("metrics must name at least one of " + ", ".join(METRICS))
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise ValueError(f"metrics must be among {METRICS}, got {bad}")
    frames = [_aggregate_cached(m).assign(metric=m) for m in metrics]
    return pd.concat(frames, ignore_index=True)


@lru_cache(maxsize=1)
def load_lcdb_datasets() -> pd.DataFrame:
    """OpenML meta-features of the LCDB data sets (``datasets.csv``), indexed by ``openmlid``, with ``Name``."""
    df = pd.read_csv(lcdb_dir() / "datasets.csv")
    return df.drop_duplicates("openmlid").set_index("openmlid").sort_index()


def lcdb_models() -> pd.DataFrame:
    """The model catalogue of the 20 LCDB learners: index = learner name, columns ``family``, ``card``."""
    return pd.DataFrame(
        [(name, fam, card) for name, (fam, card) in LEARNERS.items()], columns=["model", "family", "card"]
    ).set_index("model")
