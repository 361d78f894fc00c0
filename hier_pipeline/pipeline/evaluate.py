"""`hier evaluate`: the whole pipeline and the comparison in one process, on any dataset folder.

The chain (`run_chain`: our model, its embeddings as of the end of the data, the interest tree
and tokens, as the assets build them), our model again with `seeds - 1` other seeds (its figures
are the means over seeds, with their sd), the trained ablations (one `TrainConfig`, so they
differ in their switch only), then `evaluate_models`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from hier_pipeline.evaluation.ablations import (
    ABLATIONS,
    ablation_sampling,
    train_ablations,
    views_of,
)
from hier_pipeline.evaluation.baselines.evaluate import BASELINE_WORKERS, BASELINES, FIT_BUDGET
from hier_pipeline.evaluation.baselines.recommender import FitBudget
from hier_pipeline.evaluation.compare import Comparison, evaluate_models, hierarchy_inputs
from hier_pipeline.evaluation.report import OURS, EvaluationReport
from hier_pipeline.evaluation.report_page import write_report
from hier_pipeline.evaluation.seeds import seed_name
from hier_pipeline.evaluation.truth import item_truth
from hier_pipeline.files.home import default_home
from hier_pipeline.interests.hierarchy import HierarchyConfig
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.train import train_model
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.pipeline.chain import ChainConfig, run_chain
from hier_pipeline.pipeline.prepare import prepare


@dataclass(frozen=True)
class EvaluateConfig:
    train: TrainConfig = field(default_factory=TrainConfig)
    ablations: tuple[str, ...] = ABLATIONS
    baselines: tuple[str, ...] = tuple(BASELINES)
    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)
    tokens: TokenConfig = field(default_factory=TokenConfig)
    max_users: int = 5000  # evaluated users: a fixed random subset beyond it
    budget: FitBudget = FIT_BUDGET  # per fit of a trained baseline
    baseline_workers: int = BASELINE_WORKERS  # processes the baselines are tuned in
    seeds: int = 3  # our model is trained this many times (seed, seed + 1, ...); figures: means


def evaluate_dataset(
    dataset_dir: Path,
    out_dir: Path,
    config: EvaluateConfig = EvaluateConfig(),
    progress: Callable[[str], None] | None = None,
) -> EvaluationReport:
    """Run everything and write `out_dir/{metrics.json, report.md, *.png}`; intermediate files go
    to `out_dir/work`, content vectors are cached in `$HIER_HOME/content_cache` (shared with the
    Dagster assets, so a dataset's images are embedded once)."""
    prepared = prepare(dataset_dir, out_dir / "work", default_home() / "content_cache")
    graph, content, split = prepared.graph, prepared.content, prepared.split
    chain = ChainConfig(config.train, config.hierarchy, config.tokens)
    done = run_chain(prepared, out_dir / "work", chain, progress=progress)
    trained = done.trained.result
    reseeded = {
        seed_name(offset): train_model(
            graph, content, split, replace(config.train, seed=config.train.seed + offset)
        ).model
        for offset in range(1, config.seeds)
    }
    ablations = train_ablations(graph, content, split, config.train, config.ablations, progress)
    comparison = Comparison(
        models={OURS: trained.model, **reseeded, **{n: r.model for n, r in ablations.items()}},
        sampling=config.train.neighbourhoods(len(graph.metadata.stages)),
        model_sampling=ablation_sampling(
            config.train, config.ablations, len(graph.metadata.stages)
        ),
        history=trained.history,
        views=views_of(config.ablations),
        baselines=config.baselines,
        max_users=config.max_users,
        seed=config.train.seed,
        budget=config.budget,
        baseline_workers=config.baseline_workers,
    )
    truth = item_truth(dataset_dir, prepared.spec, prepared.database)
    inputs = hierarchy_inputs(done.hierarchy, done.tokens, truth)
    report = evaluate_models(
        prepared.spec.name, graph, content, split, comparison, inputs, progress
    )
    write_report(report, out_dir)
    return report
