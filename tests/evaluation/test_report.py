"""The report renders every section from its figures, and its JSON keeps the promised shape."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

from hier_pipeline.evaluation.report import EvaluationReport, HierarchyScores, LevelScore
from hier_pipeline.evaluation.report_page import PLOTS, inline_images, write_report
from hier_pipeline.ranking.bootstrap import Difference

DAY = 86_400


def metrics(map10: float, cold: float = math.nan) -> dict[str, float]:
    return {
        "recall@10": 2 * map10,
        "recall@50": 3 * map10,
        "recall@100": 4 * map10,
        "ndcg@10": 1.5 * map10,
        "map@10": map10,
        "cold_item_recall@50": cold,
    }


def report(hierarchy: bool = True, history: bool = True) -> EvaluationReport:
    return EvaluationReport(
        dataset="toy",
        target_stage="purchase",
        t1=100 * DAY,
        t2=120 * DAY,
        end=140 * DAY,
        models={
            "popularity": metrics(0.02),
            "graphsage": metrics(0.09, cold=0.01),
            "hier": metrics(0.05, cold=0.04),
            "hier_no_bias": metrics(0.03, cold=0.02),
        },
        settings={"popularity": {"window_days": 7.0}, "graphsage": {"temperature": 0.1}},
        seconds={"popularity": 0.4, "graphsage": 31.0, "hier": 2.0, "hier_no_bias": 2.1},
        hierarchy=HierarchyScores(
            [
                LevelScore(8, 0.9, 0.8, 0.85),
                LevelScore(32, 0.7, math.nan),
                LevelScore(128, None, None),
            ],
            token_recall_at_50=0.11,
            embedding_recall_at_50=0.15,
            stability_ari=None,
        )
        if hierarchy
        else None,
        history=[
            {"loss/total": 3.0, "val/map@10": 0.01},
            {"loss/total": 2.5, "val/map@10": 0.04},
        ]
        if history
        else [],
        repeat_rate=0.01,
        exclude_seen=True,
        users=250,
        cold_users=40,
        intervals={"hier": {"map@10": (0.04, 0.06)}, "popularity": {"map@10": (0.01, math.nan)}},
        versus={
            "popularity": {"map@10": Difference(0.03, 0.01, 0.05)},
            "graphsage": {"map@10": Difference(-0.04, -0.07, 0.002)},
        },
        segments={
            "repeat": {"hier": {"recall@50": 0.5}, "popularity": {"recall@50": 0.2}},
            "explore": {"hier": {"recall@50": math.nan}, "popularity": {"recall@50": 0.1}},
        },
        versus_ablations={"hier_no_ranker": {"map@10": Difference(0.01, 0.004, 0.02)}},
    )


def test_json_has_the_promised_shape_with_null_for_undefined(tmp_path: Path) -> None:
    write_report(report(), tmp_path)
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["dataset"] == "toy" and written["target_stage"] == "purchase"
    assert written["split"] == {
        "t1": "1970-04-11T00:00:00+00:00",
        "t2": "1970-05-01T00:00:00+00:00",
        "end": "1970-05-21T00:00:00+00:00",
    }
    assert set(written["models"]) == {"popularity", "graphsage", "hier", "hier_no_bias"}
    assert written["models"]["hier"]["map@10"] == 0.05
    assert written["models"]["popularity"]["cold_item_recall@50"] is None  # NaN is not JSON
    hierarchy = written["hierarchy"]
    assert hierarchy["levels"][0] == {"size": 8, "nmi": 0.9, "ari": 0.8, "ami": 0.85}
    assert hierarchy["levels"][1]["ari"] is None and hierarchy["levels"][2]["nmi"] is None
    assert hierarchy["token_recall@50"] == 0.11 and hierarchy["stability_ari"] is None
    assert written["protocol"]["already_seen_items_are_candidates"] is False
    assert written["models"]["hier"]["ci95"] == {"map@10": [0.04, 0.06]}
    assert written["models"]["popularity"]["ci95"] == {"map@10": [0.01, None]}
    assert "ci95" not in written["models"]["graphsage"]
    assert written["versus"]["popularity"]["map@10"] == {"diff": 0.03, "ci95": [0.01, 0.05]}
    assert written["versus_ablations"]["hier_no_ranker"]["map@10"]["ci95"] == [0.004, 0.02]
    assert written["segments"]["explore"]["hier"]["recall@50"] is None
    assert written["segments"]["repeat"]["popularity"]["recall@50"] == 0.2


def test_markdown_has_every_section_and_its_plots(tmp_path: Path) -> None:
    page = write_report(report(), tmp_path).read_text()
    for heading in (
        "# Evaluation: toy",
        "## Target-stage retrieval",
        "## Interest hierarchy",
        "## Training",
        "## Settings (tuned on the validation window)",
    ):
        assert heading in page, heading
    table = page.split("## Target-stage retrieval")[1].split("\n\n")[1]
    rows = [line.split(" | ")[0].strip("| *") for line in table.splitlines()[2:]]
    assert rows == ["graphsage", "hier", "hier_no_bias", "popularity"]  # best MAP@10 first
    assert (
        "`hier` does **not** beat these baselines on MAP@10: graphsage." in page
    )  # ablations are not rivals
    assert "| 1 | 32 | 0.7000 | - |" in page
    assert "| popularity | +0.0300 [+0.0100, +0.0500] win |" in page
    assert "| graphsage | -0.0400 [-0.0700, +0.0020] tie |" in page  # the interval crosses 0
    # a table of its own, after the baselines'
    ablations = page.split("minus each of its views and trained ablations")[1]
    assert (
        "| ablation | map@10 |" in ablations
        and "| hier_no_ranker | +0.0100 [+0.0040, +0.0200] win |" in ablations
    )
    assert "| hier | 0.5000 | - |" in page  # repeat and explore recall@50
    linked = set(re.findall(r"\]\(([^)]+\.png)\)", page))
    assert linked == set(PLOTS.values())
    for name in linked:
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")


def test_inline_images_embeds_every_plot(tmp_path: Path) -> None:
    page = write_report(report(), tmp_path).read_text()
    inlined = inline_images(page, tmp_path)
    uris = re.findall(r"\(data:image/png;base64,([^)]+)\)", inlined)
    assert len(uris) == len(PLOTS)
    assert all(base64.b64decode(uri).startswith(b"\x89PNG") for uri in uris)
    assert ".png)" not in inlined


def test_sections_without_figures_are_left_out(tmp_path: Path) -> None:
    write_report(report(), tmp_path)  # an earlier report with every plot, in the same folder
    page = write_report(report(hierarchy=False, history=False), tmp_path).read_text()
    assert "## Interest hierarchy" not in page and "## Training" not in page
    assert not (tmp_path / PLOTS["hierarchy"]).exists()
    assert not (tmp_path / PLOTS["training"]).exists()
    assert json.loads((tmp_path / "metrics.json").read_text())["hierarchy"] is None


def test_tracked_metrics_name_every_defined_figure_once() -> None:
    tracked = report().tracked_metrics()
    assert tracked["eval/hier/map@10"] == 0.05
    assert tracked["eval/hierarchy/L0/nmi"] == 0.9
    assert tracked["eval/hierarchy/token_recall@50"] == 0.11
    assert "eval/popularity/cold_item_recall@50" not in tracked  # NaN: not logged
    assert "eval/hierarchy/L1/ari" not in tracked and "eval/hierarchy/stability_ari" not in tracked
    assert tracked["eval/hierarchy/L0/ami"] == 0.85
    assert tracked["eval/versus/popularity/map@10/ci_low"] == 0.01
    assert tracked["eval/versus/hier_no_ranker/map@10/ci_high"] == 0.02
    assert tracked["eval/segment/repeat/hier/recall@50"] == 0.5
    assert "eval/segment/explore/hier/recall@50" not in tracked  # NaN
    # models x metrics - NaN, L0 nmi/ari/ami, L1 nmi, recalls, 2 baselines and 1 view x (diff,
    # low, high), the finite segment recalls
    assert len(tracked) == 4 * 6 - 1 + 4 + 2 + 3 * 3 + 3


def test_beats_is_strict_and_ignores_our_variants() -> None:
    evaluated = report()
    assert evaluated.baselines() == ["popularity", "graphsage"]
    assert evaluated.beats("popularity") and not evaluated.beats("graphsage")
    evaluated.models["popularity"]["map@10"] = 0.05
    assert not evaluated.beats("popularity")  # a tie is no win
