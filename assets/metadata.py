"""Markdown tables for asset metadata: one format for every table the Dagster UI shows."""

from collections.abc import Iterable, Sequence

import dagster as dg


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> dg.MetadataValue:
    """First column left-aligned (names), the rest right-aligned (numbers)."""
    align = "|---|" + "---:|" * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", align]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))
