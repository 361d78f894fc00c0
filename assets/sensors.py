"""Automation, on by default so that `make dev` shows it working without a click: the sensor that
turns each new batch in `incoming/` into a partition and a run, and the weekly retrain."""

import os

import dagster as dg

from assets.incremental import ARRIVALS, arrived_interests, arrived_tables
from resources import DatasetResource

# Cron of the scheduled retrain (default: Sundays 03:00); HIER_RETRAIN_CRON overrides it.
RETRAIN_CRON = os.environ.get("HIER_RETRAIN_CRON", "0 3 * * 0")

arrivals_job = dg.define_asset_job(
    "arrivals_job",
    selection=dg.AssetSelection.assets(arrived_tables, arrived_interests),
    partitions_def=ARRIVALS,
    description="One batch of new rows: validated alone, then its entities embedded and"
    " tokenised by the current model and tree, without a retrain.",
)


def new_batches(batches: list[str], cursor: str | None) -> list[str]:
    """The batches after the cursor (the last batch already handed over); names sort in arrival
    order (`hier generate-batch` numbers them)."""
    return [b for b in batches if cursor is None or b > cursor]


@dg.sensor(
    job=arrivals_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Each new folder in the dataset's incoming/ becomes one `arrivals` partition and"
    " one run of arrivals_job.",
)
def arrivals_sensor(
    context: dg.SensorEvaluationContext, dataset: DatasetResource
) -> dg.SensorResult | dg.SkipReason:
    from hier_pipeline.dataset.arrivals import list_batches

    fresh = new_batches(list_batches(dataset.folder()), context.cursor)
    if not fresh:
        return dg.SkipReason(f"no batch after {context.cursor or 'none'} in incoming/")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=batch, partition_key=batch) for batch in fresh],
        dynamic_partitions_requests=[ARRIVALS.build_add_request(fresh)],
        cursor=fresh[-1],
    )


# full_retrain_job (assets/definitions.py) is also the on-demand retrain: launch it in the UI.
retrain_schedule = dg.ScheduleDefinition(
    name="retrain_schedule",
    job_name="full_retrain_job",
    cron_schedule=RETRAIN_CRON,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Retrains the model and regrows the hierarchy on everything that arrived;"
    " promoted_interests then serves them only if the evaluation is not worse.",
)
