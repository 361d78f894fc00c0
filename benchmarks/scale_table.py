"""The scale benchmark's tables: per stage and dataset, how it grows with events, and the peers."""

from __future__ import annotations

from typing import Any

import numpy as np

# stage -> what its throughput counts
STAGES = {
    "generate": "rows generated",
    "load": "rows loaded",
    "graph": "nodes+edges built",
    "texts": "texts embedded",
    "images": "images embedded",
    "sample": "seeds sampled",
    "train": "training edges",
    "infer": "entities embedded",
    "hierarchy": "items clustered",
    "tokens": "tokens assigned",
}
METRICS = ("wall_s", "cpu_s", "peak_rss_gb", "per_s", "per_cpu_s")


def summarise(row: dict[str, Any]) -> dict[str, Any]:
    """A step's result with its throughput; a sampled images step extrapolated to all images
    (the encoder's cost per image does not depend on the world: a straight line is fair)."""
    out = dict(
        row,
        per_s=row["count"] / row["work_s"] if row["work_s"] else float("nan"),
        per_cpu_s=row["count"] / row["work_cpu_s"] if row["work_cpu_s"] else float("nan"),
    )
    if row.get("sampled"):
        factor = row["with_image"] / row["sampled"]
        out |= {"wall_s": row["wall_s"] * factor, "cpu_s": row["cpu_s"] * factor}
        out["extrapolated"] = True
    return out


def slopes(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per stage and metric, the slope of log(metric) on log(events) over the synthetic scales
    measured in full (1: linear in events, 0: flat); None with fewer than two such scales."""
    out: dict[str, dict[str, float | None]] = {}
    for stage in STAGES:
        measured = [
            (run["stages"]["graph"]["events"], summarise(run["stages"][stage]))
            for run in runs.values()
            if run["scale"] and {"graph", stage} <= run["stages"].keys()
        ]
        measured = [(e, row) for e, row in measured if not row.get("extrapolated")]
        out[stage] = {
            metric: _slope([e for e, _ in measured], [row[metric] for _, row in measured])
            for metric in METRICS
        }
    return out


def _slope(x: list[float], y: list[float]) -> float | None:
    if len(x) < 2 or min(y) <= 0:
        return None
    return round(float(np.polyfit(np.log(x), np.log(y), 1)[0]), 2)


def markdown(results: dict[str, Any]) -> str:
    runs = results["runs"]
    lines = [
        f"Scale benchmark, {results['date']}, commit {results['commit']}: {results['machine']}. "
        "Each stage runs in a fresh process that reads what the stage before it wrote (as an "
        "asset does); wall and CPU time are that process's, imports excluded; throughput is "
        "over the stage's own work (train: the optimisation steps, setup excluded), per second "
        "of wall time and per second of the process's CPU time (the steadier of the two when "
        "other processes share the core: see the load averages in scale.json). "
        f"Every process starts at {_baseline(runs)} GB resident (imports alone). "
        f"Training: {results['train_steps']} steps of {results['batch_size']} positives. "
        "`~`: images embedded for a sample, time extrapolated to all of them.",
        *_other_provenance(results),
        "",
        "| stage | dataset | events | wall s | CPU s | peak RSS GB | throughput /s | per CPU s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for stage, unit in STAGES.items():
        for name, run in runs.items():
            if not {"graph", stage} <= run["stages"].keys():
                continue
            row = summarise(run["stages"][stage])
            mark = "~" if row.get("extrapolated") else ""
            lines.append(
                f"| {stage} | {name} | {run['stages']['graph']['events']:,} "
                f"| {mark}{row['wall_s']:,.1f} | {mark}{row['cpu_s']:,.1f} "
                f"| {row['peak_rss_gb']:.2f} | {row['per_s']:,.0f} {unit} "
                f"| {row['per_cpu_s']:,.0f} |"
            )
    lines += [
        "",
        "Growth with scale: slope of log(metric) on log(events) over the synthetic scales "
        "(1 = linear, 0 = flat; train runs a fixed number of steps, so its wall should be flat).",
        "",
        "| stage | wall | CPU | peak RSS | throughput | per CPU s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for stage, row in results["slopes"].items():
        cells = " | ".join("-" if row[m] is None else f"{row[m]:.2f}" for m in METRICS)
        lines.append(f"| {stage} | {cells} |")
    lines += ["", *_peers(results["peers"])]
    return "\n".join(lines) + "\n"


def _other_provenance(results: dict[str, Any]) -> list[str]:
    """A line per dataset measured in another run (`bench_scale.py --add`)."""
    lines = [
        f"`{name}` was measured in another run: {run['date']}, commit {run['commit']}."
        for name, run in results["runs"].items()
        if run.get("commit", results["commit"]) != results["commit"]
    ]
    return ["", *lines] if lines else []


def peer_ratios(run: dict[str, Any]) -> dict[str, float]:
    """Ours against the peers measured in the same run on the same data ({} if one is missing),
    in CPU seconds: the peers run minutes apart, and another job on the core in between would
    stretch one's wall time only. An epoch is one pass over each model's own training set: our
    and HGTConv's events before t1, LightGCN's distinct (user, item) pairs, extrapolated from
    the steps timed (all of LightGCN's epoch when it has at most 40)."""
    s = run["stages"]
    if not {"train", "hgt", "lightgcn", "text_peer"} <= s.keys():
        return {}
    ours, hgt, light, text = s["train"], s["hgt"], s["lightgcn"], s["text_peer"]
    ours_step, hgt_step = ours["work_cpu_s"] / ours["steps"], hgt["work_cpu_s"] / hgt["steps"]
    return {
        "ours_cpu_s_per_step": round(ours_step, 3),
        "hgt_cpu_s_per_step": round(hgt_step, 3),
        "ours_over_hgt_step": round(ours_step / hgt_step, 3),
        "ours_epoch_cpu_s": round(ours["work_cpu_s"] * ours["train_events"] / ours["count"]),
        "hgt_epoch_cpu_s": round(hgt["work_cpu_s"] * hgt["train_events"] / hgt["count"]),
        "lightgcn_epoch_cpu_s": round(
            light["work_cpu_s"] * light["epoch_steps"] / light["steps"], 1
        ),
        "lightgcn_epoch_extrapolated": light["steps"] < light["epoch_steps"],
        "ours_texts_per_s": text["ours_per_s"],
        "st_texts_per_s": text["sentence_transformers_per_s"],
        "ours_over_st_texts": round(text["ours_per_s"] / text["sentence_transformers_per_s"], 3),
    }


def _baseline(runs: dict[str, dict[str, Any]]) -> str:
    rss = [r["stages"]["imports_only"]["peak_rss_gb"] for r in runs.values() if r["stages"]]
    return f"{min(rss):.2f}" if rss else "?"


def _peers(peers: dict[str, dict[str, float]]) -> list[str]:
    lines = [
        "Peers, same run and data, in CPU seconds: a step and an epoch (one pass over the "
        "training events before t1, from the fixed steps) of ours and PyG HGTConv; PyG "
        "LightGCN's epoch (one pass over the distinct training (user, item) pairs; `~`: "
        "extrapolated from its first 40 steps); texts/s (best wall-clock round of 2) of our "
        "encoder and `SentenceTransformer.encode` with its defaults, same model, on the "
        "dataset's item texts.",
        "",
        "| dataset | ours s/step | HGTConv s/step | ours / HGTConv | ours epoch | "
        "HGTConv epoch | LightGCN epoch | ours texts/s | ST texts/s | ours / ST |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, p in peers.items():
        if p:
            lines.append(
                f"| {name} | {p['ours_cpu_s_per_step']:.2f} | {p['hgt_cpu_s_per_step']:.2f} "
                f"| {p['ours_over_hgt_step']:.2f} | {p['ours_epoch_cpu_s']:,.0f} "
                f"| {p['hgt_epoch_cpu_s']:,.0f} "
                f"| {'~' if p['lightgcn_epoch_extrapolated'] else ''}"
                f"{p['lightgcn_epoch_cpu_s']:,.1f} "
                f"| {p['ours_texts_per_s']:,.0f} | {p['st_texts_per_s']:,.0f} "
                f"| {p['ours_over_st_texts']:.2f} |"
            )
    return lines
