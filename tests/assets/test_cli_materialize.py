"""`dagster asset materialize` against the real code location, with a persistent instance."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

REPO = Path(__file__).resolve().parents[2]


def test_dagster_cli_materialises_raw_tables_into_a_persistent_instance(
    synthetic_world: Path, tmp_path: Path
) -> None:
    """With `make demo`'s run config (config/demo.yaml: every step in one process)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "HIER_HOME": str(tmp_path / "hier"),
        "HIER_DATASET": str(synthetic_world),
    }
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [
            str(dagster),
            "asset",
            "materialize",
            "--select",
            "raw_tables",
            "-m",
            "assets.definitions",
            "-c",
            "config/demo.yaml",
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Executing steps in process" in result.stderr, result.stderr[-3000:]
    assert (tmp_path / "hier" / "warehouse" / "synthetic_ads.duckdb").is_file()
    where = subprocess.run(
        [str(dagster.with_name("hier")), "where"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "warehouse/synthetic_ads.duckdb" in where.stdout
    assert "graphs      (not materialised yet)" in where.stdout
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("raw_tables"))
        assert event is not None
        assert event.asset_materialization is not None
        assert event.asset_materialization.metadata["rows_quarantined"].value == 0


def test_plain_dagster_from_the_repo_root_finds_the_code_location(tmp_path: Path) -> None:
    """`dagster dev` and friends read [tool.dagster] in pyproject.toml, no flags needed."""
    dagster = Path(sys.executable).with_name("dagster")
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
    }  # a fresh clone has no .dagster_home
    result = subprocess.run(
        [str(dagster), "definitions", "validate"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Validation successful for code location hier_pipeline" in result.stderr + result.stdout
