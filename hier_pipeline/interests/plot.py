"""A 2-D map of the primitives: where the interests sit relative to each other, for the UI."""

from __future__ import annotations

import io

import torch

from hier_pipeline.interests.hierarchy import InterestHierarchy

MARKERS = "*^o."  # level 0, 1, 2, deeper


def primitive_map(hierarchy: InterestHierarchy, labels: list[str]) -> bytes:
    """PNG: every primitive projected on the first two principal axes of the finest centroids,
    coloured by its level-0 ancestor, sized by its items, joined to its parent; level-0
    primitives named by their token and label."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    finest = hierarchy.centroids[hierarchy.level(hierarchy.levels - 1)]
    mean = finest.mean(dim=0)
    _, _, axes = torch.linalg.svd(finest - mean, full_matrices=False)
    points = ((hierarchy.centroids - mean) @ axes[:2].T).numpy()
    root = torch.arange(len(hierarchy.parent))
    for _ in range(hierarchy.levels - 1):
        root = torch.where(hierarchy.parent[root] >= 0, hierarchy.parent[root], root)
    level, size = hierarchy.level_of(), hierarchy.sizes().double()
    figure = Figure(figsize=(7, 6), dpi=90)
    FigureCanvasAgg(figure)
    plot = figure.add_subplot()
    colours = root.numpy() % 20
    child = (hierarchy.parent >= 0).nonzero().flatten()
    edges = [
        [points[int(hierarchy.parent[c])], points[int(c)]] for c in child.tolist()
    ]  # the tree: each primitive joined to its parent
    plot.add_collection(LineCollection(edges, colors="grey", linewidths=0.4, alpha=0.5))
    for depth in reversed(range(hierarchy.levels)):
        at = (level == depth).numpy()
        plot.scatter(
            points[at, 0],
            points[at, 1],
            s=(8 + 30 * size[at].sqrt() / size.sqrt().max() * (hierarchy.levels - depth)).numpy(),
            c=colours[at],
            cmap="tab20",
            vmin=0,
            vmax=19,
            marker=MARKERS[min(depth, len(MARKERS) - 1)],
            alpha=0.5 if depth else 0.9,
            edgecolors="black" if depth == 0 else "none",
            label=f"level {depth}",
        )
    for t in range(hierarchy.offsets[1]):
        plot.annotate(
            f"{hierarchy.token_ids[t]} {labels[t]}", points[t], fontsize=7, ha="center", va="bottom"
        )
    plot.set_title("interest primitives (PCA of the finest centroids)")
    plot.set_xticks([])
    plot.set_yticks([])
    plot.legend(loc="lower right", fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()
