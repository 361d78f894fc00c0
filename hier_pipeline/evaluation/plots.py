"""The report's plots as PNG bytes (matplotlib's Agg canvas: no display, no global pyplot state)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class LevelAgreement(Protocol):
    """One level of a tree against the truth (the report's `LevelScore`); charts stay below the
    report, which draws them."""

    @property
    def size(self) -> int: ...
    @property
    def nmi(self) -> float | None: ...
    @property
    def ari(self) -> float | None: ...


# Black: not in the default colour cycle, so no other model shares our line colour.
OURS_COLOUR = "#000000"


def recall_curves(
    models: Mapping[str, Mapping[str, float]], ks: Sequence[int], highlight: str
) -> bytes:
    """Recall@K against K, one line per model, ours drawn bold."""
    figure, plot = _figure()
    for name, metrics in models.items():
        values = [metrics.get(f"recall@{k}", math.nan) for k in ks]
        ours = name == highlight
        plot.plot(
            ks,
            values,
            marker="o",
            linewidth=3 if ours else 1,
            color=OURS_COLOUR if ours else None,
            label=name,
        )
    plot.set_xlabel("K")
    plot.set_ylabel("recall@K (target stage)")
    plot.set_xscale("log")
    plot.legend(fontsize=7, ncol=2)
    return _png(figure)


def bar_chart(
    values: Mapping[str, tuple[float, float]], series: tuple[str, str], highlight: str
) -> bytes:
    """Two bars per model (e.g. warm and cold recall), models side by side."""
    figure, plot = _figure()
    names = list(values)
    width = 0.4
    for offset, (column, label) in zip((-width / 2, width / 2), enumerate(series), strict=True):
        heights = [_zero(values[n][column]) for n in names]
        plot.bar([i + offset for i in range(len(names))], heights, width, label=label)
    plot.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
    for tick, name in zip(plot.get_xticklabels(), names, strict=True):
        if name == highlight:
            tick.set_color(OURS_COLOUR)
            tick.set_fontweight("bold")
    plot.legend(fontsize=7)
    return _png(figure)


def hierarchy_chart(levels: Sequence[LevelAgreement]) -> bytes:
    """NMI and ARI per level, coarse to fine, labelled with each level's primitive count."""
    figure, plot = _figure()
    positions = range(len(levels))
    plot.plot(positions, [_zero(level.nmi) for level in levels], marker="o", label="NMI")
    plot.plot(positions, [_zero(level.ari) for level in levels], marker="s", label="ARI")
    plot.set_xticks(positions, [f"L{i} ({level.size})" for i, level in enumerate(levels)])
    plot.set_ylim(0, 1)
    plot.legend(fontsize=7)
    return _png(figure)


def training_curves(history: Sequence[Mapping[str, float]]) -> bytes:
    """Total loss (left axis) and validation MAP@10 (right axis) per epoch."""
    figure, plot = _figure()
    epochs = range(1, len(history) + 1)
    plot.plot(epochs, [h["loss/total"] for h in history], marker="o", color="#1f77b4")
    plot.set_xlabel("epoch")
    plot.set_ylabel("training loss", color="#1f77b4")
    metric = plot.twinx()
    metric.plot(epochs, [h["val/map@10"] for h in history], marker="s", color=OURS_COLOUR)
    metric.set_ylabel("validation MAP@10", color=OURS_COLOUR)
    return _png(figure)


def _figure() -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.0), dpi=90)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _png(figure: Figure) -> bytes:
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _zero(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0
