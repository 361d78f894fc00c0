"""Markdown for asset metadata: one format for every table and plot the Dagster UI shows."""

import base64
from collections.abc import Iterable, Sequence

import dagster as dg

from hier_pipeline.dataset import LoadReport
from hier_pipeline.dataset.inspect import open_readonly, quarantine_preview


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> dg.MetadataValue:
    """First column left-aligned (names), the rest right-aligned (numbers)."""
    align = "|---|" + "---:|" * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", align]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def png_markdown(png: bytes, alt: str) -> dg.MetadataValue:
    """A plot inline, as a data URI: the UI cannot read files beside the outputs."""
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})")


def load_metadata(report: LoadReport) -> dict[str, dg.MetadataValue | str | int]:
    """What a load took in and what it quarantined, with examples naming table, column and row:
    the same view for the full load and for each batch."""
    with open_readonly(report.database) as connection:
        preview = quarantine_preview(connection)
    by_reason: dict[str, int] = {}
    for table in report.tables.values():
        for reason, count in table.quarantined_by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + count
    return {
        "database": dg.MetadataValue.path(str(report.database)),
        "dagster/row_count": sum(t.accepted for t in report.tables.values()),
        "rows_quarantined": sum(t.quarantined for t in report.tables.values()),
        "quarantined_by_reason": dg.MetadataValue.json(by_reason),
        "batches_refused": dg.MetadataValue.json(report.refused_batches),
        "tables": dg.MetadataValue.md(report.to_markdown()),
        "quarantine_preview": dg.MetadataValue.md(
            preview.to_markdown(index=False) if not preview.empty else "nothing quarantined"
        ),
    }
