"""`hier evaluate`: the whole pipeline and the comparison in one process, on any dataset folder.

Ingest, graph and content as `prepare` does them; our model and its trained ablations (one
`TrainConfig`, so they differ in their switch only); entity embeddings as of the end of the data,
the interest tree and tokens as the interests assets build them; then `evaluate_models`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hier_pipeline.dataset import parse_dataset
from hier_pipeline.evaluation.ablations import ABLATIONS, CONTENT_ONLY, train_ablations
from hier_pipeline.evaluation.baselines.evaluate import BASELINES, FIT_BUDGET
from hier_pipeline.evaluation.baselines.recommender import Budget
from hier_pipeline.evaluation.compare import Comparison, evaluate_models, hierarchy_inputs
from hier_pipeline.evaluation.report import OURS, EvaluationReport
from hier_pipeline.evaluation.truth import item_truth
from hier_pipeline.files.home import default_home
from hier_pipeline.interests.build import build_interest_hierarchy, build_interest_tokens
from hier_pipeline.interests.hierarchy import HierarchyConfig
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.embeddings import embed_entities
from hier_pipeline.model.train import TrainConfig, train_model
from hier_pipeline.pipeline.chain import prepare


@dataclass(frozen=True)
class EvaluateConfig:
    train: TrainConfig = field(default_factory=TrainConfig)
    ablations: tuple[str, ...] = ABLATIONS
    baselines: tuple[str, ...] = tuple(BASELINES)
    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)
    tokens: TokenConfig = field(default_factory=TokenConfig)
    max_users: int = 1000
    budget: Budget = FIT_BUDGET  # per fit of a trained baseline


def evaluate_dataset(
    dataset_dir: Path,
    out_dir: Path,
    config: EvaluateConfig = EvaluateConfig(),
    progress: Callable[[str], None] | None = None,
) -> EvaluationReport:
    """Run everything and write `out_dir/{metrics.json, report.md, *.png}`; intermediate files go
    to `out_dir/work`, content vectors are cached in `$HIER_HOME/content_cache` (shared with the
    Dagster assets, so a dataset's images are embedded once)."""
    spec = parse_dataset(dataset_dir)
    work = out_dir / "work"
    prepared = prepare(dataset_dir, work, default_home() / "content_cache")
    graph, content, split = prepared.graph, prepared.content, prepared.split
    trained = train_model(graph, content, split, config.train, progress=progress)
    ablations = train_ablations(graph, content, split, config.train, config.ablations, progress)
    embeddings = embed_entities(
        trained.model, graph, content, work / "embeddings.pt", config.train.fanouts
    )
    interests = work / "interests"
    hierarchy = build_interest_hierarchy(embeddings, graph, interests, config.hierarchy)
    tokens = build_interest_tokens(
        embeddings, hierarchy, spec, prepared.database, interests, config.tokens
    )
    comparison = Comparison(
        models={OURS: trained.model, **{n: r.model for n, r in ablations.items()}},
        fanouts=config.train.fanouts,
        history=trained.history,
        content_only=CONTENT_ONLY in config.ablations,
        baselines=config.baselines,
        max_users=config.max_users,
        seed=config.train.seed,
        budget=config.budget,
    )
    inputs = hierarchy_inputs(hierarchy, tokens, item_truth(dataset_dir, spec, prepared.database))
    report = evaluate_models(spec.name, graph, content, split, comparison, inputs, progress)
    report.write(out_dir)
    return report
