"""The one Definitions object of the code location (`dagster dev` loads it via pyproject)."""

from __future__ import annotations

import os

import dagster as dg

from assets.content import content_embedding_checks, content_embeddings
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

defs = dg.Definitions(
    assets=[
        raw_tables,
        relational_graph,
        content_embeddings,
        interest_model,
        entity_embeddings,
        interest_hierarchy,
        interest_tokens,
    ],
    asset_checks=[
        raw_table_checks,
        relational_graph_checks,
        content_embedding_checks,
        interest_model_checks,
        entity_embedding_checks,
        interest_hierarchy_checks,
        interest_token_checks,
    ],
    jobs=[all_assets_job],
    resources=RESOURCES_BY_ENV[os.environ.get("HIER_ENV", "local")],
)
