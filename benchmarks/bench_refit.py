"""A refit's assignment of every item to the serving tree's finest codes, with capacity limits:
the whole items x codes similarity matrix (`capped_argmax`, as the refit held it before) against
each item's few best codes streamed from blocks (`streamed_capped_argmax`), each in a fresh
process.

    .venv/bin/python benchmarks/bench_refit.py [--shapes 92331x3847,400000x16667]
        [--dim 448] [--capacity 3.0] [--dense-up-to 5e8] [--seed 0]

Random unit vectors around `codes` planted centres with Zipf-like sizes, so the capacity limit
binds (as on a real catalogue, whose departments are uneven); one run per shape. Each form gives
its labels' checksum, to compare them by; the dense form runs only where items x codes is at
most `--dense-up-to`. Complete Journey's shape: 92,331 items, 3,847 codes, a fused vector of 448
(64 behaviour + 384 text).
"""

from __future__ import annotations

import argparse
from typing import Any

from harness import measure, write_results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="92331x3847,400000x16667")
    parser.add_argument("--dim", type=int, default=448)
    parser.add_argument("--capacity", type=float, default=3.0)
    parser.add_argument("--dense-up-to", type=float, default=5e8)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    results = []
    for shape in arguments.shapes.split(","):
        items, codes = (int(part) for part in shape.split("x"))
        spec = f"{items},{codes},{arguments.dim},{arguments.capacity},{arguments.seed}"
        row: dict[str, Any] = {"items": items, "codes": codes, "dim": arguments.dim}
        forms = ["dense", "streamed"] if items * codes <= arguments.dense_up_to else ["streamed"]
        for form in forms:
            row[form] = measure(assign, spec, form)
            print(f"{shape} {form}: {row[form]}", flush=True)
        if "dense" in row:
            row["same_labels"] = row["dense"]["checksum"] == row["streamed"]["checksum"]
            row["wall_ratio"] = round(row["dense"]["wall_s"] / row["streamed"]["wall_s"], 2)
        results.append(row)
    write_results("refit", {"runs": results})
    return 0


def assign(spec: str, form: str) -> dict[str, Any]:
    """One form's capped assignment of the items `spec` (items, codes, dim, capacity, seed)
    describes, and a checksum of its labels."""
    import torch
    import torch.nn.functional as F

    from hier_pipeline.interests.kmeans import (
        capacity_limit,
        capped_argmax,
        streamed_capped_argmax,
    )

    items, codes, dim, capacity, seed = spec.split(",")
    count, k, width = int(items), int(codes), int(dim)
    generator = torch.Generator().manual_seed(int(seed))
    centres = F.normalize(torch.randn(k, width, generator=generator), dim=1)
    sizes = 1.0 / torch.arange(1, k + 1, dtype=torch.float64) ** 0.7
    home = torch.multinomial(sizes, count, replacement=True, generator=generator)
    noise = torch.randn(count, width, generator=generator)
    x = F.normalize(centres[home] + 0.08 * noise, dim=1)
    del noise
    centroids = F.normalize(torch.zeros(k, width).index_add_(0, home, x), dim=1)
    cap = capacity_limit(count, k, float(capacity))
    if form == "dense":
        labels = capped_argmax(x @ centroids.T, cap)
    else:
        labels = streamed_capped_argmax(x, centroids, cap)
    moved = int((labels != home).sum())  # by the capacity limit, mostly
    weights = torch.arange(count, dtype=torch.float64) % 1009
    return {"checksum": float((labels.double() * weights).sum()), "off_their_centre": moved}


if __name__ == "__main__":
    raise SystemExit(main())
