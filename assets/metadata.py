"""Markdown for asset metadata: one format for every table and plot the Dagster UI shows."""

import base64
from collections.abc import Iterable, Sequence

import dagster as dg


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> dg.MetadataValue:
    """First column left-aligned (names), the rest right-aligned (numbers)."""
    align = "|---|" + "---:|" * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", align]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def png_markdown(png: bytes, alt: str) -> dg.MetadataValue:
    """A plot inline, as a data URI: the UI cannot read files beside the outputs."""
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})")
