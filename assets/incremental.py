"""Asset group `arrivals`: batches of new rows (`incoming/<batch>/`) fitted into what is materialised,
without a retrain. One dynamic partition per batch, never per entity: `arrivals_sensor` adds it
and asks for the run."""

import dagster as dg

from assets.metadata import load_metadata, markdown_table
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import LoadReport
from hier_pipeline.graph import GraphArtifact
from hier_pipeline.incremental.update import BatchUpdate
from hier_pipeline.release.promotion import Promotion
from resources import DatasetResource, MLflowResource, StorageResource

GROUP = "arrivals"
ARRIVALS = dg.DynamicPartitionsDefinition(name="arrivals")


@dg.asset(
    partitions_def=ARRIVALS,
    group_name=GROUP,
    kinds={"duckdb"},
    owners=["team:hier-pipeline"],
    pool="duckdb_writer",
)
def arrived_tables(
    context: dg.AssetExecutionContext,
    dataset: DatasetResource,
    storage: StorageResource,
    raw_tables: LoadReport,
) -> dg.Output[LoadReport]:
    """The batch's files validated row by row on top of every batch accepted since the last full
    load (a snapshot of their rows, in a DuckDB file of the batch's own): foreign keys may point
    at the dataset's rows, an earlier batch's or the batch's; a key the dataset or an earlier
    batch holds is quarantined (`existing_primary_key`), and so is every row of a batch the full
    load read already (`loaded_by_full_run`), like every other rejected row, with a reason."""
    from hier_pipeline.incremental.accumulated import accept_batch, read_state

    batch, spec = context.partition_key, dataset.spec()
    work = storage.folder("arrivals", spec.name)
    report = accept_batch(spec, batch, raw_tables.database, work)
    state = read_state(work, raw_tables.database)
    context.log.info("batch %s: %s", batch, report.to_dict()["tables"])
    return dg.Output(
        report,
        metadata={
            "batch": batch,
            **load_metadata(report),
            "batches_since_full_load": dg.MetadataValue.json(state.accepted),
            "batches_refused": dg.MetadataValue.json(state.refused),
        },
    )


@dg.asset(
    partitions_def=ARRIVALS,
    group_name=GROUP,
    kinds={"pytorch", "mlflow"},
    owners=["team:hier-pipeline"],
)
def arrived_interests(
    context: dg.AssetExecutionContext,
    dataset: DatasetResource,
    storage: StorageResource,
    arrived_tables: LoadReport,
    raw_tables: LoadReport,
    relational_graph: GraphArtifact,
    content_embeddings: ContentArtifact,
    promoted_interests: Promotion,
    mlflow: MLflowResource,
) -> dg.Output[BatchUpdate]:
    """Embeddings and Bag-of-Meaning tokens for the batch's users, advertisers and items: its
    content embedded through the cache, the graph of its rows built beside the dataset's, its
    entities embedded inductively by the serving model and placed in the serving tree
    (`promoted_interests`), with the dataset's entities its rows point at (users with new
    events, an earlier batch's products with their first events) embedded again, from every batch
    since the full load. Written beside the served tokens (`batches/<batch>.pt`), so `hier
    interests ...` answers for them at once; nothing the pipeline materialised before is
    recomputed. One MLflow run per batch (`arrivals-<dataset>`, tagged with the batch) logs what
    it added, quarantined and embedded."""
    from hier_pipeline.incremental.report import batch_keys_markdown, log_batch
    from hier_pipeline.incremental.update import Current, update_batch
    from hier_pipeline.interests.artifact import TOKENS_FILE, load_tokens

    spec = dataset.spec()
    current = Current(
        warehouse=raw_tables.database,
        graph=relational_graph.load(),
        content=content_embeddings.load(),
        model=promoted_interests.model,
        tokens=load_tokens(promoted_interests.folder / TOKENS_FILE),
        folder=promoted_interests.folder,
        content_cache=storage.folder("content_cache"),
    )
    work = storage.folder("arrivals", spec.name)
    tags = {"dataset": spec.name, "batch": context.partition_key, "dagster_run_id": context.run_id}
    with mlflow.run("arrivals", tags=tags) as run:
        update = update_batch(spec, context.partition_key, current, work, arrived_tables)
        log_batch(run, update)
    context.log.info(
        "batch %s: %s new entities, %s embedded again",
        update.batch,
        update.entities,
        update.refreshed,
    )
    embedded = update.content.tables
    return dg.Output(
        update,
        metadata={
            "batch": update.batch,
            "path": dg.MetadataValue.path(str(update.path)),
            "mlflow_run": dg.MetadataValue.url(mlflow.run_url(run)),
            "entities": dg.MetadataValue.json(update.entities),
            "entities_embedded_again": dg.MetadataValue.json(update.refreshed),
            "bags_placed_by": dg.MetadataValue.json(update.placed_by),
            "batches_caught_up": dg.MetadataValue.json(update.caught_up),
            "keys": dg.MetadataValue.md(batch_keys_markdown(update)),
            "newly_embedded": sum(t.text_misses + t.image_misses for t in embedded.values()),
            "seconds": dg.MetadataValue.json(update.seconds),
            "content": markdown_table(
                ["table", "rows", "text cache hits", "texts embedded", "images embedded"],
                (
                    (name, t.rows, t.text_hits, t.text_misses, t.image_misses)
                    for name, t in embedded.items()
                ),
            ),
        },
    )
