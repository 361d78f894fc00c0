"""The promotion gate after a retrain: the model and tokens that serve (and that arriving batches
are fitted into) change only when the evaluation does not score the new ones worse."""

from collections.abc import Iterator

import dagster as dg
from pydantic import Field

from assets.evaluation import GATE
from hier_pipeline.evaluation.report import OURS, EvaluationReport
from hier_pipeline.incremental.promotion import Promotion
from hier_pipeline.interests.artifact import TokensArtifact
from hier_pipeline.model.artifact import ModelArtifact
from resources import DatasetResource, MLflowResource, StorageResource

GROUP = "evaluation"  # the last step of a full run (full_retrain_job selects the group)
RUN_TAG = "hier/promotion"  # on the Dagster run: promoted | kept_previous


class PromotionSettings(dg.Config):
    metric: str = Field(
        default="map@10", description="our model's target-stage metric in the evaluation report"
    )
    tolerance: float = Field(
        default=0.005, description="how far below the serving model's score still promotes"
    )
    min_overlap: float = Field(
        default=0.5, description="item overlap (Jaccard) for a new interest to keep an old id"
    )


@dg.asset(group_name=GROUP, kinds={"pytorch", "mlflow"}, owners=["team:hier-pipeline"])
def promoted_interests(
    context: dg.AssetExecutionContext,
    config: PromotionSettings,
    dataset: DatasetResource,
    storage: StorageResource,
    mlflow: MLflowResource,
    interest_model: ModelArtifact,
    interest_tokens: TokensArtifact,
    evaluation_report: EvaluationReport,
) -> dg.Output[Promotion]:
    """What serves: `<home>/promoted/<dataset>/`, the model checkpoint with its tokens, tree,
    embeddings and vocabulary. A retrained model replaces the serving one only if its evaluation
    beats popularity (as `published_tokens` requires) and (same report, same target metric) is
    not worse than the serving one's beyond the tolerance; otherwise the serving
    one stays, this run is tagged `hier/promotion=kept_previous` and the check
    `not_worse_than_serving` fails. Token ids of a promoted tree are matched to the serving
    tree's by item overlap, so interests that kept their meaning keep their ids."""
    from hier_pipeline.incremental.promotion import PromotionConfig, promote, serving_folder

    spec = dataset.spec()
    core = PromotionConfig(config.metric, config.tolerance, config.min_overlap)
    outcome = promote(
        evaluation_report.models[OURS],
        interest_model.path,
        interest_tokens,
        serving_folder(storage.folder(), spec.name),
        core,
        {"dataset": spec.name, "dagster_run": context.run_id, "model_run": interest_model.run_id},
        popularity=evaluation_report.models.get(GATE, {}).get(core.metric),
    )
    verdict = "promoted" if outcome.promoted else "kept_previous"
    context.instance.add_run_tags(context.run_id, {RUN_TAG: verdict})
    tags = {"dataset": spec.name, "promotion": verdict, "model_run": str(interest_model.run_id)}
    with mlflow.run("promotion", tags=tags, params={"metric": core.metric}) as run:
        compared = {f"candidate/{core.metric}": outcome.candidate}
        if outcome.current is not None:
            compared[f"serving/{core.metric}"] = outcome.current
        run.log_metrics(compared)
    context.log.info("%s: %s", verdict, outcome.reason)
    return dg.Output(
        outcome,
        metadata={
            "promoted": outcome.promoted,
            "reason": outcome.reason,
            f"candidate_{core.metric}": outcome.candidate,
            f"serving_{core.metric}": outcome.current,
            "token_ids_kept": f"{outcome.ids_kept} of {outcome.ids}",
            "path": dg.MetadataValue.path(str(outcome.folder)),
            "mlflow_run": dg.MetadataValue.url(mlflow.run_url(run)),
        },
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "not_worse_than_serving",
            asset="promoted_interests",
            description="The retrained model was promoted: its evaluation beats popularity and is"
            " not worse than the serving model's beyond the tolerance (fails, as a warning, when"
            " the old one stays).",
        )
    ],
    ins={"promoted_interests": dg.AssetIn("promoted_interests")},
)
def promotion_checks(promoted_interests: Promotion) -> Iterator[dg.AssetCheckResult]:
    outcome = promoted_interests
    yield dg.AssetCheckResult(
        check_name="not_worse_than_serving",
        passed=outcome.promoted,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "reason": outcome.reason,
            "candidate": outcome.candidate,
            "serving": outcome.current,
        },
    )
