"""The ablations of our model compared in the evaluation report: each switches off one idea and
keeps everything else of the full model's training config.

Seven are trained models of their own (same data, split, seed and steps): four switch an idea
off, three switch one on that is not the default: `hier_explore_embedding` (the embedding's own
loss on explore positives only, issue 18 item 1; measured as a tie so far), `hier_target_fanouts`
(the target stage's edges sampled apart, four times the first hop's cap, in training and
serving; issue 18 item 2) and `hier_temporal_messages` (each edge's funnel stage and age encoded
in its key and value, HGT's relative temporal encoding; item 2). The rest are views of
the full model, free of training (`VIEWS`):
  - `hier_content_only` places users from the graph and items from their content alone (text and
    image, the content view that distillation aligns with the graph view), which is how a product
    with no engagement at all would be placed;
  - `hier_no_ranker` ranks by the model's own score (inner product plus its history term) instead
    of the second-stage ranker;
  - the ranker without one of its signals (`hier_ranker_no_embedding`, `_no_tokens` (both token
    signals), `_no_token_shares` (the users' shares per interest level, `interests/shares.py`),
    `_no_content`, `_no_content_view`: the user's embedding against the item's content view,
    issue 18 item 5; `_no_paths`: the relational paths, `ranker/paths.py`), over counts,
    content and paths alone (`hier_ranker_no_representation`: what the learned representation
    adds to everything else the ranker reads), over counts alone (`hier_counts_only`),
    fitted without simulated cold items (`hier_ranker_no_cold_items`) and without the items'
    listing times (`hier_ranker_no_listing`: no listing age, items listed after the fit window
    kept there; `ranker/ranker.py`);
  - the ranker with what is not the default: `hier_ranker_content_popularity` (one signal more,
    each item's popularity predicted from its content; issue 18, item 3; `ranker_setup.py`) and
    `hier_ranker_new_item_candidates` (each content signal's top new items as candidates too,
    `RankerConfig.new_item_candidates`; item 5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace

from torch import Tensor

from hier_pipeline.evaluation.report import SERVED
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import SamplerConfig
from hier_pipeline.graph.split import TemporalSplit
from hier_pipeline.model.attention import AttentionConfig
from hier_pipeline.model.network import ModelConfig
from hier_pipeline.model.train import TrainResult, train_model
from hier_pipeline.model.train_config import TrainConfig

CONTENT_ONLY = "hier_content_only"
NO_RANKER = SERVED
NO_EMBEDDING_SIGNAL = "hier_ranker_no_embedding"
NO_TOKEN_SIGNAL = "hier_ranker_no_tokens"
NO_TOKEN_SHARES = "hier_ranker_no_token_shares"
NO_CONTENT_SIGNAL = "hier_ranker_no_content"
NO_CONTENT_VIEW_SIGNAL = "hier_ranker_no_content_view"
NO_PATHS_SIGNAL = "hier_ranker_no_paths"
NO_REPRESENTATION = "hier_ranker_no_representation"
COUNTS_ONLY = "hier_counts_only"
NO_COLD_ITEMS = "hier_ranker_no_cold_items"
NO_LISTING = "hier_ranker_no_listing"
WITH_CONTENT_POPULARITY = "hier_ranker_content_popularity"
WITH_NEW_ITEM_CANDIDATES = "hier_ranker_new_item_candidates"
VIEWS = (
    CONTENT_ONLY,
    NO_RANKER,
    NO_EMBEDDING_SIGNAL,
    NO_TOKEN_SIGNAL,
    NO_TOKEN_SHARES,
    NO_CONTENT_SIGNAL,
    NO_CONTENT_VIEW_SIGNAL,
    NO_PATHS_SIGNAL,
    NO_REPRESENTATION,
    COUNTS_ONLY,
    NO_COLD_ITEMS,
    NO_LISTING,
    WITH_CONTENT_POPULARITY,
    WITH_NEW_ITEM_CANDIDATES,
)
_NO_BIASES = {
    k: v for k, v in asdict(AttentionConfig.with_biases(False)).items() if k[:4] == "use_"
}

# The views the evaluation asset scores unless told otherwise: the ones that say what the model
# adds (its own score, its content view alone, the ranker without the representation's signals).
# Every ranker view refits the ranker (about 40 s each on the demo world): all of them took 6 of
# `make demo`'s 8 minutes on 2 cores. `hier evaluate` scores every view.
DEFAULT_VIEWS = (CONTENT_ONLY, NO_RANKER, NO_REPRESENTATION)
TRAINED: dict[str, Callable[[TrainConfig], TrainConfig]] = {
    "hier_no_bias": lambda c: replace(
        c, model=replace(c.model, attention=replace(c.model.attention, **_NO_BIASES))
    ),
    "hier_no_primitives": lambda c: replace(c, model=replace(c.model, use_primitives=False)),
    "hier_no_distill": lambda c: replace(c, use_distillation=False),
    "hier_no_history": lambda c: replace(c, model=replace(c.model, use_history_bias=False)),
    "hier_explore_embedding": lambda c: replace(c, explore_embedding_loss=True),
    # The target stage drawn apart, at four times the first hop's cap (issue 18, item 2).
    "hier_target_fanouts": lambda c: replace(c, target_fanouts=(4 * c.fanouts[0], *c.fanouts[1:])),
    # Each edge's stage and age in its messages, not only in its attention weight (item 2).
    "hier_temporal_messages": lambda c: replace(
        c, model=replace(c.model, attention=replace(c.model.attention, temporal_messages=True))
    ),
}
ABLATIONS = (*TRAINED, *VIEWS)


def check_ablations(names: Sequence[str]) -> None:
    if unknown := set(names) - set(ABLATIONS):
        raise ValueError(f"unknown ablations {sorted(unknown)}; known: {list(ABLATIONS)}")


def views_of(names: Sequence[str]) -> tuple[str, ...]:
    """The untrained views among the ablations `names`, in `VIEWS` order."""
    return tuple(view for view in VIEWS if view in names)


def train_ablations(
    graph: RelationalGraph,
    content: dict[str, dict[str, Tensor]],
    split: TemporalSplit,
    config: TrainConfig,
    names: Sequence[str],
    progress: Callable[[str], None] | None = None,
) -> dict[str, TrainResult]:
    """The trained ablations among `names` (the views need no training)."""
    check_ablations(names)
    results = {}
    for name in (n for n in names if n in TRAINED):
        if progress is not None:
            progress(f"training {name}")
        results[name] = train_model(graph, content, split, TRAINED[name](config), progress=progress)
    return results


def ablation_sampling(
    config: TrainConfig, names: Sequence[str], num_stages: int
) -> dict[str, SamplerConfig]:
    """How the trained ablations among `names` sample neighbourhoods, where not as `config`."""
    full = config.neighbourhoods(num_stages)
    sampling = {n: TRAINED[n](config).neighbourhoods(num_stages) for n in names if n in TRAINED}
    return {name: rule for name, rule in sampling.items() if rule != full}


def same_architecture(trained: ModelConfig, config: TrainConfig) -> bool:
    """Whether `config` builds the model `trained` was built from: the ablations must differ from
    the full model in their one switch only. (Training sets the attention's hop count from the
    fanouts, so that field is compared after the same step.)"""
    attention = replace(config.model.attention, max_hops=len(config.fanouts))
    return asdict(trained) == asdict(replace(config.model, attention=attention))
