"""The registry: one record per seed abstract (38 papers).

Each record says where a paper lives and how far it has got. Import paths are strings, so
``neurips26 list`` reads this file without importing any implementation (or torch).

Status is told truly:

- ``planned``: nothing built yet;
- ``implemented``: the API and its tests exist, the reproduction experiment does not (yet);
- ``reproduced`` / ``partial`` / ``not-reproduced``: the verdict of the paper's reproduction experiment
  (the digest's checks, thresholds unchanged). ``status_note`` says why when it is not ``reproduced``.

The test suite checks that a paper's registered status agrees with the verdict its quick experiment
actually produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("planned", "implemented", "reproduced", "partial", "not-reproduced")
TIERS = ("A", "B", "C")


@dataclass(frozen=True)
class Paper:
    """One seed abstract and the state of its implementation."""

    slug: str
    title: str
    seed_file: str
    abstract: int  # position in the seed file, counted from 1 (title line not counted)
    arxiv: str | None
    field: str
    tier: str  # "A", "B", "C"; some digests qualify it, e.g. "A (linear) / B (neural)"
    check: str  # the digest's reproduction check, in one line
    module: str  # import path of the paper's package
    status: str = "planned"
    api: tuple[str, ...] = field(default_factory=tuple)  # public names exported by ``module``
    status_note: str = ""

    @property
    def experiment(self) -> str:
        """Import path of the reproduction experiment: ``module.experiment:run``."""
        return f"{self.module}.experiment:run"

    @property
    def source_dir(self) -> str:
        """Folder of the paper's code, relative to the repository root."""
        return "src/" + self.module.replace(".", "/")

    @property
    def has_experiment(self) -> bool:
        return self.status in ("reproduced", "partial", "not-reproduced")


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
        module="neurips26.transport.ssg_mil",
        status="partial",
        api=("SparseSupportGroundingMIL", "AttentionMIL", "unbalanced_sinkhorn_log", "retained_mass"),
        status_note=(
            "Our reconstruction (unbalanced-OT retained-mass contrast w = relu(r+ - r-)) does not beat the "
            "baselines on sparse synthetic bags: bag AUC 0.68 vs max pooling 0.86 (bar +0.02), instance AUC 0.78 "
            "vs gated ABMIL 0.89 (bar +0.05); only the label-contrast ablation check passes (decoy weight ratio "
            "4.8 >= 2). Retained masses track how much mass each support set demands rather than match quality. "
            "Full mode not yet run."
        ),
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
        module="neurips26.inference.nbffg",
        status="reproduced",
        api=("NBFFG", "grid_posterior_1d", "bootstrap_importance_sampling", "dense_gaussian_tree_posterior"),
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
        module="neurips26.transport.srgw_graphon",
        status="partial",
        api=(
            "SRGWGraphonEstimator",
            "srgw_conditional_gradient",
            "srgw_block_coordinate_descent",
            "usvt_estimate",
            "sas_estimate",
        ),
        status_note=(
            "srGW meets the SBM recovery (ARI 1.0, MSE = spectral), MSE-slope, relaxation-gap and consistency "
            "checks, but on 4 of 5 smooth graphons at n = 1000 its MSE is 2.2-3.1x the best of USVT/SAS (1 of 5 "
            "within 1.15x; 3 needed): a piecewise-constant K-block estimate cannot match smoothing estimators on "
            "smooth graphons at this n."
        ),
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
        module="neurips26.multimodal.multabench",
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
        module="neurips26.recommendation.modellens",
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
        module="neurips26.inference.grouped_fdr_mirror",
        status="partial",
        api=(
            "GroupedMirrorFDR",
            "NeuralBlockMirrorFDR",
            "block_mirror_statistics",
            "gaussian_mirror_statistics",
            "mirror_threshold",
        ),
        status_note=(
            "Block size 1 reproduces Gaussian Mirror exactly (1e-16) and the neural block variant meets FDR 0.144 "
            "<= 0.15 and power 0.80 >= 0.5 (full mode), but with the digest's GM threshold (no +1) the linear "
            "block mirror's FDR is 0.14-0.18 on grouped AR(1) lags (bar 0.12) and 0.27-0.49 on macrodata (bar "
            "0.15), with no power gain over coordinate-wise GM (-0.02 to -0.04; bar +0.10); group BH is stronger "
            "here."
        ),
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
        module="neurips26.rl.pmd_td",
        status="reproduced",
        api=("policy_mirror_descent", "regularised_gap", "td_schedule"),
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
        module="neurips26.trees.spectral_forests",
        status="partial",
        api=(
            "SpectralForestDistiller",
            "PrunedForest",
            "TreeSmoother",
            "forest_kernel",
            "leaf_membership",
            "smoother_spectrum",
            "eigen_decay_exponent",
        ),
        status_note=(
            "Distilled models are 1/100-1/160 of the forest's nodes, the boosting distillation stays within 0.012 "
            "R2 and the rank-30 smoother reproduces the forest (R2 0.97), but the rank-20 RF student loses "
            "0.033-0.060 R2 on Friedman1 (bar 0.03) because the forest kernel's eigenvalues decay slowly "
            "(exponent 0.14-0.18), and it beats the pruned-forest/FIGS/RuleFit baselines on 2 of 4 datasets, not "
            "3."
        ),
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
        module="neurips26.clustering.minibatch_kernel_kmeans",
        status="partial",
        api=("MiniBatchKernelKMeans", "KernelKMeans", "kernel_kmeans_plusplus", "median_heuristic_gamma"),
        status_note=(
            "Speed-up (>= 10x at n = 20000), ARI within 0.03 of full batch and n-independent iterations reproduce; "
            "'ARI >= linear MiniBatchKMeans + 0.2 on rings+blobs' fails because the digest's median-heuristic "
            "bandwidth puts every RBF kernel method, full batch included, level with linear k-means on that data."
        ),
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
        module="neurips26.lm.minsteer",
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
        module="neurips26.representation.topo_memorization",
        status="partial",
        api=(
            "TopologicalMemorizationTracker",
            "NoiseSeverityCalibrator",
            "PenultimateMLP",
            "h1_total_persistence",
            "persistence_diagrams",
            "corrupt_labels",
            "leave_one_rate_out_r2",
        ),
        status_note=(
            "H1 of penultimate features rises with symmetric label noise (H1(0.4)/H1(clean) 2.5-3.1 in 3 of 3 "
            "seeds) and asymmetric noise stays close to clean, but H1 rises concavely with the rate, so the pre- "
            "registered log-linear leave-one-rate-out calibration misses R2 >= 0.9 (0.21 quick / 0.42 full), and "
            "in full mode H1 falls during grokking in only 2 of 6 runs (bar 4). H0 separates noise rates too, so "
            "'the signal is in H1, not H0' does not reproduce (reported, not gated)."
        ),
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
        module="neurips26.agents.memforest",
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
        module="neurips26.multimodal.medvtok",
    ),
    Paper(
        slug="medkit",
        title="MedKIT: Medical Knowledge Integration and Transfer benchmark",
        seed_file="000_35944da5716e589d.txt",
        abstract=14,
        arxiv=None,
        field="multimodal",
        tier="C",
        check="Synthetic clinical-update world, tiny transformer: fine-tuning gains >= 0.5 (original) and >= 0.3 (lexical) while compositional gain <= original - 0.3 and operational <= 0.15",
        module="neurips26.multimodal.medkit",
    ),
    Paper(
        slug="pearl",
        title="PEARL: Prefix-Expanded Adversarial RL for durable behaviour suppression",
        seed_file="000_35944da5716e589d.txt",
        abstract=15,
        arxiv=None,
        field="rl",
        tier="B",
        check="Tiny-GPT organisms on modular arithmetic: exploit rate <= 5%, prefill-attack exploit <= 0.5x GRPO, reactivation after targeted FT <= GRPO - 10 pp and <= SFT - 10 pp",
        module="neurips26.rl.pearl",
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
        module="neurips26.streams.maxsketch",
        status="reproduced",
        api=("MaxSketch", "LogLinearCalibration", "estimate_noise_scale", "estimate_from_maxima"),
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
        module="neurips26.kernels.manifold_random_features",
        status="partial",
        api=("ManifoldRandomFeatures", "GraphRandomFeatures"),
        status_note=(
            "MRF held-out error 0.10-0.14 on the Swiss roll (<= 0.20), 0.24-0.35x the best ambient random "
            "features (<= 0.5x), sphere MRF 0.99x the exact-graph Nystrom baseline (<= 1.5x), all estimates >= 0 "
            "and the Gaussian rediscovery pass; the digest's pinned uniform-neighbour GRF has node-node error "
            "0.14 (quick) and 0.15-0.29 (full, three manifolds) at m = 256 walks (bar 0.10). Our importance- "
            "weighted walks (0.071) are reported, not gated."
        ),
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
        module="neurips26.agents.mmskills",
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
        module="neurips26.vision.lookwhen",
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
        module="neurips26.lm.cofrgenet",
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
        module="neurips26.representation.bip_gapgen",
        status="partial",
        api=(
            "provision_identities",
            "IdentityProvisioner",
            "count_collisions",
            "impostor_threshold",
            "real_subspace",
            "realisability",
        ),
        status_note=(
            "Zero collisions with the gallery and among new identities (exact), future-enrolment collisions 0.21x "
            "FAR (<= 2x), realisability 1.04 (>= 0.95; the uniform-sphere baseline 0.42) and naive-sampling "
            "collisions all reproduce on the synthetic gallery; repulsion is only 1.4-1.5x (bar 2x) faster than "
            "on-manifold rejection sampling, because rejection still accepts ~22% of candidates at FAR 1e-4. On "
            "MiniLM names (full mode) the uniform-baseline and naive-collision contrasts also fail."
        ),
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
        module="neurips26.rl.nas_bpi",
        status="reproduced",
        api=(
            "NavigateAndStop",
            "oracle_allocation",
            "characteristic_time",
            "bound_terms",
            "stopping_threshold",
        ),
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
        module="neurips26.inference.convmmd_deconv",
        status="partial",
        api=(
            "ConvMMDDeconvolver",
            "mmd2_unbiased",
            "multiscale_bandwidths",
            "npmle_grid",
            "grid_posterior_mean",
        ),
        status_note=(
            "The GMM sieve passes every gate in quick and full mode (ISE 0.12-0.19x naive KDE, denoising MSE "
            "0.65x noisy and 1.00x oracle Bayes, 2-D ring W1 0.49x noisy with a thin margin, faster rate under "
            "Laplace than Gaussian noise); our spline-flow sieve misses the flow gate (ISE 0.64x KDE, bar 0.5), "
            "so the full verdict is partial."
        ),
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
        module="neurips26.graphs.noisy_gnn_margin",
        status="partial",
        api=(
            "GINNodeClassifier",
            "DenseGNN",
            "zero_noise_alignment",
            "alignment_margins",
            "robustness_radius",
            "certified_flip_radius",
            "train_alignment",
            "node_certificates",
        ),
        status_note=(
            "Zero-noise GIN alignment agrees with WL-hash uniqueness on 100% of 1200 atlas graphs and "
            "certificates are never violated (graph and node level), but on 6-7-node atlas graphs the predicted "
            "radius does not predict survival (Spearman 0.03-0.16, bar 0.5), margin training gains only 3-5 "
            "points at one flip (bar +10), and the 2-flip rate cannot be measured (almost no identifiable 2-flip "
            "copies)."
        ),
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
        module="neurips26.lm.rlvr_noisy_data",
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
        module="neurips26.vision.smfsr",
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
        module="neurips26.inference.tilted_2d_prior_sb",
        status="reproduced",
        api=(
            "GaussianTilt",
            "gaussian_sb_lift",
            "ratio_tilt",
            "ipf_ladder",
            "tilt_kl",
            "gaussian_kl",
            "correction_field",
        ),
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
        module="neurips26.robotics.notvla",
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
        module="neurips26.representation.nota_cil",
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
        module="neurips26.caching.delayed_hit_caching",
        status="reproduced",
        api=("simulate", "UCBDH", "LAFTPL", "LRU", "LFU", "Marker", "LRUMAD", "BestStatic", "make_trace"),
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
        module="neurips26.evaluation.gfm_audit",
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
        module="neurips26.streams.hk_entropy_filter",
        status="partial",
        api=(
            "entropy_rate",
            "EntropyRateFilter",
            "match_lengths",
            "naive_match_lengths",
            "TrigramLM",
            "stdlib_docstrings",
        ),
        status_note=(
            "H_K filtering beats random on every diversity metric (+26-29% unique trigrams, +29-32% vocabulary, p "
            "< 1e-3) and tracks collapse (Spearman rho -0.98), and H_K correlates 0.999 with true Markov entropy "
            "rates; but in quick mode it beats surprise (logprob-low) filtering by only 12% unique trigrams (bar "
            "15%; full mode 19%), and the Bagrow variant's worst error on the Markov chains is 9.3% (bar 8%, the "
            "lowest-entropy chain)."
        ),
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
        module="neurips26.multimodal.obsalign",
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
        module="neurips26.rl.ftrl_surplus",
        status="partial",
        api=(
            "ftrl_strategy",
            "maxmin_strategy",
            "planted_game",
            "random_gaussian_game",
            "fixed_optimizer_dynamics",
            "best_response_dynamics",
            "hedge_sweeping_surplus",
            "euclidean_sweeping_surplus",
            "elimination_round",
        ),
        status_note=(
            "eta x S_T stays within 10% across eta for Hedge (1.8%) and every k <= 2 case, but not for the "
            "Euclidean learner with k = 3 at eta = 0.1, where suboptimal actions vanish after 5.5-11 rounds and "
            "discrete time adds 8-14% (measured spread 0.136 > 0.10); the other 12 checks pass, including the "
            "closed forms within 1%."
        ),
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
        module="neurips26.forecasting.njord",
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
        module="neurips26.systems.nitrobox",
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
        module="neurips26.lm.nexus_optimizer",
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
        module="neurips26.lm.nextlat",
    ),
)

_BY_SLUG = {p.slug: p for p in PAPERS}


def get(slug: str) -> Paper:
    """The record for ``slug``; raises ``KeyError`` naming the known slugs when unknown."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise KeyError(f"unknown paper slug {slug!r}; `neurips26 list` shows the 38 known slugs") from None


def slugs() -> list[str]:
    return [p.slug for p in PAPERS]


def markdown_table() -> str:
    """The README's paper table, generated from the registry (``neurips26 readme`` rewrites it)."""
    lines = [
        "| slug | paper | field | tier | status | API |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in PAPERS:
        link = f"[arXiv {p.arxiv}](https://arxiv.org/abs/{p.arxiv})" if p.arxiv else "no arXiv id found"
        api = ", ".join(f"`{name}`" for name in p.api[:3]) + (", ..." if len(p.api) > 3 else "")
        lines.append(
            f"| `{p.slug}` | {p.title} ({link}) | {p.field} | {p.tier} | {p.status} | {api or '-'} |"
        )
    return "\n".join(lines)
