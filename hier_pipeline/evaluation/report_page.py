"""The evaluation report as files: `metrics.json`, a markdown page with tables and plots (for the
Dagster UI, the MLflow run and the README) and the plots as PNG."""

from __future__ import annotations

import base64
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path

from hier_pipeline.evaluation.report import (
    HEADLINE,
    HISTORY_SHARE,
    OURS,
    EvaluationReport,
)
from hier_pipeline.files.atomic import write_atomically
from hier_pipeline.ranking.bootstrap import Difference

RECALL_KS = (10, 50, 100)
PLOTS = {
    "recall": "recall_at_k.png",
    "cold": "warm_vs_cold.png",
    "hierarchy": "hierarchy_levels.png",
    "training": "training_curve.png",
}


def write_report(report: EvaluationReport, folder: Path) -> Path:
    """`metrics.json`, `report.md` and the plots into `folder`; returns the page's path."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / "metrics.json", json.dumps(report.to_json(), indent=2))
    for file in PLOTS.values():  # a plot of an earlier report must not pass for this one's
        (folder / file).unlink(missing_ok=True)
    for name, png in render_plots(report).items():
        write_atomically(folder / PLOTS[name], png)
    return write_atomically(folder / "report.md", render_markdown(report, folder))


def render_markdown(report: EvaluationReport, folder: Path) -> str:
    """The report page; plots are referenced by file name when they exist in `folder`."""
    columns = (*HEADLINE, *(f"recall@{k}" for k in RECALL_KS if k != 50))
    table = _table(
        ["model", *columns],
        [
            [f"**{name}**" if name == OURS else name, *(_cell(metrics.get(m)) for m in columns)]
            for name, metrics in report.ranked()
        ],
    )
    t1, t2, end = _day(report.t1), _day(report.t2), _day(report.end)
    lines = [
        f"# Evaluation: {report.dataset}",
        "",
        f"Target stage `{report.target_stage}`, full ranking over every item, on the window "
        f"[{t2}, {end}): {report.users} users with a target event there and at least one "
        f"interaction before it ({report.cold_users} of them with a cold-start item, one nobody "
        f"engaged with before {t2}). `{OURS}` was trained on the events before {t1}, early-stopped "
        f"on [{t1}, {t2}) and embeds users and items as of {t2} without retraining; `{OURS}_*` "
        "rows are its ablations and its token retrieval. Baselines were tuned on a window of the "
        f"same length before {t2} and refit on everything before it. Items a user already engaged "
        f"with are {'excluded' if report.exclude_seen else 'kept as candidates'} (repeat rate "
        f"{_cell(report.repeat_rate)}).",
        "",
        "## Target-stage retrieval",
        "",
        table,
        "",
        *_seeds(report),
        *_verdict(report),
        *_uncertainty(report),
        *_segments(report),
        *_image(folder, "recall", "Recall@K"),
        *_image(folder, "cold", "Warm vs cold-start items"),
    ]
    if report.hierarchy is not None:
        hierarchy = report.hierarchy
        lines += [
            "## Interest hierarchy",
            "",
            _table(
                ["level", "primitives", "NMI", "AMI", "ARI"],
                [
                    [str(i), str(level.size), _cell(level.nmi), _cell(level.ami), _cell(level.ari)]
                    for i, level in enumerate(hierarchy.levels)
                ],
            ),
            "",
            f"Token retrieval recall@50 {_cell(hierarchy.token_recall_at_50)} against "
            f"{_cell(hierarchy.embedding_recall_at_50)} by `hier`'s ranking; stability (ARI across "
            f"k-means seeds) {_cell(hierarchy.stability_ari)}; ARI between the trees of two "
            f"training seeds per level: {_seed_ari(hierarchy.training_seed_ari)}.",
            "",
            *_image(folder, "hierarchy", "Agreement per level"),
        ]
    if report.history:
        lines += ["## Training", "", *_image(folder, "training", "Loss and validation MAP@10")]
    if report.settings:
        lines += [
            "## Settings (tuned on the validation window)",
            "",
            _table(
                ["model", "setting", "seconds"],
                [
                    [name, json.dumps(setting), _cell(report.seconds.get(name), 0)]
                    for name, setting in report.settings.items()
                ],
            ),
            "",
        ]
    return "\n".join(lines)


def inline_images(markdown: str, folder: Path) -> str:
    """The same page with every `![..](file.png)` embedded as a data URI (for the Dagster UI,
    which cannot read files next to the report)."""

    def embed(match: re.Match[str]) -> str:
        data = base64.b64encode((folder / match.group(2)).read_bytes()).decode()
        return f"![{match.group(1)}](data:image/png;base64,{data})"

    return re.sub(r"!\[([^\]]*)\]\(([^)]+\.png)\)", embed, markdown)


def render_plots(report: EvaluationReport) -> dict[str, bytes]:
    """PNG bytes per plot name (see PLOTS); plots without data are left out."""
    from hier_pipeline.evaluation.plots import (
        bar_chart,
        hierarchy_chart,
        recall_curves,
        training_curves,
    )

    plots = {"recall": recall_curves(report.models, RECALL_KS, highlight=OURS)}
    cold = {
        name: (m.get("recall@50", math.nan), m.get("cold_item_recall@50", math.nan))
        for name, m in report.models.items()
    }
    if any(math.isfinite(c) for _, c in cold.values()):
        plots["cold"] = bar_chart(cold, ("warm recall@50", "cold-item recall@50"), OURS)
    if report.hierarchy is not None:
        plots["hierarchy"] = hierarchy_chart(report.hierarchy.levels)
    if report.history:
        plots["training"] = training_curves(report.history)
    return plots


def _verdict(report: EvaluationReport) -> list[str]:
    if OURS not in report.models:
        return []
    lost = [n for n in report.baselines() if not report.beats(n)]
    if not lost:
        return [f"`{OURS}` beats every baseline on MAP@10.", ""]
    return [f"`{OURS}` does **not** beat these baselines on MAP@10: {', '.join(lost)}.", ""]


def _uncertainty(report: EvaluationReport) -> list[str]:
    """Ours minus each baseline, and its first seed minus each of its ablations, with paired 95%
    intervals: a win only where the interval excludes 0."""
    lines = _differences(
        report.versus,
        "baseline",
        f"`{OURS}` minus each baseline over the same users, with a 95% paired bootstrap interval"
        " (an interval that crosses 0 is a tie):",
    )
    return lines + _differences(
        report.versus_ablations,
        "ablation",
        f"`{OURS}` (its first seed) minus each of its views and trained ablations (the same"
        " seed): what the part an ablation leaves out, or the option it switches on, changes.",
    )


def _differences(versus: dict[str, dict[str, Difference]], kind: str, title: str) -> list[str]:
    if not versus:
        return []
    metrics = sorted({m for differences in versus.values() for m in differences})
    rows = [
        [name, *(_difference(differences.get(m)) for m in metrics)]
        for name, differences in versus.items()
    ]
    return [title, "", _table([kind, *metrics], rows), ""]


def _seeds(report: EvaluationReport) -> list[str]:
    if report.seeds < 2:
        return [f"`{OURS}` was trained once (one seed): its figures carry no seed spread.", ""]
    spread = ", ".join(f"{m} {_cell(report.seed_sd.get(m))}" for m in ("map@10", "recall@50"))
    return [f"`{OURS}`: the mean of {report.seeds} training seeds (sd over seeds: {spread}).", ""]


def _difference(found: Difference | None) -> str:
    if found is None or not math.isfinite(found.diff):
        return "-"
    verdict = "win" if found.low > 0 else "loss" if found.high < 0 else "tie"
    return f"{found.diff:+.4f} [{found.low:+.4f}, {found.high:+.4f}] {verdict}"


def _segments(report: EvaluationReport) -> list[str]:
    """Every segment's figures side by side, one row per model that has any."""
    if not report.segments:
        return []
    columns = [
        (segment, metric)
        for segment, models in report.segments.items()
        for metric in sorted({m for figures in models.values() for m in figures})
    ]
    names = [n for n in report.models if any(n in models for models in report.segments.values())]
    rows = [
        [
            name,
            *(_cell(report.segments[s].get(name, {}).get(m)) for s, m in columns),
            _cell(report.models[name].get(HISTORY_SHARE)),
        ]
        for name in names
    ]
    return [
        "By segment: positives the user had engaged with before the window (repeat) and new ones"
        f" (explore); warm users, the {report.cold_users_evaluated} cold users (no interaction"
        " before the window: ours embeds them from their own rows, a baseline serves them its"
        " popularity list) and all of them; history share is the part of the top 50 taken from"
        " the user's own history.",
        "",
        _table(["model", *(f"{s} {m}" for s, m in columns), HISTORY_SHARE], rows),
        "",
    ]


def _seed_ari(values: list[float] | None) -> str:
    return "- (one seed)" if values is None else " / ".join(_cell(v, 3) for v in values)


def _image(folder: Path, name: str, title: str) -> list[str]:
    file = PLOTS[name]
    return [f"![{title}]({file})", ""] if (folder / file).is_file() else []


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: float | None, digits: int = 4) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _day(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")
