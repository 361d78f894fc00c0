"""The knobs of one training run of the interest model (`train.py` runs it, `trainer.py` takes
its steps). Apart from them so that what only configures training (the asset configs, the
pipeline, the incremental path) does not import the training machinery."""

from __future__ import annotations

from dataclasses import dataclass, field

from hier_pipeline.graph.csr import Strategy
from hier_pipeline.graph.sampler import SamplerConfig, StageFanouts
from hier_pipeline.model.network import ModelConfig


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    fanouts: tuple[int, ...] = (8, 4)
    # Caps per hop for the target (deepest) stage's edges, drawn as a relation of their own
    # (`StageFanouts`); None: drawn with the other stages under `fanouts` (issue 18, item 2).
    target_fanouts: tuple[int, ...] | None = None
    # Which neighbours a training example's roots see: "uniform" draws among all before its time,
    # "recent" keeps the latest ones, as serving always does (`infer.py`).
    sampling: Strategy = "uniform"
    epochs: int = 4
    steps_per_epoch: int = 30
    batch_size: int = 128
    random_negatives: int = 64
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    temperature: float = 0.1
    # Correct the ranking loss for how often each item is a sampled candidate (see
    # `funnel_softmax_loss`); off, the model learns to rank popular items down.
    logq_correction: bool = True
    # Per positive, this many of the user's own earlier items as extra hard negatives (with the
    # history term only): they teach which earlier items come back, not only that they do.
    history_negatives: int = 1
    # Weight of the ranking loss by inner product alone, next to the full score's (with the
    # history term): keeps the embedding space an interest space (see `Trainer.step`).
    embedding_loss_weight: float = 1.0
    # That ranking on explore positives only (items new to the user), none of the user's earlier
    # items among its negatives: the embedding learns interests and leaves replay to the history
    # term and the ranker's counts (issue 18, item 1).
    explore_embedding_loss: bool = False
    # Share of item roots per step embedded as of their first engagement, i.e. without any of
    # their own events (DropoutNet for graphs): new products are embedded that way, and a model
    # that never saw an item without behaviour would not know where to put them.
    cold_item_rate: float = 0.2
    # Serving embeds a user and reads their history once, at the start of a window, and ranks
    # their events over all of it. Training does the same: each event is seen as of a time drawn
    # uniformly up to one validation window (t2 - t1) before it. Without the gap, the model
    # learns the funnel of the last minutes (a view, then its purchase), which serving never sees.
    serving_gap: bool = True
    # Weight of the content view's own ranking loss (`Trainer._content_ranking`): users rank
    # items by their text and image alone, so that the ranker's `content_view` signal, the same
    # for an item with events and one without, means something. 0: off (issue 18, item 5).
    content_ranking_weight: float = 1.0
    use_distillation: bool = True
    distill_weight: float = 0.2
    usage_weight: float = 0.05
    ema_momentum: float = 0.99
    # The step budget's schedule (`schedule.py`): a linear warm-up of this many steps, then, with
    # `cosine_schedule`, the rate decays by a cosine to `min_lr_ratio` of itself over
    # epochs x steps_per_epoch while the teacher's momentum rises from `ema_momentum` to
    # `ema_momentum_final`.
    warmup_steps: int = 0
    cosine_schedule: bool = False
    min_lr_ratio: float = 0.1
    ema_momentum_final: float = 0.99
    patience: int = 2
    eval_k: int = 10
    max_eval_users: int = 1000
    seed: int = 0
    # PyTorch's deterministic kernels (`deterministic_kernels`): the same config trains the same
    # weights in every run, at about 16% more time per step on 2 CPU cores.
    deterministic: bool = True
    # Where the model trains (`device.py`): "auto" is the GPU when CUDA is present, else the CPU;
    # "cpu", "cuda" or "cuda:N" insist. The trained model is returned on the CPU either way.
    device: str = "auto"
    # bfloat16 autocast of each step's forward pass and losses on a GPU (no effect on a CPU).
    # Off by default: its effect on the model's figures has not been measured.
    amp: bool = False
    # Wall-clock seconds of optimisation steps (validation excluded) after which training ends,
    # mid-epoch if need be: equal-time comparisons between backbones. None: no limit.
    time_budget_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.target_fanouts is not None and len(self.target_fanouts) != len(self.fanouts):
            raise ValueError(
                f"target_fanouts {self.target_fanouts} need one cap per hop, as fanouts"
                f" {self.fanouts} has"
            )

    def neighbourhoods(self, num_stages: int) -> SamplerConfig:
        """How training samples neighbourhoods, for a graph of `num_stages` funnel stages;
        `SamplerConfig.as_served` of it is how every later stage embeds with the model."""
        stage = None
        if self.target_fanouts is not None:
            stage = StageFanouts(num_stages - 1, self.target_fanouts)
        return SamplerConfig(self.fanouts, self.sampling, self.seed, stage)
