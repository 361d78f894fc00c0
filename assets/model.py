"""Asset group `model`: the trained interest model and the universal entity embeddings it infers."""

from collections.abc import Iterator
from typing import TYPE_CHECKING

import dagster as dg

from assets.config import TrainingLaunchConfig
from assets.metadata import markdown_table, png_markdown
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.graph import GraphArtifact
from hier_pipeline.model.artifact import ModelArtifact
from hier_pipeline.model.embeddings import EmbeddingArtifact
from resources import DatasetResource, MLflowResource, StorageResource

if TYPE_CHECKING:
    pass

GROUP = "model"


@dg.asset(group_name=GROUP, kinds={"pytorch", "mlflow"}, owners=["team:hier-pipeline"])
def interest_model(
    context: dg.AssetExecutionContext,
    config: TrainingLaunchConfig,
    dataset: DatasetResource,
    storage: StorageResource,
    mlflow: MLflowResource,
    relational_graph: GraphArtifact,
    content_embeddings: ContentArtifact,
) -> dg.Output[ModelArtifact]:
    """The graph transformer trained on the funnel events before t1 (deepest stage as the target),
    early-stopped on validation MAP@10 in [t1, t2). Every epoch is logged to MLflow and
    checkpointed; a killed run resumes from its last checkpoint when re-materialised. The model is
    registered in MLflow as `hier-<dataset>`, a pyfunc with a signature: (entity_type, node_index)
    rows in, embeddings out."""
    from dataclasses import asdict

    from hier_pipeline.evaluation.plots import training_curves
    from hier_pipeline.model.checkpoint import resume_key
    from hier_pipeline.pipeline.train import Registration, train_interest_model
    from hier_pipeline.tracking import flatten_params

    spec = dataset.spec()
    core = config.to_core()
    params = flatten_params(asdict(core))
    inputs = [relational_graph.path, content_embeddings.path]
    checkpoints = storage.folder("checkpoints", spec.name, resume_key(params, inputs))
    path = storage.path("models", f"{spec.name}.pt")
    with mlflow.run(
        "interest_model",
        tags={"dataset": spec.name, "dagster_run_id": context.run_id},
        params=params,
    ) as run:
        trained = train_interest_model(
            relational_graph.load(),
            content_embeddings.load(),
            relational_graph.split,
            core,
            path,
            registration=Registration(
                run, f"hier-{spec.name}", relational_graph.path, content_embeddings.path
            ),
            checkpoints=checkpoints,
            progress=context.log.info,
        )
    result, popularity, version = trained.result, trained.popularity, trained.version
    assert version is not None  # registered: a path and a registration were given
    best = result.history[result.best_epoch]
    metrics = {k: v for k, v in best.items() if k.startswith("val/")}
    history = markdown_table(
        ["epoch", "total loss", "val MAP@10", "val recall@10", "seconds"],
        (
            (
                i + 1,
                f"{h['loss/total']:.4f}",
                f"{h['val/map@10']:.4f}",
                f"{h['val/recall@10']:.4f}",
                f"{h['time/epoch_seconds']:.1f}",
            )
            for i, h in enumerate(result.history)
        ),
    )
    return dg.Output(
        ModelArtifact(
            path,
            result.best_epoch,
            metrics,
            result.history,
            {f"popularity/{k}": v for k, v in popularity.items()},
            run.run_id,
        ),
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "mlflow_run": dg.MetadataValue.url(mlflow.run_url(run)),
            "registered_model": f"{version.name} v{version.version}",
            "registered_model_url": dg.MetadataValue.url(
                mlflow.model_url(version.name, version.version)
            ),
            "best_epoch": result.best_epoch + 1,
            "val_map@10": round(metrics["val/map@10"], 4),
            "popularity_map@10": round(popularity["map@10"], 4),
            "first_epoch_loss": round(result.history[0]["loss/total"], 4),
            "last_epoch_loss": round(result.history[-1]["loss/total"], 4),
            "history": history,
            "training_curve": png_markdown(
                training_curves(result.history), "Loss and validation MAP@10 per epoch"
            ),
        },
    )


@dg.asset(group_name=GROUP, kinds={"pytorch"}, owners=["team:hier-pipeline"])
def entity_embeddings(
    context: dg.AssetExecutionContext,
    dataset: DatasetResource,
    storage: StorageResource,
    relational_graph: GraphArtifact,
    content_embeddings: ContentArtifact,
    interest_model: ModelArtifact,
) -> dg.Output[EmbeddingArtifact]:
    """Unit-norm embeddings of every user, advertiser and item in one space, inferred as of the end
    of the data: entities never seen in training (cold start) are embedded from their content and
    whatever neighbourhood they have, without retraining."""
    from hier_pipeline.model.embeddings import embed_entities

    spec = dataset.spec()
    graph, content = relational_graph.load(), content_embeddings.load()
    model = interest_model.load(graph, content)
    artifact = embed_entities(
        model,
        graph,
        content,
        storage.path("embeddings", f"{spec.name}.pt"),
        interest_model.sampling(),
    )
    context.log.info("embedded %s", artifact.counts)
    return dg.Output(
        artifact,
        metadata={
            "path": dg.MetadataValue.path(str(artifact.path)),
            "as_of": dg.MetadataValue.timestamp(float(artifact.as_of)),
            "entities": dg.MetadataValue.json(artifact.counts),
        },
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "training_loss_decreased",
            asset="interest_model",
            blocking=True,
            description="The loss of training's last steps is below its first steps' (the"
            " first quarter of the first epoch against the last quarter of the last epoch).",
        ),
        dg.AssetCheckSpec(
            "beats_popularity",
            asset="interest_model",
            description="Validation MAP@10 above the popularity baseline's.",
        ),
    ],
    ins={"interest_model": dg.AssetIn("interest_model")},
)
def interest_model_checks(interest_model: ModelArtifact) -> Iterator[dg.AssetCheckResult]:
    from hier_pipeline.model.progress import loss_fell

    first, last = loss_fell(interest_model.history)
    yield dg.AssetCheckResult(
        check_name="training_loss_decreased",
        passed=last < first,
        metadata={"first_steps_loss": first, "last_steps_loss": last},
    )
    ours, popularity = (
        interest_model.metrics["val/map@10"],
        interest_model.baselines["popularity/map@10"],
    )
    yield dg.AssetCheckResult(
        check_name="beats_popularity",
        passed=ours > popularity,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"model_map@10": ours, "popularity_map@10": popularity},
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "no_nan",
            asset="entity_embeddings",
            blocking=True,
            description="Every embedding is finite and unit length.",
        ),
        dg.AssetCheckSpec(
            "every_primitive_used",
            asset="entity_embeddings",
            description="Each primitive is the nearest one for some entity.",
        ),
    ],
    ins={"entity_embeddings": dg.AssetIn("entity_embeddings")},
)
def entity_embedding_checks(entity_embeddings: EmbeddingArtifact) -> Iterator[dg.AssetCheckResult]:
    from hier_pipeline.model.embeddings import primitive_usage

    vectors = entity_embeddings.load()
    bad = {
        t: int((~v.isfinite().all(dim=1) | ((v.norm(dim=1) - 1).abs() > 1e-3)).sum())
        for t, v in vectors.items()
    }
    yield dg.AssetCheckResult(
        check_name="no_nan",
        passed=not any(bad.values()),
        metadata={"bad_rows": dg.MetadataValue.json(bad)},
    )
    used, total = primitive_usage(entity_embeddings)
    yield dg.AssetCheckResult(
        check_name="every_primitive_used",
        passed=used == total,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"primitives_used": used, "primitives": total},
    )
