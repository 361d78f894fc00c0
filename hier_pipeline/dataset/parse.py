"""Read `dataset.yaml` into a `DatasetSpec`, rejecting any description that cannot be trusted.

Only the structure is checked here (names, references between tables, paths, units); whether the
named columns exist in the files is checked by `schema.py`, which has to open the files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import yaml

from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.spec import (
    COLUMN_KINDS,
    TIME_UNITS,
    ColumnKind,
    DatasetSpec,
    EventView,
    Roles,
    TableSpec,
    TimeUnit,
)

DESCRIPTION_FILE = "dataset.yaml"
DATASET_NAME = re.compile(r"[a-z0-9_]+")
TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]*")
SUPPORTED_SUFFIXES = (".parquet", ".csv")
MAX_DESCRIPTION_BYTES = 1024 * 1024  # a real one is a few kB; bounds what a hostile one costs

_TOP_KEYS = {"name", "tables", "roles", "funnel", "negative_feedback"}
_TABLE_KEYS = {
    "file",
    "implicit",
    "primary_key",
    "foreign_keys",
    "time",
    "time_unit",
    "time_origin",
    "text",
    "image",
    "columns",
}
_ROLE_KEYS = {"user", "item", "advertiser"}
_VIEW_KEYS = {"name", "table", "user", "item", "time", "where"}


def parse_dataset(folder: Path | str) -> DatasetSpec:
    """Parse and structurally validate `<folder>/dataset.yaml`."""
    root = Path(folder).resolve()
    description = root / DESCRIPTION_FILE
    if not description.is_file():
        raise DatasetError("no dataset.yaml in this folder", file=str(description))
    if description.stat().st_size > MAX_DESCRIPTION_BYTES:
        raise DatasetError(
            f"is over {MAX_DESCRIPTION_BYTES} bytes: a description, not data", file=DESCRIPTION_FILE
        )
    try:
        document = yaml.safe_load(description.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise DatasetError(f"not valid YAML: {error}", file=DESCRIPTION_FILE) from error
    except RecursionError as error:  # PyYAML's composer recurses once per nesting level
        raise DatasetError("not valid YAML: nested too deeply", file=DESCRIPTION_FILE) from error
    top = _mapping(document, "the document")
    _no_unknown_keys(top, _TOP_KEYS, "the document")

    name = _string(top.get("name"), "name")
    if not DATASET_NAME.fullmatch(name):
        raise DatasetError(f"dataset name '{name}' must match [a-z0-9_]+", file=DESCRIPTION_FILE)
    tables_doc = _mapping(top.get("tables"), "tables")
    if not tables_doc:
        raise DatasetError("'tables' is empty", file=DESCRIPTION_FILE)
    tables = {
        str(table_name): _parse_table(root, str(table_name), body)
        for table_name, body in tables_doc.items()
    }
    _check_foreign_key_targets(tables)
    roles = _parse_roles(top.get("roles"), tables)
    funnel_doc = top.get("funnel")
    if not isinstance(funnel_doc, list) or not funnel_doc:
        raise DatasetError("'funnel' must be a non-empty list of stages", file=DESCRIPTION_FILE)
    funnel = tuple(
        _parse_view(item, i, "funnel", tables, roles) for i, item in enumerate(funnel_doc)
    )
    names = [stage.name for stage in funnel]
    if len(set(names)) != len(names):
        raise DatasetError(f"funnel stage names repeat: {names}", file=DESCRIPTION_FILE)
    negative_doc = top.get("negative_feedback") or []
    if not isinstance(negative_doc, list):
        raise DatasetError("'negative_feedback' must be a list", file=DESCRIPTION_FILE)
    negative = tuple(
        _parse_view(item, i, "negative_feedback", tables, roles)
        for i, item in enumerate(negative_doc)
    )
    return DatasetSpec(name, root, tables, roles, funnel, negative)


def _parse_table(root: Path, name: str, body: Any) -> TableSpec:
    if not TABLE_NAME.fullmatch(name):
        raise DatasetError(
            "table names must match [a-z_][a-z0-9_]*", file=DESCRIPTION_FILE, table=name
        )
    where = f"tables.{name}"
    table = _mapping(body, where)
    _no_unknown_keys(table, _TABLE_KEYS, where, table=name)
    implicit = table.get("implicit", False)
    if not isinstance(implicit, bool):
        raise DatasetError("'implicit' must be true or false", file=DESCRIPTION_FILE, table=name)
    primary_key = _optional_string(table.get("primary_key"), f"{where}.primary_key", name)
    if implicit:
        extra = sorted(set(table) - {"implicit", "primary_key"})
        if extra:
            raise DatasetError(
                f"an implicit table has no file, so it takes only primary_key, not {extra}",
                file=DESCRIPTION_FILE,
                table=name,
            )
        if primary_key is None:
            raise DatasetError(
                "an implicit table needs a primary_key", file=DESCRIPTION_FILE, table=name
            )
        return TableSpec(name=name, implicit=True, primary_key=primary_key)

    file = resolve_file(root, name, table.get("file"))
    foreign_keys = {
        _string(column, f"{where}.foreign_keys", name): _string(
            target, f"{where}.foreign_keys", name
        )
        for column, target in _mapping(
            table.get("foreign_keys", {}), f"{where}.foreign_keys"
        ).items()
    }
    time = _optional_string(table.get("time"), f"{where}.time", name)
    time_unit, time_origin = _parse_time_unit(table, name, time)
    text_doc = table.get("text", [])
    text_list = [text_doc] if isinstance(text_doc, str) else text_doc
    if not isinstance(text_list, list):
        raise DatasetError(
            "'text' must be a column or a list of columns", file=DESCRIPTION_FILE, table=name
        )
    text = tuple(_string(column, f"{where}.text", name) for column in text_list)
    image = _optional_string(table.get("image"), f"{where}.image", name)
    columns: dict[str, ColumnKind] = {}
    for column, kind in _mapping(table.get("columns", {}), f"{where}.columns").items():
        if kind not in COLUMN_KINDS:
            raise DatasetError(
                f"kind '{kind}' is not one of {list(COLUMN_KINDS)}",
                file=DESCRIPTION_FILE,
                table=name,
                column=str(column),
            )
        columns[str(column)] = cast(ColumnKind, kind)
    return TableSpec(
        name=name,
        file=file,
        primary_key=primary_key,
        foreign_keys=foreign_keys,
        time=time,
        time_unit=time_unit,
        time_origin=time_origin,
        text=text,
        image=image,
        columns=columns,
    )


def resolve_file(root: Path, table: str, value: Any) -> Path:
    """A file path that stays inside the dataset folder, symlinks included, and exists."""
    if value is None:
        raise DatasetError("needs 'file' (or 'implicit: true')", file=DESCRIPTION_FILE, table=table)
    relative = _string(value, f"tables.{table}.file", table)
    if Path(relative).is_absolute():
        raise DatasetError(
            "the path must be relative to the dataset folder", file=relative, table=table
        )
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise DatasetError("the path leaves the dataset folder", file=relative, table=table)
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise DatasetError(f"only {SUPPORTED_SUFFIXES} files are read", file=relative, table=table)
    if not path.exists():
        raise DatasetError("the file does not exist", file=relative, table=table)
    if not path.is_file():  # a FIFO or a device would block the reader or never end
        raise DatasetError("not a regular file", file=relative, table=table)
    return path


def _parse_time_unit(
    table: Mapping[str, Any], name: str, time: str | None
) -> tuple[TimeUnit | None, datetime | None]:
    unit = table.get("time_unit")
    origin = table.get("time_origin")
    if unit is None and origin is None:
        return None, None
    if time is None:
        raise DatasetError(
            "time_unit/time_origin need a 'time' column", file=DESCRIPTION_FILE, table=name
        )
    if unit not in TIME_UNITS:
        raise DatasetError(
            f"time_unit '{unit}' is not one of {list(TIME_UNITS)}",
            file=DESCRIPTION_FILE,
            table=name,
            column=time,
        )
    if origin is None:
        raise DatasetError(
            "time_unit needs a time_origin date", file=DESCRIPTION_FILE, table=name, column=time
        )
    try:
        parsed_origin = datetime.fromisoformat(str(origin))
    except ValueError as error:
        raise DatasetError(
            f"time_origin '{origin}' is not an ISO date",
            file=DESCRIPTION_FILE,
            table=name,
            column=time,
        ) from error
    return cast(TimeUnit, unit), parsed_origin


def _check_foreign_key_targets(tables: Mapping[str, TableSpec]) -> None:
    for table in tables.values():
        for column, target in table.foreign_keys.items():
            if target not in tables:
                raise DatasetError(
                    f"foreign key points at unknown table '{target}'",
                    file=DESCRIPTION_FILE,
                    table=table.name,
                    column=column,
                )
            if tables[target].primary_key is None:
                raise DatasetError(
                    f"foreign key points at '{target}', which has no primary_key",
                    file=DESCRIPTION_FILE,
                    table=table.name,
                    column=column,
                )


def _parse_roles(value: Any, tables: Mapping[str, TableSpec]) -> Roles:
    roles_doc = _mapping(value, "roles")
    _no_unknown_keys(roles_doc, _ROLE_KEYS, "roles")
    chosen: dict[str, str | None] = {}
    for role in ("user", "item", "advertiser"):
        table = _optional_string(roles_doc.get(role), f"roles.{role}")
        if table is None:
            if role != "advertiser":
                raise DatasetError(f"roles.{role} is required", file=DESCRIPTION_FILE)
            chosen[role] = None
            continue
        if table not in tables:
            raise DatasetError(f"roles.{role} names unknown table '{table}'", file=DESCRIPTION_FILE)
        if tables[table].primary_key is None:
            raise DatasetError(
                f"the {role} table needs a primary_key", file=DESCRIPTION_FILE, table=table
            )
        chosen[role] = table
    roles = Roles(
        user=str(chosen["user"]), item=str(chosen["item"]), advertiser=chosen["advertiser"]
    )
    if roles.advertiser and roles.advertiser not in tables[roles.item].foreign_keys.values():
        raise DatasetError(
            f"the item table needs a foreign key to the advertiser table '{roles.advertiser}'",
            file=DESCRIPTION_FILE,
            table=roles.item,
        )
    return roles


def _parse_view(
    value: Any, index: int, section: str, tables: Mapping[str, TableSpec], roles: Roles
) -> EventView:
    where = f"{section}[{index}]"
    view = _mapping(value, where)
    _no_unknown_keys(view, _VIEW_KEYS, where)
    table_name = _string(view.get("table"), f"{where}.table")
    if table_name not in tables or tables[table_name].implicit:
        raise DatasetError(
            f"{where} names unknown or implicit table '{table_name}'", file=DESCRIPTION_FILE
        )
    table = tables[table_name]
    endpoints = {}
    for field_name, role_table in (("user", roles.user), ("item", roles.item)):
        column = _string(view.get(field_name), f"{where}.{field_name}", table_name)
        if table.foreign_keys.get(column) != role_table:
            raise DatasetError(
                f"{where}.{field_name} must be a foreign key to the {field_name} table '{role_table}'",
                file=DESCRIPTION_FILE,
                table=table_name,
                column=column,
            )
        endpoints[field_name] = column
    time = _string(view.get("time"), f"{where}.time", table_name)
    predicate = _optional_string(view.get("where"), f"{where}.where", table_name)
    name = (
        _string(view.get("name"), f"{where}.name") if section == "funnel" else "negative_feedback"
    )
    if section == "funnel" and not TABLE_NAME.fullmatch(name):
        raise DatasetError(
            f"{where}.name '{name}' must match [a-z_][a-z0-9_]*", file=DESCRIPTION_FILE
        )
    return EventView(
        table=table_name,
        user=endpoints["user"],
        item=endpoints["item"],
        time=time,
        name=name,
        where=predicate,
    )


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DatasetError(f"{where} must be a mapping", file=DESCRIPTION_FILE)
    return value


def _string(value: Any, where: str, table: str | None = None) -> str:
    if not isinstance(value, str) or not value:
        raise DatasetError(
            f"{where} must be a non-empty string", file=DESCRIPTION_FILE, table=table
        )
    return value


def _optional_string(value: Any, where: str, table: str | None = None) -> str | None:
    return None if value is None else _string(value, where, table)


def _no_unknown_keys(
    value: Mapping[str, Any], allowed: set[str], where: str, table: str | None = None
) -> None:
    unknown = sorted(str(key) for key in set(value) - allowed)
    if unknown:
        raise DatasetError(
            f"unknown key(s) {unknown} in {where}; allowed: {sorted(allowed)}",
            file=DESCRIPTION_FILE,
            table=table,
        )
