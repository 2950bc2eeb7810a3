"""The registry: the fixed catalogue of the 38 seed abstracts, and what is derived from the code.

The catalogue (slug, title, seed file, abstract number, arXiv id, field, tier, the digest's check in one line) is
written here once. Everything that changes as work proceeds is derived, never typed:

- ``module``: ``neurips26.<field>.<slug with underscores>`` (or the record's ``package`` name);
- ``status``: ``planned`` (no package yet), ``implemented`` (a package, no declared experiment), or the verdict
  that the paper's claims declaration (``claims.toml`` beside ``experiment.py``) predicts for quick mode; the
  verdict test asserts that the quick run measures exactly that;
- ``status_note``: the declared reasons of the claim checks expected not to pass;
- ``api``: the paper package's public names, its ``__init__``'s ``__all__`` (the field package re-exports each).

Nothing here imports an implementation (or torch): ``neurips26 list`` reads the TOML declarations, and ``api``
reads ``__all__`` from the source with :mod:`ast`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._lazy import public_names
from .harness.claims import VERDICTS, Claims, claims_at

STATUSES = ("planned", "implemented", *VERDICTS)
TIERS = ("A", "B", "C")
_ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Paper:
    """One seed abstract of the catalogue; its state is derived from the code (see the module docstring)."""

    slug: str
    title: str
    seed_file: str
    abstract: int  # position in the seed file, counted from 1 (title line not counted)
    arxiv: str | None
    field: str
    tier: str  # "A", "B", "C"; some digests qualify it, e.g. "A (linear) / B (neural)"
    check: str  # the digest's reproduction check, in one line
    package: str | None = None  # the package's name when it is not the slug with underscores

    @property
    def module(self) -> str:
        """Import path of the paper's package."""
        return f"neurips26.{self.field}.{self.package or self.slug.replace('-', '_')}"

    @property
    def package_dir(self) -> Path:
        return _ROOT.joinpath(*self.module.split(".")[1:])

    @property
    def source_dir(self) -> str:
        """Folder of the paper's code, relative to the repository root."""
        return "src/" + self.module.replace(".", "/")

    @property
    def experiment(self) -> str:
        """Import path of the reproduction experiment: ``module.experiment:run``."""
        return f"{self.module}.experiment:run"

    @property
    def benchmark(self) -> str | None:
        """Import path of the peer benchmark (``module.benchmark:main``), when the paper has one."""
        return f"{self.module}.benchmark:main" if (self.package_dir / "benchmark.py").exists() else None

    @property
    def claims_path(self) -> Path:
        return self.package_dir / "claims.toml"

    @property
    def claims(self) -> Claims | None:
        """The claims declaration, or None before the paper has one."""
        return claims_at(self.claims_path)

    @property
    def has_experiment(self) -> bool:
        return self.claims is not None and (self.package_dir / "experiment.py").exists()

    @property
    def status(self) -> str:
        if not (self.package_dir / "__init__.py").exists():
            return "planned"
        claims = self.claims
        if claims is None or not self.has_experiment:
            return "implemented"
        return claims.expected_verdict("quick") or "implemented"

    @property
    def full_status(self) -> str:
        """The verdict the declaration predicts for full mode (``-`` when there is no experiment)."""
        claims = self.claims
        if claims is None or not self.has_experiment:
            return "-"
        return claims.expected_verdict("full") or "-"

    @property
    def status_note(self) -> str:
        """Why the quick verdict is not *reproduced*: the declared reasons (templates; the report fills them)."""
        claims = self.claims
        return claims.note("quick") if claims is not None else ""

    @property
    def api(self) -> tuple[str, ...]:
        """The paper's public names: its package's ``__all__``, read without importing the package.

        ``neurips26.<field>`` re-exports every one of them lazily (``from neurips26.<field> import Name``).
        Empty while the paper is planned; an ``__all__`` that is not a literal list of strings raises
        :class:`~neurips26._lazy.PublicNamesError`.
        """
        init = self.package_dir / "__init__.py"
        return public_names(init) if init.exists() else ()


PAPERS: tuple[Paper, ...] = (
    Paper(
        slug="ssg-mil",
        title="Sparse Support Grounding for MIL (unbalanced-transport instance grounding; descriptive title)",
        seed_file="000_35944da5716e589d.txt",
        abstract=1,
        arxiv=None,
        field="transport",
        tier="B",
        check="Synthetic sparse/heterogeneous feature bags and digits bags: SSG bag AUC >= best baseline + 0.02 and instance AUC >= gated ABMIL + 0.05; gain larger in the sparse than in the dense regime",
    ),
    Paper(
        slug="nbffg",
        title="Neural Backward Filtering Forward Guiding",
        seed_file="000_35944da5716e589d.txt",
        abstract=2,
        arxiv="2601.23030",
        field="inference",
        tier="B",
        check="Depth-5 binary tree with nonlinear edges vs a 1D grid posterior: ESS/N >= 1.5x guide-only and >= 10x bootstrap, |log Z error| <= 0.1; subsampled loss unbiased to 1e-10",
    ),
    Paper(
        slug="srgw-graphon",
        title="Network Learning with Semi-relaxed Gromov-Wasserstein",
        seed_file="000_35944da5716e589d.txt",
        abstract=3,
        arxiv="2606.02223",
        field="transport",
        tier="A",
        check="Sampled SBMs and graphons: ARI >= 0.95 and MSE <= 1.1x spectral at n = 800, MSE slope in [-1.3, -0.7]; bounded n x relaxation gap; MSE <= 1.15x best of USVT/SAS on 3 of 5 graphons",
    ),
    Paper(
        slug="multabench",
        title="MulTaBench: Multimodal Tabular Learning with Text and Image",
        seed_file="000_35944da5716e589d.txt",
        abstract=4,
        arxiv="2605.10616",
        field="multimodal",
        tier="B",
        check="Synthetic text-tabular tables, MiniLM + LoRA: AUC(Joint TAR) - AUC(Joint Frozen) >= 0.02 on the task-aware table, <= 0.01 in absolute value on the control; curation rule admits/rejects correctly",
    ),
    Paper(
        slug="modellens",
        title="ModelLens: Finding the Best Model for Your Task",
        seed_file="000_35944da5716e589d.txt",
        abstract=5,
        arxiv="2605.07075",
        field="recommendation",
        tier="B",
        check="LCDB cold-start splits: NDCG@3 >= popularity + 0.02 and >= text-only + 0.05, >= pointwise ablation; new-model split tau_w >= family-mean + 0.02",
    ),
    Paper(
        slug="grouped-fdr-mirror",
        title="Grouped-feature FDR control with block mirror statistics and Permutation-SHAP derivatives (descriptive title)",
        seed_file="000_35944da5716e589d.txt",
        abstract=6,
        arxiv=None,
        field="inference",
        tier="A (linear) / B (neural)",
        check="Grouped AR(1) lags: block-GM FDR <= 0.12 and power >= coordinate-wise GM + 0.10; b = 1 reproduces GM exactly; neural variant FDR <= 0.15, power >= 0.5",
    ),
    Paper(
        slug="pmd-td",
        title="Mirror descent actor-critic for entropy-regularised MDPs in general spaces",
        seed_file="000_35944da5716e589d.txt",
        abstract=7,
        arxiv="2602.10838",
        field="rl",
        tier="A",
        check="Random finite MDPs: exact PMD converges linearly; m_n ~ n gives G_200 <= 1e-6; m_n ~ log n gives O(1/n); single loop with small lambda reaches G_N <= 1e-3 with bounded KL",
    ),
    Paper(
        slug="spectral-forests",
        title="Minimax Rates and Spectral Distillation for Tree Ensembles",
        seed_file="000_35944da5716e589d.txt",
        abstract=8,
        arxiv="2605.11841",
        field="trees",
        tier="A",
        check="Friedman/diabetes/fair data: distilled model <= 1/100 of the forest's nodes with R^2 >= forest R^2 - 0.03; beats pruned forest/FIGS/RuleFit at equal size on >= 3 of 4 datasets",
    ),
    Paper(
        slug="minibatch-kernel-kmeans",
        title="Mini-batch Kernel k-means",
        seed_file="000_35944da5716e589d.txt",
        abstract=9,
        arxiv="2410.05902",
        field="clustering",
        tier="A",
        check="Rings+blobs, n = 20000: >= 10x speed-up over full-batch kernel k-means with ARI within 0.03; ARI >= linear MiniBatchKMeans + 0.2; per-iteration time < 1.5x growth from n = 5000 to 20000",
    ),
    Paper(
        slug="minsteer",
        title="MinSteer: contrastive residual directions from cached self-rewrites (descriptive title)",
        seed_file="000_35944da5716e589d.txt",
        abstract=10,
        arxiv=None,
        field="lm",
        tier="B",
        check="SmolLM2-135M sentiment steering at matched perplexity: MinSteer-1 shift >= CAA-50 and >= CAA-1 + 0.05, > TwoSeq-1 by >= 0.05, > random direction by >= 0.10",
    ),
    Paper(
        slug="topo-memorization",
        title="Topology of noisy-label memorization: H1 persistent homology (descriptive title)",
        seed_file="000_35944da5716e589d.txt",
        abstract=11,
        arxiv=None,
        field="representation",
        tier="B",
        check="Digits MLP: H1(eta = 0.4 symmetric) >= 1.5x H1(clean) in 3 of 3 seeds; leave-one-rate-out severity R^2 >= 0.9; asymmetric noise closer to clean than symmetric",
    ),
    Paper(
        slug="memforest",
        title="MemForest: Agent Memory via EventTree Partitioning and Progressive Merging",
        seed_file="000_35944da5716e589d.txt",
        abstract=12,
        arxiv=None,
        field="agents",
        tier="B",
        check="Synthetic persona memory stream at rho = 0.5: recall@10 >= 0.95x uncompressed and >= random drop + 0.15; nodes kept <= 0.55 n; latency speed-up >= 1.6x at 20k nodes",
    ),
    Paper(
        slug="medvtok",
        title="MedVTok: unified 2D/3D medical visual tokenizer",
        seed_file="000_35944da5716e589d.txt",
        abstract=13,
        arxiv=None,
        field="multimodal",
        tier="C",
        check="Synthetic phantoms + digits: SDR cuts inter-slice difference error by >= 15% (3D PSNR drop <= 0.5 dB); MERA probe accuracy >= single-expert + 3 pt and >= averaged-target + 1 pt",
    ),
    Paper(
        slug="medkit",
        title="MedKIT: Medical Knowledge Integration and Transfer benchmark",
        seed_file="000_35944da5716e589d.txt",
        abstract=14,
        arxiv=None,
        field="lm",
        tier="C",
        check="Synthetic clinical-update world, tiny transformer: fine-tuning gains >= 0.5 (original) and >= 0.3 (lexical) while compositional gain <= original - 0.3 and operational <= 0.15",
    ),
    Paper(
        slug="pearl",
        title="PEARL: Prefix-Expanded Adversarial RL for durable behaviour suppression",
        seed_file="000_35944da5716e589d.txt",
        abstract=15,
        arxiv=None,
        field="lm",
        tier="B",
        check="Tiny-GPT organisms on modular arithmetic: exploit rate <= 5%, prefill-attack exploit <= 0.5x GRPO, reactivation after targeted FT <= GRPO - 10 pp and <= SFT - 10 pp",
    ),
    Paper(
        slug="maxsketch",
        title="MaxSketch: Robust Distinct Counting in Streams via Random Projections",
        seed_file="000_35944da5716e589d.txt",
        abstract=16,
        arxiv="2605.15571",
        field="streams",
        tier="B",
        check="Synthetic near-orthogonal embeddings: median relative error <= 0.08 at m = 1024 for n up to 1e5, error ~ 1/sqrt(m); MiniLM text stream <= 0.25 and better than HLL baselines",
    ),
    Paper(
        slug="manifold-random-features",
        title="Manifold Random Features",
        seed_file="000_35944da5716e589d.txt",
        abstract=17,
        arxiv="2602.03797",
        field="kernels",
        tier="B",
        check="Swiss roll / torus / sphere with closed-form heat kernels: GRF error <= 0.10 at m = 256; Swiss-roll MRF held-out error <= 0.20 and <= 1/2 of ambient RFF; all estimates >= 0",
    ),
    Paper(
        slug="mmskills",
        title="MMSkills: Multimodal Skills for General Visual Agents",
        seed_file="000_35944da5716e589d.txt",
        abstract=18,
        arxiv="2605.13527",
        field="agents",
        tier="C",
        check="MiniGrid with random start stages: success >= text-only skills + 0.10 and >= no-skill + 0.20; >= direct injection + 0.10 while loading <= 2 views per consult",
    ),
    Paper(
        slug="lookwhen",
        title="LookWhen? Fast Video Recognition",
        seed_file="000_35944da5716e589d.txt",
        abstract=19,
        arxiv="2605.06809",
        field="vision",
        tier="C",
        check="Synthetic moving-shapes videos: at K/N = 12.5% accuracy >= random-K + 5 pt and >= uniform-temporal + 3 pt; at 25% within 3 pt of the full-token model with >= 3x fewer FLOPs",
    ),
    Paper(
        slug="cofrgenet",
        title="Gated non-expanding continued-fraction channel mixing (CoFrGeNet follow-up; descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=1,
        arxiv=None,
        field="lm",
        tier="B",
        check="Char-level nano-transformer on stdlib source: gated CF (log/exp, no schedule) val loss <= Cffn + dyadic + 0.02 at d = 5; stable at d = 10; throughput >= 0.9x Cffn",
    ),
    Paper(
        slug="bip-gapgen",
        title="Non-Colliding Biometric Identities for Digital Entities (BIP / GapGen)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=2,
        arxiv="2605.18238",
        field="representation",
        tier="C",
        check="Synthetic low-rank gallery: zero virtual-vs-enrolled and virtual-vs-virtual collisions, future-enrollment collisions <= 2x FAR, realisability >= 0.95; repulsion >= 2x rejection-sampling throughput",
    ),
    Paper(
        slug="nas-bpi",
        title="Non-asymptotic sample complexity of Navigate-and-Stop for best policy identification (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=3,
        arxiv=None,
        field="rl",
        tier="A",
        check="Small tabular MDPs: delta-correct stopping; slope of E[tau] vs log(1/delta) in [0.8, 3] x U*; R(0.01) non-decreasing as connectivity p shrinks; NaS <= uniform navigation / 1.5",
    ),
    Paper(
        slug="convmmd-deconv",
        title="Nonparametric Deconvolution and Denoising using Simulation Based Inference",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=4,
        arxiv="2606.21907",
        field="inference",
        tier="A",
        check="1D/2D synthetic latents: ISE(convMMD-GMM) <= 0.5x naive KDE; denoising MSE <= 0.75x noisy and <= 1.2x oracle Bayes; 2D ring W1 <= 0.5x noisy",
    ),
    Paper(
        slug="noisy-gnn-margin",
        title="Noisy alignment: margin-based GNN expressivity with robustness radii (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=5,
        arxiv=None,
        field="graphs",
        tier="B",
        check="networkx atlas graphs: zero-noise alignment agrees with WL-hash uniqueness on >= 99%; 0 violations inside certified radii; margin training +10 points noisy alignment",
    ),
    Paper(
        slug="rlvr-noisy-data",
        title="Noisy Data is Destructive to Reinforcement Learning with Verifiable Rewards",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=6,
        arxiv="2603.16140",
        field="lm",
        tier="C (re-verification part A)",
        check="sympy re-verification: recall >= 0.95 and precision >= 0.99 on planted-correct labels; toy GRPO: clean - truly-noisy >= 8 pp, truly-noisy <= format-only + 3 pp",
        package="rlvr_noisy",
    ),
    Paper(
        slug="smfsr",
        title="Noise-Started One-Step Real-World SR via LR-Conditioned SplitMeanFlow",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=7,
        arxiv="2605.09328",
        field="vision",
        tier="C",
        check="Digits 4x4 -> 8x8 SR: 1-NFE Digits-FID <= 1.3x 50-step teacher and <= 0.5x 1-step Euler teacher; beats regression FID with diversity > 0.02",
    ),
    Paper(
        slug="tilted-2d-prior-sb",
        title="Annealed 2D-tilted diffusion prior vs multi-marginal Schrödinger-bridge lift (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=8,
        arxiv=None,
        field="inference",
        tier="A",
        check="Gaussian family: KL/(N sigma^2) varies <= 3x with slopes in [1.6, 2.4] (sigma) and [0.8, 1.2] (N); TV rate and Pinsker hold; non-noise-aligned counter-example breaks the rate",
    ),
    Paper(
        slug="notvla",
        title="NoTVLA: Semantics-Preserving Robot Adaptation via Narrative Action Interfaces",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=9,
        arxiv="2510.03895",
        field="robotics",
        tier="C",
        check="Kinematic pick-and-place demos: waypoints + spline success >= 95% with >= 8x fewer tokens than per-step binning; tiny-LM QA retention drop <= dense drop - 5 pt",
    ),
    Paper(
        slug="nota-cil",
        title="NoTA / H-NoTA: normalized tensor adaptation for rehearsal-free CIL (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=10,
        arxiv=None,
        field="representation",
        tier="B",
        check="Digits and synthetic class-incremental streams: global norm >= task-wise - 0.5 pt and >= no norm + 2 pt; ||W_T - W0|| constant; NoTA <= 0.5x LoRA parameters",
    ),
    Paper(
        slug="delayed-hit-caching",
        title="Regret-optimal delayed-hit caching: UCB-DH and LA-FTPL (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=11,
        arxiv=None,
        field="caching",
        tier="A",
        check="Synthetic Zipf and adversarial traces: regret slope UCB-DH <= 0.6, LA-FTPL <= 0.7, LRU/Marker >= 0.9 on the adversarial trace; UCB-DH latency <= LRU-MAD and <= 0.9x LRU",
    ),
    Paper(
        slug="gfm-audit",
        title="No One Knows the State of the Art in Geospatial Foundation Models",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=12,
        arxiv="2605.12678",
        field="evaluation",
        tier="A (mechanisms, synthetic data)",
        check="Planted synthetic literature: auditor flags >= 10-point disagreements with precision and recall >= 0.95; harness reruns agree within 1.5 points while uncontrolled protocols flip rankings",
    ),
    Paper(
        slug="hk-entropy-filter",
        title="Kontoyiannis entropy-rate (H_K) filtering against model collapse (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=13,
        arxiv=None,
        field="streams",
        tier="C",
        check="Markov sources: corr(H_K, true rate) >= 0.98; trigram collapse loop on stdlib docstrings: H_K filter keeps >= 15% more unique trigrams and >= 10% more vocabulary than random and logprob filters",
    ),
    Paper(
        slug="obsalign",
        title="ObsAlign: observability-aware cross-modal alignment (descriptive title)",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=14,
        arxiv=None,
        field="multimodal",
        tier="C",
        check="Synthetic multi-source 3-modality data with a planted mismatch: accuracy >= uniform alignment + 0.01; negative transfer on low-observability relations <= 0.5x; clean twin within 0.01",
    ),
    Paper(
        slug="ftrl-surplus",
        title="No Coin Left Behind: Maximizing Strategic Surplus Against No-Regret Dynamics",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=15,
        arxiv="2604.05129",
        field="rl",
        tier="A",
        check="Planted and random zero-sum games: eta x S_T varies <= 10% across eta, ~0 when N = 0, within 5% of closed forms; Euclidean eliminates in finite time; best-response S_T linear in T",
    ),
    Paper(
        slug="njord",
        title="Njord: A Probabilistic GNN for Ensemble Ocean Forecasting",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=16,
        arxiv="2605.15470",
        field="forecasting",
        tier="B",
        check="Synthetic stochastic ocean on an irregular sea mask: K-means mesh coverage <= 0.85x regular; ensemble CRPS(lead 5) <= 0.9x deterministic MAE; spread-skill ratio in [0.6, 1.4]",
    ),
    Paper(
        slug="nitrobox",
        title="NitroBox: Lightning-Fast Sandbox for Large-Scale RL Training",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=17,
        arxiv=None,
        field="systems",
        tier="B",
        check="Namespace + overlayfs sandbox vs Docker: create/reset/delete >= 10x faster, exec >= 5x; without Docker create and reset <= 50 ms; rollout harness wall time -25%",
    ),
    Paper(
        slug="nexus-optimizer",
        title="Nexus: Same Pretraining Loss, Better Downstream Generalization via Common Minima",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=18,
        arxiv="2604.09258",
        field="lm",
        tier="B",
        check="Synthetic multi-source data at equal training loss: OOD loss <= 0.95x AdamW, gradient cosine >= AdamW + 0.05; beta -> 0 recovers AdamW",
        package="nexus",
    ),
    Paper(
        slug="nextlat",
        title="Next-Latent Prediction Transformers Learn Compact World Models",
        seed_file="004_eea629a8ecb3c254.txt",
        abstract=19,
        arxiv="2511.05963",
        field="lm",
        tier="B",
        check="Hidden-grid walk: NTP loss within 2% of GPT, effective rank <= 0.8x GPT, probe accuracy >= GPT + 3 pp; self-speculative decoding exact",
    ),
)

_BY_SLUG = {p.slug: p for p in PAPERS}


def get(slug: str) -> Paper:
    """The record for ``slug``; raises ``KeyError`` naming the known slugs when unknown."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise KeyError(
            f"unknown paper slug {slug!r}; `neurips26 list` shows the {len(PAPERS)} known slugs"
        ) from None


def slugs() -> list[str]:
    return [p.slug for p in PAPERS]


def markdown_table() -> str:
    """The README's paper table, generated from the registry (``neurips26 readme`` rewrites it).

    The API column shows the first three names of each paper's ``__all__`` (so a package lists its headline
    names first) and how many more there are.
    """
    from .harness.evidence import evidence_state

    lines = [
        "| slug | paper | field | tier | status (quick) | full: declared | full: measured | API |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in PAPERS:
        ev = evidence_state(p.slug)
        measured = ev.summary() if ev.state == "not run" else f"[{ev.summary()}](evidence/{p.slug}/)"
        link = f"[arXiv {p.arxiv}](https://arxiv.org/abs/{p.arxiv})" if p.arxiv else "no arXiv id found"
        api = p.api
        names = ", ".join(f"`{name}`" for name in api[:3]) + (
            f" and {len(api) - 3} more" if len(api) > 3 else ""
        )
        lines.append(
            f"| `{p.slug}` | {p.title} ({link}) | {p.field} | {p.tier} | {p.status} | {p.full_status} "
            f"| {measured} | {names or '-'} |"
        )
    return "\n".join(lines)
