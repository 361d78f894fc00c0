"""The release: the model and tokens that serve (and that arriving batches are fitted into) change
only when the evaluation has the new ones beat popularity and score them not worse than the
serving ones. One asset, one serving folder (`hier_pipeline/release/`)."""

from collections.abc import Iterator

import dagster as dg

from assets.config import PromotionLaunchConfig
from hier_pipeline.evaluation.report import EvaluationReport
from hier_pipeline.interests.artifact import TokensArtifact
from hier_pipeline.model.artifact import ModelArtifact
from hier_pipeline.release.promotion import Promotion
from resources import DatasetResource, MLflowResource, StorageResource

GROUP = "evaluation"  # the last step of a full run (full_retrain_job selects the group)
RUN_TAG = "hier/promotion"  # on the Dagster run: promoted | kept_previous


@dg.asset(group_name=GROUP, kinds={"pytorch", "mlflow"}, owners=["team:hier-pipeline"])
def promoted_interests(
    context: dg.AssetExecutionContext,
    config: PromotionLaunchConfig,
    dataset: DatasetResource,
    storage: StorageResource,
    mlflow: MLflowResource,
    interest_model: ModelArtifact,
    interest_tokens: TokensArtifact,
    evaluation_report: EvaluationReport,
) -> dg.Output[Promotion]:
    """What serves: `<home>/serving/<dataset>/`, the model checkpoint with its tokens, tree,
    embeddings, vocabulary and a manifest of the scores it was released on (`InterestIndex.open`
    and `hier interests` read it). A model is served only if its evaluation (same report, same
    target metric) beats popularity and is not worse than the serving model's beyond the
    tolerance; otherwise the serving one stays, this run is tagged
    `hier/promotion=kept_previous` and the check `not_worse_than_serving` fails. Token ids of a
    promoted tree are matched to the serving tree's by item overlap, so interests that kept their
    meaning keep their ids."""
    from hier_pipeline.release.promotion import PromotionConfig, promote
    from hier_pipeline.release.serving import serving_folder

    spec = dataset.spec()
    core = PromotionConfig(config.metric, config.tolerance, config.min_overlap)
    outcome = promote(
        evaluation_report.models,
        interest_model.path,
        interest_tokens,
        serving_folder(storage.folder(), spec.name),
        core,
        {
            "dataset": spec.name,
            "dagster_run": context.run_id,
            "model_run": interest_model.run_id,
            "models": evaluation_report.to_json()["models"],
        },
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
            f"{core.gate}_{core.metric}": outcome.gate,
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
            " the old one stays; the reason says which).",
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
            "gate": outcome.gate,
        },
    )
