"""Fuzzing the dataset.yaml parser and the CSV loader: whatever the description or the files hold,
the only exception that comes out is our own `DatasetError`, and a load that succeeds reconciles
(read = accepted + quarantined for every table)."""

from __future__ import annotations

import contextlib
import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from tests.builders import TINY_DESCRIPTION, TINY_FILES, write_dataset

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LOAD_FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Names the parser knows, so that mutations often reach deep checks instead of failing early.
KNOWN = sorted(
    {"users", "products", "events", "brands", "user_id", "product_id", "ts", "title", "kind"}
    | {"file", "implicit", "primary_key", "foreign_keys", "time", "time_unit", "time_origin"}
    | {"week", "day", "users.csv", "../users.csv", "/etc/passwd", "kind = 'click'", "x;y"}
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.dates(),
    st.text(max_size=12),
    st.sampled_from(KNOWN),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.one_of(st.sampled_from(KNOWN), st.text(max_size=6)), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in a nested dict/list document."""
    children = node.items() if isinstance(node, dict) else enumerate(node)
    found = [prefix] if prefix else []
    for key, child in children:
        if isinstance(child, dict | list):
            found += _paths(child, (*prefix, key))
        else:
            found.append((*prefix, key))
    return found


@st.composite
def mutated_descriptions(draw: st.DrawFn) -> dict[str, Any]:
    """The tiny description with one to three values replaced by arbitrary ones, or removed."""
    document = copy.deepcopy(TINY_DESCRIPTION)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(document)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
    return document


def _parse(text: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_dataset(Path(scratch) / "d")
        (folder / "dataset.yaml").write_text(text, encoding="utf-8")
        with contextlib.suppress(DatasetError):
            parse_dataset(folder)


@FUZZ
@given(mutated_descriptions())
def test_parser_on_mutated_descriptions(description: dict[str, Any]) -> None:
    _parse(yaml.safe_dump(description, allow_unicode=True))


@FUZZ
@given(
    st.one_of(
        st.text(max_size=200),
        st.builds(lambda depth: "tables: " + "[" * depth, st.integers(1, 3000)),
        st.builds(lambda depth: "{a: " * depth, st.integers(1, 3000)),
        st.sampled_from(["!!python/object/apply:os.system ['true']", "a: &x [*x]", "- - -"]),
    )
)
def test_parser_on_arbitrary_text(text: str) -> None:
    _parse(text)


cells = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", '"', '""', ",", "\n", "\r\n", "1", "-1", "1e400", "2024-02-01 10:00:00"]),
    st.integers(-(2**65), 2**65).map(str),
)


@st.composite
def csv_files(draw: st.DrawFn) -> dict[str, str]:
    """One tiny table rewritten: its header kept or broken, its rows arbitrary cells."""
    name = draw(st.sampled_from(sorted(TINY_FILES)))
    header = TINY_FILES[name].split("\n", 1)[0]
    if draw(st.integers(0, 4)) == 0:
        header = ",".join(draw(st.lists(cells, min_size=1, max_size=5)))
    width = header.count(",") + 1
    rows = draw(
        st.lists(
            st.lists(cells, min_size=max(1, width - 1), max_size=width + 1), min_size=1, max_size=6
        )
    )
    ending = draw(st.sampled_from(["\n", "\r\n", ""]))
    return {name: header + "\n" + "\n".join(",".join(row) for row in rows) + ending}


@LOAD_FUZZ
@given(csv_files())
def test_loader_on_arbitrary_csv(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_dataset(Path(scratch) / "d", files=files)
        try:
            report = load_dataset(parse_dataset(folder), Path(scratch) / "raw.duckdb")
        except DatasetError:
            return
        for table in report.tables.values():
            assert table.reconciles, table
