"""The one Definitions object of the code location (`dagster dev` loads it via pyproject)."""

from __future__ import annotations

import os

import dagster as dg

from assets.content import content_embedding_checks, content_embeddings
from assets.evaluation import evaluation_report, evaluation_report_checks, published_tokens
from assets.graph import relational_graph, relational_graph_checks
from assets.ingest import raw_table_checks, raw_tables
from assets.interests import (
    interest_hierarchy,
    interest_hierarchy_checks,
    interest_token_checks,
    interest_tokens,
)
from assets.model import (
    entity_embedding_checks,
    entity_embeddings,
    interest_model,
    interest_model_checks,
)
from resources import DatasetResource, MLflowResource, StorageResource

# Resources per environment, picked by HIER_ENV; never `if` statements inside assets.
RESOURCES_BY_ENV: dict[str, dict[str, dg.ConfigurableResource]] = {
    "local": {
        "dataset": DatasetResource(source=os.environ.get("HIER_DATASET", "synthetic")),
        "storage": StorageResource(),
        "mlflow": MLflowResource(),
    },
    "ci": {
        "dataset": DatasetResource(synthetic_scale=0.05),
        "storage": StorageResource(),
        "mlflow": MLflowResource(),
    },
}

all_assets_job = dg.define_asset_job(
    "all_assets_job", selection=dg.AssetSelection.all(), description="Every stage, end to end."
)

# Re-evaluate the materialised model and publish its tokens if it passes `beats_popularity`.
evaluate_and_publish_job = dg.define_asset_job(
    "evaluate_and_publish_job",
    selection=dg.AssetSelection.assets("evaluation_report", "published_tokens"),
    description="The evaluation report, its quality gate, and the tokens it lets through.",
)

defs = dg.Definitions(
    assets=[
        raw_tables,
        relational_graph,
        content_embeddings,
        interest_model,
        entity_embeddings,
        interest_hierarchy,
        interest_tokens,
        evaluation_report,
        published_tokens,
    ],
    asset_checks=[
        raw_table_checks,
        relational_graph_checks,
        content_embedding_checks,
        interest_model_checks,
        entity_embedding_checks,
        interest_hierarchy_checks,
        interest_token_checks,
        evaluation_report_checks,
    ],
    jobs=[all_assets_job, evaluate_and_publish_job],
    resources=RESOURCES_BY_ENV[os.environ.get("HIER_ENV", "local")],
)
