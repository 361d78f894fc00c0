"""Asset group `evaluation`: the report that compares our model with its ablations and the
baselines, and the quality gate on it.

The gate: `beats_popularity` is a blocking check of `evaluation_report`. In a run that includes
it, the release (`promoted_interests`, assets/promotion.py) starts only if it passed; a model that
loses to popularity on the target stage stops the run there and the serving model stays. The
release asks the report itself too, so a run that selects it alone cannot serve a losing model.
The gate judges what the release serves, the model's own score (`SERVED`, always scored here),
not the report's ranked row: the ranker is not served, and its counts can carry a randomised
model past popularity (docs/evaluation.md).
"""

from collections.abc import Iterator

import dagster as dg

from assets.config import EvaluationLaunchConfig
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import LoadReport
from hier_pipeline.evaluation.ablations import views_of
from hier_pipeline.evaluation.report import GATE, OURS, SERVED, EvaluationReport
from hier_pipeline.graph import GraphArtifact
from hier_pipeline.interests.artifact import HierarchyArtifact, TokensArtifact
from hier_pipeline.model.artifact import ModelArtifact
from resources import DatasetResource, MLflowResource, StorageResource

GROUP = "evaluation"


@dg.asset(group_name=GROUP, kinds={"pytorch", "mlflow"}, owners=["team:hier-pipeline"])
def evaluation_report(
    context: dg.AssetExecutionContext,
    config: EvaluationLaunchConfig,
    dataset: DatasetResource,
    storage: StorageResource,
    mlflow: MLflowResource,
    raw_tables: LoadReport,
    relational_graph: GraphArtifact,
    content_embeddings: ContentArtifact,
    interest_model: ModelArtifact,
    interest_hierarchy: HierarchyArtifact,
    interest_tokens: TokensArtifact,
) -> dg.Output[EvaluationReport]:
    """Our model, its ablations and every baseline on the window after validation, [t2, end):
    Recall@10/50/100, NDCG@10 and MAP@10 of the target stage over a full ranking of every item,
    warm users and cold-start items; the interest hierarchy against the known taxonomy (NMI/ARI
    per level), token retrieval and stability. Written as report.md with plots and metrics.json,
    logged to MLflow (`eval/<model>/<metric>`), shown here."""
    from hier_pipeline.evaluation.ablations import (
        ablation_sampling,
        same_architecture,
        train_ablations,
    )
    from hier_pipeline.evaluation.baselines.recommender import FitBudget
    from hier_pipeline.evaluation.compare import Comparison, evaluate_models, hierarchy_inputs
    from hier_pipeline.evaluation.report_page import inline_images, write_report
    from hier_pipeline.evaluation.truth import item_truth

    spec = dataset.spec()
    graph, content = relational_graph.load(), content_embeddings.load()
    split, core = relational_graph.split, config.to_core()
    model = interest_model.load(graph, content)
    if not same_architecture(model.config, core):
        raise dg.Failure(
            "evaluation_report's training knobs build another architecture than interest_model's:"
            " set the same dim, layers, primitives and ablation switches on both"
        )
    num_stages = len(graph.metadata.stages)
    if core.neighbourhoods(num_stages).as_served() != interest_model.sampling():
        raise dg.Failure(
            "evaluation_report's training knobs sample other neighbourhoods than"
            f" interest_model's ({interest_model.sampling()}): set the same fanouts and"
            " target_fanouts on both, so its trained ablations differ from the model in one idea"
        )
    truth = item_truth(dataset.folder(), spec, raw_tables.database)
    tags = {
        "dataset": spec.name,
        "dagster_run_id": context.run_id,
        "model_run": str(interest_model.run_id),
    }
    params = {**config.model_dump(), "t1": split.t1, "t2": split.t2}
    with mlflow.run("evaluation_report", tags=tags, params=params) as run:
        trained = train_ablations(graph, content, split, core, config.ablations, context.log.info)
        for name, result in trained.items():  # beside the full model's curves in its own run
            for epoch, record in enumerate(result.history):
                run.log_metrics({f"{name}/{k}": v for k, v in record.items()}, step=epoch)
        comparison = Comparison(
            models={OURS: model, **{name: result.model for name, result in trained.items()}},
            sampling=core.neighbourhoods(num_stages),
            model_sampling=ablation_sampling(core, config.ablations, num_stages),
            history=interest_model.history,
            views=views_of([SERVED, *config.ablations]),
            baselines=config.baselines,
            max_users=config.max_users,
            seed=config.seed,
            budget=FitBudget(config.baseline_steps, config.baseline_seconds),
            baseline_workers=config.baseline_workers,
        )
        inputs = hierarchy_inputs(interest_hierarchy, interest_tokens, truth)
        report = evaluate_models(
            spec.name, graph, content, split, comparison, inputs, context.log.info
        )
        folder = storage.folder("evaluation", spec.name)
        page = write_report(report, folder)
        run.log_metrics(report.tracked_metrics())
        for file in sorted(folder.iterdir()):
            run.log_artifact(file, "report")
    ours, gate = report.models[OURS], report.models.get(GATE, {})
    return dg.Output(
        report,
        metadata={
            "report": dg.MetadataValue.md(inline_images(page.read_text(), folder)),
            "path": dg.MetadataValue.path(str(page)),
            "mlflow_run": dg.MetadataValue.url(mlflow.run_url(run)),
            "map@10": _rounded(ours["map@10"]),
            f"{GATE}_map@10": _rounded(gate.get("map@10")),
            "users": report.users,
            "models": len(report.models),
        },
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "beats_popularity",
            asset="evaluation_report",
            blocking=True,
            description="The served model's own MAP@10 on the target stage (hier_no_ranker) is "
            "above the popularity baseline's. Blocking: the release (promoted_interests) does not "
            "run when it fails.",
        ),
        dg.AssetCheckSpec(
            "beats_every_baseline",
            asset="evaluation_report",
            description="Our model's MAP@10 on the target stage is above every baseline's.",
        ),
    ],
    ins={"evaluation_report": dg.AssetIn("evaluation_report")},
)
def evaluation_report_checks(evaluation_report: EvaluationReport) -> Iterator[dg.AssetCheckResult]:
    report = evaluation_report
    scores = {name: _rounded(report.models[name]["map@10"]) for name in report.baselines()}
    ours = {f"{OURS}_map@10": _rounded(report.models[OURS]["map@10"])}
    served = report.served()
    yield dg.AssetCheckResult(
        check_name="beats_popularity",
        passed=GATE in report.models and report.beats(GATE, model=served),
        metadata={
            f"{served}_map@10": _rounded(report.models[served]["map@10"]),
            f"{GATE}_map@10": scores.get(GATE),
        },
    )
    lost = [name for name in report.baselines() if not report.beats(name)]
    yield dg.AssetCheckResult(
        check_name="beats_every_baseline",
        passed=not lost,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={**ours, "lost_to": dg.MetadataValue.json(lost), "baselines": scores},
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
