"""The evaluation report: every figure in one JSON document (the shape `hier evaluate` promises),
and the names MLflow logs them under. The page with tables and plots is `report_page.py`.

The JSON keeps the promised keys (`dataset`, `target_stage`, `split`, `models`, `hierarchy`) and
adds what a reader needs to trust them (protocol, tuned settings, user counts, timings).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from hier_pipeline.ranking.bootstrap import Difference

OURS = "hier"
HISTORY_SHARE = "history_share@50"
GATE = "popularity"  # the baseline our model must beat to be served (the release's gate)
# The served model's own score (inner product plus its history term; the view `hier_no_ranker`).
# The release serves the model and its tokens, not the evaluation's ranker, whose counts would
# carry even a randomised model past popularity: so the gates judge this row where it is scored.
SERVED = "hier_no_ranker"
HEADLINE = ("map@10", "recall@50", "ndcg@10", "cold_item_recall@50")


@dataclass(frozen=True)
class LevelScore:
    size: int
    nmi: float | None  # against the known taxonomy or planted truth; None without one
    ari: float | None
    ami: float | None = None  # NMI adjusted for chance: 0 for random labels of any granularity


@dataclass(frozen=True)
class HierarchyScores:
    levels: list[LevelScore]
    token_recall_at_50: float
    # `hier`'s recall@50: its embedding's before the ranker, its ranked row since; the key keeps
    # its name so that runs stay comparable in MLflow
    embedding_recall_at_50: float
    stability_ari: float | None  # mean over levels, between two k-means seeds
    # ARI per level between the trees of two training seeds (None with one seed)
    training_seed_ari: list[float] | None = None


@dataclass
class EvaluationReport:
    dataset: str
    target_stage: str
    t1: int  # epoch seconds: training ends, validation starts
    t2: int  # validation ends, the evaluated window starts
    end: int  # the evaluated window ends
    models: dict[str, dict[str, float]]  # name -> metric -> value (NaN: undefined)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    hierarchy: HierarchyScores | None = None
    history: list[dict[str, float]] = field(default_factory=list)  # our model, per epoch
    repeat_rate: float = math.nan
    exclude_seen: bool = False
    users: int = 0
    cold_users: int = 0
    # model -> metric -> 95% percentile interval of the mean over users (paired bootstrap)
    intervals: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    # baseline -> metric -> ours minus that baseline, with its interval
    versus: dict[str, dict[str, Difference]] = field(default_factory=dict)
    # segment (`repeat`, `explore`) -> model -> metric
    segments: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    seeds: int = 1  # training seeds of ours; its figures are their means
    seed_sd: dict[str, float] = field(default_factory=dict)  # ours: metric -> sd over seeds
    cold_users_evaluated: int = 0  # users without any interaction before t2 (`cold_users`)
    # view or trained ablation of ours -> metric -> ours (its first seed) minus it
    versus_ablations: dict[str, dict[str, Difference]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        hierarchy = None
        if self.hierarchy is not None:
            hierarchy = {
                "levels": [_finite(asdict(level)) for level in self.hierarchy.levels],
                "token_recall@50": _number(self.hierarchy.token_recall_at_50),
                "embedding_recall@50": _number(self.hierarchy.embedding_recall_at_50),
                "stability_ari": _number(self.hierarchy.stability_ari),
                "training_seed_ari": None
                if self.hierarchy.training_seed_ari is None
                else _pair(self.hierarchy.training_seed_ari),
            }
        return {
            "dataset": self.dataset,
            "target_stage": self.target_stage,
            "split": {"t1": _iso(self.t1), "t2": _iso(self.t2), "end": _iso(self.end)},
            "models": {name: self._model_json(name) for name in self.models},
            "versus": _differences_json(self.versus),
            "versus_ablations": _differences_json(self.versus_ablations),
            "segments": {
                segment: {name: _finite(metrics) for name, metrics in models.items()}
                for segment, models in self.segments.items()
            },
            "hierarchy": hierarchy,
            "settings": self.settings,
            "seconds": {name: round(value, 1) for name, value in self.seconds.items()},
            "protocol": {
                "repeat_rate": _number(self.repeat_rate),
                "already_seen_items_are_candidates": not self.exclude_seen,
                "users": self.users,
                "users_with_cold_items": self.cold_users,
                "training_seeds": self.seeds,
                "cold_users": self.cold_users_evaluated,
            },
        }

    def _model_json(self, name: str) -> dict[str, Any]:
        """The model's figures, with `ci95` (metric -> [low, high]) where intervals were drawn."""
        figures = _finite(self.models[name])
        if name in self.intervals:
            figures["ci95"] = {m: _pair(bounds) for m, bounds in self.intervals[name].items()}
        if name == OURS and self.seed_sd:
            figures["seed_sd"] = _finite(self.seed_sd)
        return figures

    def ranked(self, metric: str = "map@10") -> list[tuple[str, dict[str, float]]]:
        """(name, metrics) best first by `metric`, undefined figures last."""
        return sorted(self.models.items(), key=lambda item: -_sortable(item[1].get(metric)))

    def baselines(self) -> list[str]:
        """The compared models that are neither ours nor a variant of ours (`hier_*`)."""
        return [n for n in self.models if n != OURS and not n.startswith(f"{OURS}_")]

    def tracked_metrics(self) -> dict[str, float]:
        """Every defined figure under one MLflow name each: `eval/<model>/<metric>`,
        `eval/hierarchy/L<level>/<nmi|ari>`, `eval/hierarchy/<figure>`."""
        metrics = {
            f"eval/{name}/{metric}": value
            for name, values in self.models.items()
            for metric, value in values.items()
        }
        if self.hierarchy is not None:
            for level, score in enumerate(self.hierarchy.levels):
                metrics[f"eval/hierarchy/L{level}/nmi"] = _nan(score.nmi)
                metrics[f"eval/hierarchy/L{level}/ari"] = _nan(score.ari)
                metrics[f"eval/hierarchy/L{level}/ami"] = _nan(score.ami)
            metrics["eval/hierarchy/token_recall@50"] = self.hierarchy.token_recall_at_50
            metrics["eval/hierarchy/embedding_recall@50"] = self.hierarchy.embedding_recall_at_50
            metrics["eval/hierarchy/stability_ari"] = _nan(self.hierarchy.stability_ari)
            for level, ari in enumerate(self.hierarchy.training_seed_ari or []):
                metrics[f"eval/hierarchy/L{level}/training_seed_ari"] = ari
        for metric, sd in self.seed_sd.items():
            metrics[f"eval/{OURS}/{metric}/seed_sd"] = sd
        for baseline, differences in {**self.versus, **self.versus_ablations}.items():
            for metric, found in differences.items():
                metrics[f"eval/versus/{baseline}/{metric}/diff"] = found.diff
                metrics[f"eval/versus/{baseline}/{metric}/ci_low"] = found.low
                metrics[f"eval/versus/{baseline}/{metric}/ci_high"] = found.high
        for segment, models in self.segments.items():
            for name, values in models.items():
                for metric, value in values.items():
                    metrics[f"eval/segment/{segment}/{name}/{metric}"] = value
        return {name: value for name, value in metrics.items() if math.isfinite(value)}

    def beats(self, baseline: str, metric: str = "map@10", model: str = OURS) -> bool:
        """`model` strictly better: a tie or an undefined figure is no win."""
        return self.models[model][metric] > self.models[baseline][metric]

    def served(self) -> str:
        return served_row(self.models)


def served_row(models: Mapping[str, object]) -> str:
    """The row the release's gates judge among `models`: `SERVED` where scored, else ours."""
    return SERVED if SERVED in models else OURS


def _sortable(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else -math.inf


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _differences_json(
    versus: dict[str, dict[str, Difference]],
) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        name: {metric: _finite(found.to_json()) for metric, found in differences.items()}
        for name, differences in versus.items()
    }


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    """NaN is not JSON: undefined figures become null."""
    return {
        k: _number(v) if isinstance(v, float) else _pair(v) if isinstance(v, list) else v
        for k, v in values.items()
    }


def _pair(bounds: tuple[float, float] | list[float]) -> list[float | None]:
    return [_number(bound) for bound in bounds]


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()
