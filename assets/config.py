"""The launchpad configs of the assets: the knobs a run config (`config/demo.yaml`, the UI's
launchpad) sets per asset, each turned into the core's config dataclass by `to_core`. Torch-heavy
modules are imported inside `to_core`: every code-location load reads this file."""

from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from hier_pipeline.evaluation.ablations import DEFAULT_VIEWS, TRAINED
from hier_pipeline.evaluation.baselines.evaluate import (
    BASELINE_WORKERS,
    BASELINES,
    QUICK_BASELINES,
)

if TYPE_CHECKING:
    from hier_pipeline.interests.hierarchy import HierarchyConfig
    from hier_pipeline.interests.tokens import TokenConfig
    from hier_pipeline.model.train_config import TrainConfig


class GraphSplitLaunchConfig(dg.Config):
    """Where the time split falls, as quantiles of the target (deepest) funnel stage's event times."""

    train_fraction: float = Field(default=0.7, description="share of target events before t1")
    validate_fraction: float = Field(default=0.15, description="share of target events in [t1, t2)")


class TrainingLaunchConfig(dg.Config):
    """Launchpad knobs of a training run (the rest keeps the defaults of `TrainConfig`)."""

    epochs: int = Field(
        default=4, description="maximum epochs (early stopping on validation MAP@10)"
    )
    steps_per_epoch: int = Field(default=30, description="optimisation steps per epoch")
    batch_size: int = Field(default=128, description="funnel positives per step")
    dim: int = Field(default=64, description="embedding width")
    layers: int = Field(default=2, description="graph-transformer layers")
    num_primitives: int = Field(default=32, description="K, the global interest primitives")
    use_attention_biases: bool = Field(
        default=True, description="ablation: all five attention bias terms"
    )
    use_primitives: bool = Field(
        default=True, description="ablation: the global primitive exchange"
    )
    use_distillation: bool = Field(
        default=True, description="ablation: content <-> behaviour distillation"
    )
    use_history_bias: bool = Field(
        default=True, description="ablation: the learned score for a user's own earlier items"
    )
    fanouts: list[int] = Field(default=[8, 4], description="neighbours drawn per hop")
    target_fanouts: list[int] | None = Field(
        default=None, description="the target stage's edges drawn apart, these per hop"
    )
    seed: int = Field(default=0, description="seed of initialisation and sampling")
    device: str = Field(default="auto", description="auto (a GPU if CUDA is), cpu, cuda[:N]")
    amp: bool = Field(default=False, description="bfloat16 autocast on a GPU")

    def to_core(self) -> "TrainConfig":
        # Imported here: torch-heavy modules would slow every code-location load.
        from hier_pipeline.model.attention import AttentionConfig
        from hier_pipeline.model.network import ModelConfig
        from hier_pipeline.model.train_config import TrainConfig

        attention = AttentionConfig.with_biases(self.use_attention_biases)
        model = ModelConfig(
            dim=self.dim,
            layers=self.layers,
            num_primitives=self.num_primitives,
            use_primitives=self.use_primitives,
            use_history_bias=self.use_history_bias,
            attention=attention,
        )
        return TrainConfig(
            model=model,
            epochs=self.epochs,
            steps_per_epoch=self.steps_per_epoch,
            batch_size=self.batch_size,
            use_distillation=self.use_distillation,
            fanouts=tuple(self.fanouts),
            target_fanouts=None if self.target_fanouts is None else tuple(self.target_fanouts),
            seed=self.seed,
            device=self.device,
            amp=self.amp,
        )


class EvaluationLaunchConfig(TrainingLaunchConfig):
    """What to compare. The trained ablations use the inherited training knobs: keep them equal to
    `interest_model`'s (the defaults are); a different architecture is refused."""

    # Three views of the full model by default (`DEFAULT_VIEWS`): each trained ablation costs a
    # full interest_model fit, which would triple the demo, and each ranker view a ranker fit.
    # `hier evaluate` scores all of them.
    ablations: list[str] = Field(
        default_factory=lambda: list(DEFAULT_VIEWS),
        description=f"ablations: views (`hier evaluate --help`) cost no training, each of"
        f" {list(TRAINED)} trains one",
    )
    baselines: list[str] = Field(
        default_factory=lambda: list(QUICK_BASELINES),
        description=f"baselines to tune, refit and score, of {list(BASELINES)}; default: the"
        " quick ones (`hier evaluate`: all)",
    )
    max_users: int = Field(
        default=5000, description="evaluated users (a fixed random subset beyond it)"
    )
    baseline_steps: int = Field(
        default=1000,
        description="step budget of a trained baseline: its grid's longest fit (halving)",
    )
    baseline_seconds: float | None = Field(
        default=None,
        description="wall-clock cap per trained baseline fit (default none: a cap makes scores"
        " depend on load)",
    )
    baseline_workers: int = Field(
        default=BASELINE_WORKERS,
        description="one-thread processes tuning baselines side by side (1: in turn, all threads)",
    )


class HierarchyLaunchConfig(dg.Config):
    """Launchpad knobs of the tree (the rest keeps the defaults of `HierarchyConfig`)."""

    levels: int = Field(default=3, description="levels of the tree, coarse -> fine")
    items_per_leaf: int = Field(
        default=24, description="items per finest primitive, when sizes are left to the data"
    )
    sizes: list[int] = Field(
        default_factory=list,
        description="primitives per level, coarse -> fine; empty: sized from the data",
    )
    seed: int = Field(
        default=0, description="seed of the k-means runs (stability is measured against seed + 1)"
    )
    modalities: list[str] = Field(
        default_factory=list,
        description="content the finest codes read, of text, image; empty: chosen on held-out"
        " events",
    )

    def to_core(self) -> "HierarchyConfig":
        from hier_pipeline.interests.fusion import MODALITIES
        from hier_pipeline.interests.hierarchy import HierarchyConfig

        known = [name for name, _ in MODALITIES]
        if unknown := sorted(set(self.modalities) - set(known)):
            raise ValueError(f"hierarchy config: unknown modalities {unknown}; known: {known}")
        return HierarchyConfig(
            levels=self.levels,
            items_per_leaf=self.items_per_leaf,
            sizes=tuple(self.sizes) or None,
            seed=self.seed,
            modalities=tuple(self.modalities) or None,
        )


class TokenLaunchConfig(dg.Config):
    top_k: int = Field(default=3, description="tokens per level in each bag")
    temperature: float = Field(default=0.1, description="softmax temperature of the bag weights")

    def to_core(self) -> "TokenConfig":
        from hier_pipeline.interests.tokens import TokenConfig

        return TokenConfig(top_k=self.top_k, temperature=self.temperature)


class PromotionLaunchConfig(dg.Config):
    metric: str = Field(
        default="map@10", description="our model's target-stage metric in the evaluation report"
    )
    tolerance: float = Field(
        default=0.005, description="how far below the serving model's score still promotes"
    )
    min_overlap: float = Field(
        default=0.5, description="item overlap (Jaccard) for a new interest to keep an old id"
    )
