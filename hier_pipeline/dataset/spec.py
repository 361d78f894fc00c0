"""The parsed form of a `dataset.yaml`: what tables exist, how they link, and which rows are events.

These are plain frozen dataclasses so that every later stage (graph, model, evaluation) reads the same
validated description and never the raw YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

ColumnKind = Literal["numeric", "categorical", "text", "timestamp", "ignore"]
TimeUnit = Literal["second", "minute", "hour", "day", "week"]

COLUMN_KINDS: tuple[ColumnKind, ...] = ("numeric", "categorical", "text", "timestamp", "ignore")
TIME_UNITS: tuple[TimeUnit, ...] = ("second", "minute", "hour", "day", "week")


@dataclass(frozen=True)
class TableSpec:
    """One table of the database; it becomes one node type in the graph."""

    name: str
    file: Path | None = None  # absolute, resolved, inside the dataset folder; None when implicit
    implicit: bool = False
    primary_key: str | None = None
    foreign_keys: Mapping[str, str] = field(default_factory=dict)  # column -> referenced table
    time: str | None = None
    time_unit: TimeUnit | None = None
    time_origin: datetime | None = None
    text: tuple[str, ...] = ()
    image: str | None = None
    columns: Mapping[str, ColumnKind] = field(default_factory=dict)
    # Rows that arrived later (`incoming/<batch>/`), read after `file` with the same columns.
    batch_files: tuple[Path, ...] = ()

    def referenced_columns(self) -> dict[str, str]:
        """Every column the description names, mapped to the field that names it (for messages)."""
        named: dict[str, str] = {}
        if self.primary_key:
            named[self.primary_key] = "primary_key"
        for column in self.foreign_keys:
            named.setdefault(column, "foreign_keys")
        if self.time:
            named.setdefault(self.time, "time")
        for column in self.text:
            named.setdefault(column, "text")
        if self.image:
            named.setdefault(self.image, "image")
        for column in self.columns:
            named.setdefault(column, "columns")
        return named


@dataclass(frozen=True)
class Roles:
    """Which tables play the user, item and (optional) advertiser parts."""

    user: str
    item: str
    advertiser: str | None = None


@dataclass(frozen=True)
class EventView:
    """A user -> item event stage: a filtered view over an existing table, never extra data."""

    table: str
    user: str
    item: str
    time: str
    name: str = "negative_feedback"
    where: str | None = None


@dataclass(frozen=True)
class DatasetSpec:
    """A validated dataset description, rooted at its folder."""

    name: str
    root: Path
    tables: Mapping[str, TableSpec]
    roles: Roles
    funnel: tuple[EventView, ...]
    negative_feedback: tuple[EventView, ...] = ()
    # (batch, why) of the batches in incoming/ a full load leaves out (`with_batches`)
    refused_batches: tuple[tuple[str, str], ...] = ()

    @property
    def target_stage(self) -> EventView:
        """The deepest funnel stage: what the model is trained and judged on."""
        return self.funnel[-1]

    def file_tables(self) -> list[TableSpec]:
        return [table for table in self.tables.values() if not table.implicit]

    def referrers(self, table_name: str) -> list[tuple[TableSpec, str]]:
        """(table, column) pairs whose foreign key points at `table_name`."""
        return [
            (table, column)
            for table in self.tables.values()
            for column, target in table.foreign_keys.items()
            if target == table_name
        ]
