"""Errors raised while reading a dataset folder.

A broken *description* (dataset.yaml, missing file, unknown column) stops the run before anything is
written; bad *rows* never raise, they are quarantined. Every message names the file, table and column.
"""

from __future__ import annotations


class DatasetError(ValueError):
    """The dataset description or a file it names cannot be used as it is."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        table: str | None = None,
        column: str | None = None,
    ) -> None:
        self.file = file
        self.table = table
        self.column = column
        where = ", ".join(
            f"{label} '{value}'"
            for label, value in (("file", file), ("table", table), ("column", column))
            if value is not None
        )
        super().__init__(f"{where}: {message}" if where else message)
