"""Fuzzing the dataset.yaml parser and the loader (CSV, Parquet, integer periods, a table split
across its file and batch files): whatever the description or the files hold, the only exception
that comes out is our own `DatasetError`, and a load that succeeds reconciles (read = accepted +
quarantined for every table), with read equal to the rows the test wrote where it knows them."""

from __future__ import annotations

import contextlib
import copy
import re
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import with_batches
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
    """One tiny table rewritten: its header and rows kept, then arbitrary rows (so that the
    tables the roles and the funnel need keep a row to load), or its header broken."""
    name = draw(st.sampled_from(sorted(TINY_FILES)))
    header, known = TINY_FILES[name].split("\n", 1)
    if draw(st.integers(0, 4)) == 0:
        header, known = ",".join(draw(st.lists(cells, min_size=1, max_size=5))), ""
    width = header.count(",") + 1
    rows = draw(
        st.lists(
            st.lists(cells, min_size=max(1, width - 1), max_size=width + 1), min_size=1, max_size=6
        )
    )
    ending = draw(st.sampled_from(["\n", "\r\n", ""]))
    return {name: header + "\n" + known + "\n".join(",".join(row) for row in rows) + ending}


def _refusal(message: str) -> str:
    if "the file holds" in message:
        return "the reader and the count disagree"
    if re.match(REQUIRED_EMPTY, message):
        return "a required table has no accepted row"
    return "the file does not fit its description"


@LOAD_FUZZ
@given(csv_files())
def test_loader_on_arbitrary_csv(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_dataset(Path(scratch) / "d", files=files)
        try:
            report = load_dataset(parse_dataset(folder), Path(scratch) / "raw.duckdb")
        except DatasetError as error:
            # Quotes and line breaks in cells: where DuckDB's reader and the independent count
            # split the file differently, the file is refused rather than rows lost or invented.
            event(f"refused: {_refusal(str(error))}")
            return
        event("loaded")
        for table in report.tables.values():
            assert table.reconciles, table


# Rows are counted here without any reader: the test knows how many it wrote. Every row written is
# accepted or quarantined once; the only error is a required table left without a row.
REQUIRED_EMPTY = (
    r"table '(users|products|events)': (all \d+ rows were quarantined|the table has no rows)"
)
SPLIT_FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _load_counted(
    folder: Path, database: Path, written: dict[str, int], refusal: str = REQUIRED_EMPTY
) -> None:
    """Load with the batches; every table's read is what was written, and reconciles. A
    `DatasetError` must match `refusal`, and never say that a reader lost or invented rows."""
    try:
        report = load_dataset(with_batches(parse_dataset(folder)), database)
    except DatasetError as error:
        assert re.match(refusal, str(error)) and "the file holds" not in str(error), error
        event("refused with a DatasetError")
        return
    event("loaded")
    quarantined = sum(report.tables[name].quarantined for name in written)
    event("rows quarantined" if quarantined else "nothing quarantined")
    for name, rows in written.items():
        table = report.tables[name]
        assert (table.read, table.reconciles) == (rows, True), table


@SPLIT_FUZZ
@given(
    user_ids=st.lists(st.one_of(st.none(), st.integers(-3, 6), st.integers(-(2**63), 2**63 - 1))),
    signups=st.lists(
        st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["2024-01-02", "1800-01-01"]))
    ),
    ages=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))),
)
def test_loader_on_arbitrary_parquet(
    user_ids: list[int | None], signups: list[str | None], ages: list[float | None]
) -> None:
    rows = min(len(user_ids), len(signups), len(ages))
    # The tiny dataset's three users first, so that its events have someone to point at.
    table = pa.table(
        {
            "user_id": pa.array([1, 2, 3, *user_ids[:rows]], pa.int64()),
            "signup": pa.array(["2024-01-01"] * 3 + signups[:rows], pa.string()),
            "age": pa.array([30.0, 41.0, 25.0, *ages[:rows]], pa.float64()),
        }
    )
    with tempfile.TemporaryDirectory() as scratch:
        description = copy.deepcopy(TINY_DESCRIPTION)
        description["tables"]["users"]["file"] = "users.parquet"
        folder = write_dataset(Path(scratch) / "d", description)
        pq.write_table(table, folder / "users.parquet")
        _load_counted(folder, Path(scratch) / "raw.duckdb", {"users": rows + 3})


@SPLIT_FUZZ
@given(
    unit=st.sampled_from(["second", "minute", "hour", "day", "week"]),
    periods=st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-3000, 3000),
            st.integers(2**63, 2**70),  # past BIGINT: the column is read as HUGEINT
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_loader_on_arbitrary_integer_periods(unit: str, periods: list[int]) -> None:
    description = copy.deepcopy(TINY_DESCRIPTION)
    description["tables"]["events"].update(time="period", time_unit=unit, time_origin="2024-01-01")
    for stage in description["funnel"]:
        stage["time"] = "period"
    events = "user_id,product_id,kind,period\n1,10,click,5\n3,11,purchase,6\n" + "".join(
        f"1,10,{'click' if i % 2 else 'purchase'},{p}\n" for i, p in enumerate(periods)
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_dataset(Path(scratch) / "d", description, files={"events.csv": events})
        _load_counted(folder, Path(scratch) / "raw.duckdb", {"events": len(periods) + 2})


# Cells that cannot change where a row ends, so that the rows written are the rows the file holds.
plain_cells = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters='",\r\n'), max_size=8),
    st.sampled_from(["", "1", "2", "3", "10", "x", "2024-02-01 10:00:00", "inf", "nan", "-1"]),
)


@st.composite
def split_events(draw: st.DrawFn) -> tuple[str, list[str]]:
    """The events table as its file (the tiny dataset's events first) and one to three batch
    files, each with a header and rows of 2 to 6 plain cells (the table has 4 columns)."""
    header, known = TINY_FILES["events.csv"].split("\n", 1)
    files = []
    for _ in range(draw(st.integers(2, 4))):
        rows = draw(st.lists(st.lists(plain_cells, min_size=2, max_size=6), max_size=5))
        files.append(header + "\n" + "".join(",".join(row) + "\n" for row in rows))
    return files[0].replace(header + "\n", header + "\n" + known, 1), files[1:]


@SPLIT_FUZZ
@given(split_events())
def test_loader_on_a_table_split_across_files(files: tuple[str, list[str]]) -> None:
    main, batches = files
    written = sum(
        sum(1 for line in text.split("\n")[1:] if line) for text in (main, *batches)
    )  # a blank line holds no row in a table of several columns
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_dataset(Path(scratch) / "d", files={"events.csv": main})
        for index, text in enumerate(batches):
            batch = folder / "incoming" / f"b{index}"
            batch.mkdir(parents=True)
            (batch / "events.csv").write_text(text, encoding="utf-8")
        # Random cells may also make a column the description names unusable (all-integer `ts`).
        refusal = rf"{REQUIRED_EMPTY}|table 'events', column '\w+': "
        _load_counted(folder, Path(scratch) / "raw.duckdb", {"events": written}, refusal)
