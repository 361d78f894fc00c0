"""Asset group `content`: pretrained text and image vectors for every entity that has content."""

from collections.abc import Iterator

import dagster as dg

from assets.metadata import markdown_table
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import LoadReport
from resources import DatasetResource, StorageResource

GROUP = "content"


@dg.asset(group_name=GROUP, kinds={"pytorch", "parquet"}, owners=["team:hier-pipeline"])
def content_embeddings(
    context: dg.AssetExecutionContext,
    dataset: DatasetResource,
    storage: StorageResource,
    raw_tables: LoadReport,
) -> dg.Output[ContentArtifact]:
    """all-MiniLM-L6-v2 text vectors (384-d) and EfficientNet-Lite0 image vectors (1280-d) for every
    table with text or image columns, aligned with the graph's nodes, with has_text/has_image masks.

    A content-hash cache means each distinct text or image is embedded once, ever: re-materialising
    after new products arrive embeds only the new ones. Models load from installed packages only.
    """
    from hier_pipeline.content.tables import embed_tables

    spec = dataset.spec()
    artifact = embed_tables(
        spec,
        raw_tables.database,
        storage.folder("content_cache"),
        storage.path("content", f"{spec.name}.pt"),
    )
    rows = [
        (
            name,
            f"{t.rows:,}",
            f"{t.with_text:,}",
            f"{t.with_image:,}",
            t.image_errors,
            f"{t.text_hits + t.image_hits:,}",
            f"{t.text_misses + t.image_misses:,}",
            t.seconds,
        )
        for name, t in artifact.tables.items()
    ]
    looked_up = sum(
        t.text_hits + t.text_misses + t.image_hits + t.image_misses
        for t in artifact.tables.values()
    )
    hits = sum(t.text_hits + t.image_hits for t in artifact.tables.values())
    embedded = sum(t.text_misses + t.image_misses for t in artifact.tables.values())
    seconds = sum(t.seconds for t in artifact.tables.values())
    context.log.info("embedded %s new items, %s cache hits", embedded, hits)
    return dg.Output(
        artifact,
        metadata={
            "path": dg.MetadataValue.path(str(artifact.path)),
            "cache_hit_rate": round(hits / looked_up, 4) if looked_up else 0.0,
            "newly_embedded": embedded,
            "items_per_second": round(embedded / seconds, 1) if seconds else 0.0,
            "tables": markdown_table(
                [
                    "table",
                    "rows",
                    "with text",
                    "with image",
                    "image errors",
                    "cache hits",
                    "embedded",
                    "seconds",
                ],
                rows,
            ),
        },
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "embeddings_finite_and_normalised",
            asset="content_embeddings",
            blocking=True,
            description="Present vectors are finite and unit length; absent ones are exactly zero.",
        ),
        dg.AssetCheckSpec(
            "content_coverage",
            asset="content_embeddings",
            description="Warns when under half of a table's rows have content.",
        ),
    ],
    ins={"content_embeddings": dg.AssetIn("content_embeddings")},
)
def content_embedding_checks(content_embeddings: ContentArtifact) -> Iterator[dg.AssetCheckResult]:
    from hier_pipeline.content.tables import coverage, normalisation_errors

    vectors = content_embeddings.load()
    errors = normalisation_errors(vectors)
    yield dg.AssetCheckResult(
        check_name="embeddings_finite_and_normalised",
        passed=not errors,
        metadata={"bad_rows": dg.MetadataValue.json(errors)},
    )
    shares = coverage(vectors)
    low = {name: share for name, share in shares.items() if share < 0.5}
    yield dg.AssetCheckResult(
        check_name="content_coverage",
        passed=not low,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "coverage": dg.MetadataValue.json(shares),
            "below_half": dg.MetadataValue.json(low),
        },
    )
