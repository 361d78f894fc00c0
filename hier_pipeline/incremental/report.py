"""What one batch did, for whoever looks after it: the rows it added and quarantined (with
reasons and examples naming table, column and row), the entities it added and those it embedded
again, and how long each step took; as an MLflow run of its own and as markdown for the UI."""

from __future__ import annotations

from hier_pipeline.dataset.inspect import open_readonly, quarantine_preview
from hier_pipeline.incremental.update import BatchUpdate
from hier_pipeline.tracking import TrackedRun

SHOWN_KEYS = 20  # keys listed per node type; the counts are complete


def batch_metrics(update: BatchUpdate) -> dict[str, float]:
    """Per table rows accepted and quarantined (by reason), per node type entities added and
    embedded again and how their bags were placed, per step seconds."""
    metrics: dict[str, float] = {}
    for table, report in update.load.tables.items():
        metrics[f"rows/{table}/accepted"] = report.accepted
        metrics[f"rows/{table}/quarantined"] = report.quarantined
        for reason, count in report.quarantined_by_reason.items():
            metrics[f"quarantined/{table}/{reason}"] = count
    metrics |= {f"entities/{t}": n for t, n in update.entities.items()}
    metrics |= {f"embedded_again/{t}": n for t, n in update.refreshed.items()}
    for node_type, ways in update.placed_by.items():
        metrics |= {f"placed_by/{node_type}/{way}": n for way, n in ways.items()}
    metrics |= {f"seconds/{step}": s for step, s in update.seconds.items()}
    return metrics


def batch_keys_markdown(update: BatchUpdate) -> str:
    """The first keys of the new entities and of those embedded again, per node type."""
    lines = ["| node type | added | embedded again |", "|---|---|---|"]
    for node_type, keys in update.keys.items():
        added = update.entities.get(node_type, 0)
        lines.append(f"| {node_type} | {_listed(keys[:added])} | {_listed(keys[added:])} |")
    return "\n".join(lines)


def log_batch(run: TrackedRun, update: BatchUpdate) -> None:
    """The batch's MLflow run: its metrics, and a page with its tables, quarantine and keys."""
    run.log_params({"batch": update.batch, "caught_up": ",".join(update.caught_up) or "-"})
    run.log_metrics(batch_metrics(update))
    with open_readonly(update.load.database) as connection:
        preview = quarantine_preview(connection)
    page = [
        f"# Batch {update.batch}",
        update.load.to_markdown(),
        "## Quarantined rows (first of each reason)",
        preview.to_markdown(index=False) if not preview.empty else "nothing quarantined",
        "## Entities",
        batch_keys_markdown(update),
    ]
    run.log_text("\n\n".join(page) + "\n", "batch.md")


def _listed(keys: list[str]) -> str:
    shown = ", ".join(keys[:SHOWN_KEYS])
    more = len(keys) - SHOWN_KEYS
    return (shown + (f" (+{more} more)" if more > 0 else "")) or "-"
