"""The one Definitions object of the code location (`dagster dev` loads it via pyproject)."""

from __future__ import annotations

import os

import dagster as dg

from assets.content import content_embedding_checks, content_embeddings
from assets.evaluation import evaluation_report, evaluation_report_checks
from assets.graph import relational_graph, relational_graph_checks
from assets.incremental import arrived_interests, arrived_tables
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
from assets.promotion import promoted_interests, promotion_checks
from assets.sensors import arrivals_job, arrivals_sensor, retrain_schedule
from resources import DatasetResource, MLflowResource, StorageResource
from resources.tracking import UI_URL

# MLflow's own variable picks a tracking server (deploy/dagster-k8s.yaml); empty: sqlite under
# $HIER_HOME. Run links in the UI open HIER_MLFLOW_UI.
MLFLOW = MLflowResource(
    tracking_uri=os.environ.get("MLFLOW_TRACKING_URI", ""),
    ui_url=os.environ.get("HIER_MLFLOW_UI", UI_URL),
)

# Resources per environment, picked by HIER_ENV; never `if` statements inside assets.
RESOURCES_BY_ENV: dict[str, dict[str, dg.ConfigurableResource]] = {
    "local": {
        "dataset": DatasetResource(source=os.environ.get("HIER_DATASET", "synthetic")),
        "storage": StorageResource(),
        "mlflow": MLFLOW,
    },
    "ci": {
        "dataset": DatasetResource(synthetic_scale=0.05),
        "storage": StorageResource(),
        "mlflow": MLFLOW,
    },
}

all_assets_job = dg.define_asset_job(
    "all_assets_job",
    # The arrivals are partitioned by batch: arrivals_job runs them, one batch at a time.
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups("arrivals"),
    description="Every stage, end to end.",
)

# The stages of a full run, by group: assets added later in groups of their own (the incremental
# path) stay out of it.
PIPELINE_GROUPS = ("ingest", "graph", "content", "model", "interests", "evaluation")

full_retrain_job = dg.define_asset_job(
    "full_retrain_job",
    selection=dg.AssetSelection.groups(*PIPELINE_GROUPS),
    description="Ingest to release on all the data: retrain, regrow the hierarchy, evaluate; the"
    " new model serves only if it beats popularity and is no worse than the serving one.",
)

evaluate_only_job = dg.define_asset_job(
    "evaluate_only_job",
    selection=dg.AssetSelection.assets("evaluation_report"),
    description="Re-evaluate the materialised model (e.g. with more ablations or baselines in the"
    " launchpad) without retraining and without releasing.",
)

# Re-evaluate the materialised model and serve it if it passes the gates.
evaluate_and_promote_job = dg.define_asset_job(
    "evaluate_and_promote_job",
    selection=dg.AssetSelection.assets("evaluation_report", "promoted_interests"),
    description="The evaluation report, its quality gate, and the release it lets through.",
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
        promoted_interests,
        arrived_tables,
        arrived_interests,
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
        promotion_checks,
    ],
    jobs=[
        all_assets_job,
        full_retrain_job,
        evaluate_only_job,
        evaluate_and_promote_job,
        arrivals_job,
    ],
    sensors=[arrivals_sensor],
    schedules=[retrain_schedule],
    resources=RESOURCES_BY_ENV[os.environ.get("HIER_ENV", "local")],
)
