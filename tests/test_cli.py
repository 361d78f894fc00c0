"""The `hier` command line, run as a user runs it (the installed console script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import TINY_FILES, tiny_description, write_dataset

HIER = shutil.which("hier") or str(Path(sys.executable).with_name("hier"))


def hier(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HIER, *arguments], capture_output=True, text=True, timeout=300, check=False
    )


def test_validate_reports_counts_and_quarantine(tmp_path: Path) -> None:
    events = TINY_FILES["events.csv"] + "99,10,click,2024-02-05 00:00:00\n"
    folder = write_dataset(tmp_path / "d", files={"events.csv": events})
    result = hier("validate", str(folder), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["tables"]["events"] == {
        "table": "events",
        "source": "events.csv",
        "read": 6,
        "accepted": 5,
        "quarantined": 1,
        "quarantined_by_reason": {"dangling_foreign_key": 1},
    }
    assert "database" not in report  # a scratch file, deleted before the report is printed
    human = hier("validate", str(folder))
    assert "| events | events.csv | 6 | 5 | 1 | dangling_foreign_key: 1 |" in human.stdout


def test_validate_answers_what_a_full_run_would_with_the_batches(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    batch = folder / "incoming" / "b1"
    batch.mkdir(parents=True)
    (batch / "users.csv").write_text("user_id,signup,age\n4,2024-01-04,50\n5\n")
    report = json.loads(hier("validate", str(folder), "--json").stdout)
    assert report["tables"]["users"]["read"] == 5
    assert report["tables"]["users"]["quarantined_by_reason"] == {"csv_malformed": 1}
    (batch / "users.csv").unlink()
    (batch / "events.parquet").write_bytes(b"PAR1")
    result = hier("validate", str(folder))  # a full run leaves the batch out, and says why
    assert result.returncode == 0
    assert "Batch `b1` refused whole: file 'incoming/b1/events.parquet', table 'events'" in (
        result.stdout
    )
    assert "read from .csv files, so its batch files must be .csv too" in result.stdout
    report = json.loads(hier("validate", str(folder), "--json").stdout)
    assert list(report["refused_batches"]) == ["b1"]


def test_validate_fails_clearly_on_a_broken_description(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["products"]["text"] = ["blurb"]
    result = hier("validate", str(write_dataset(tmp_path / "d", description)))
    assert result.returncode == 2
    assert "table 'products', column 'blurb'" in result.stderr
    as_json = json.loads(hier("validate", str(tmp_path / "d"), "--json").stdout)
    assert as_json["valid"] is False and "blurb" in as_json["error"]


def test_generate_writes_a_world_that_validates(tmp_path: Path) -> None:
    result = hier("generate", str(tmp_path / "world"), "--scale", "0.05", "--seed", "3")
    assert result.returncode == 0, result.stderr
    report = json.loads(hier("validate", str(tmp_path / "world"), "--json").stdout)
    assert report["valid"] is True
    assert report["tables"]["events"]["accepted"] > 1000
    assert all(table["quarantined"] == 0 for table in report["tables"].values())


def test_interest_queries_say_what_to_materialise_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIER_HOME", str(tmp_path))
    result = hier("interests", "recommend", "1")
    assert result.returncode == 2
    assert "materialise interest_tokens first" in result.stderr


def test_evaluate_writes_the_promised_metrics_and_prints_one_table(
    synthetic_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIER_HOME", str(tmp_path / "home"))
    out = tmp_path / "out"
    result = hier(
        "evaluate", str(synthetic_world), "--out", str(out),
        "--ablations", "hier_content_only", "--baselines", "popularity,itemknn",
        "--epochs", "1", "--steps", "2", "--baseline-steps", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header, rule, *rows = result.stdout.split("\n\nwrote")[0].splitlines()
    assert header.split() == ["model", "map@10", "recall@50", "ndcg@10", "cold_item_recall@50"]
    names = ["popularity", "itemknn", "hier", "hier_content_only", "hier_tokens"]
    assert sorted(row.split()[0] for row in [rule, *rows]) == sorted(names)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dataset"] == "synthetic_ads" and metrics["target_stage"] == "purchase"
    assert metrics["split"]["t1"] < metrics["split"]["t2"]  # ISO strings order as times
    assert list(metrics["models"]) == names
    for values in metrics["models"].values():
        assert {"map@10", "recall@50", "ndcg@10", "cold_item_recall@50"} <= set(values)
        assert 0.0 <= values["map@10"] <= 1.0
    hierarchy = metrics["hierarchy"]
    assert [set(level) for level in hierarchy["levels"]] == [{"size", "nmi", "ari", "ami"}] * 3
    assert all(0.0 < level["nmi"] <= 1.0 for level in hierarchy["levels"])  # planted truth
    assert hierarchy["token_recall@50"] == metrics["models"]["hier_tokens"]["recall@50"]
    assert -1.0 <= hierarchy["stability_ari"] <= 1.0
    assert metrics["protocol"]["training_seeds"] == 3  # the default
    assert set(metrics["models"]["hier"]["seed_sd"]) >= {"map@10", "recall@50"}
    assert len(hierarchy["training_seed_ari"]) == 3
    assert all(-1.0 <= ari <= 1.0 for ari in hierarchy["training_seed_ari"])
    for baseline in ("popularity", "itemknn"):
        low, high = metrics["versus"][baseline]["map@10"]["ci95"]
        assert low <= metrics["versus"][baseline]["map@10"]["diff"] <= high
    assert (out / "report.md").read_text().startswith("# Evaluation: synthetic_ads")


def test_evaluate_refuses_an_unknown_ablation_before_running(tmp_path: Path) -> None:
    result = hier("evaluate", str(tmp_path), "--out", str(tmp_path / "o"), "--ablations", "nope")
    assert result.returncode == 2
    assert "unknown ablations ['nope']" in result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("caps", "reason"),
    [
        (["--target-fanouts", "32"], "target_fanouts (32,) need one cap per hop"),
        (["--fanouts", "8,x"], "'8,x' is not comma-separated integers"),
    ],
)
def test_train_refuses_fanouts_it_cannot_sample_before_reading_data(
    tmp_path: Path, caps: list[str], reason: str
) -> None:
    result = hier("train", str(tmp_path / "absent"), "--out", str(tmp_path / "o"), *caps)
    assert result.returncode == 2
    assert reason in result.stderr
    assert not (tmp_path / "o").exists()


def test_evaluate_help_names_every_ablation() -> None:
    """The help is written out (importing the ablations would load torch for every command), so
    this keeps it in step with the ablations the evaluation knows."""
    from hier_pipeline.evaluation.ablations import ABLATIONS

    listed = " ".join(hier("evaluate", "--help").stdout.split())  # argparse wraps the names
    assert all(name in listed for name in ABLATIONS), sorted(set(ABLATIONS) - set(listed.split()))
