"""`hier`: the command line. Each sub-command is a thin wrapper over one core function."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from hier_pipeline.paths import default_home


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hier", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser(
        "validate", help="check a dataset folder against its dataset.yaml"
    )
    validate.add_argument("dataset_dir", type=Path)
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    validate.set_defaults(run=_validate)

    generate = commands.add_parser("generate", help="write the synthetic ads world to a folder")
    generate.add_argument("out_dir", type=Path)
    generate.add_argument("--scale", type=float, default=1.0)
    generate.add_argument("--seed", type=int, default=0)
    generate.set_defaults(run=_generate)

    train = commands.add_parser(
        "train", help="train the interest model on a dataset folder (torchrun-ready)"
    )
    train.add_argument("dataset_dir", type=Path)
    train.add_argument("--out", type=Path, required=True, help="folder for the model and run files")
    # Defaults (None) defer to TrainConfig, imported only when training: `hier validate` stays light.
    train.add_argument("--epochs", type=int)
    train.add_argument("--steps", type=int, dest="steps_per_epoch", help="steps per epoch")
    train.add_argument("--batch-size", type=int, help="global batch, split across torchrun ranks")
    train.add_argument("--seed", type=int)
    train.set_defaults(run=_train)

    where = commands.add_parser("where", help="say where the pipeline's outputs and UIs are")
    where.set_defaults(run=_where)

    arguments = parser.parse_args(argv)
    return int(arguments.run(arguments))


def _validate(arguments: argparse.Namespace) -> int:
    """Exit 0 when the description is valid (quarantined rows are reported, not an error)."""
    try:
        spec = parse_dataset(arguments.dataset_dir)
        with tempfile.TemporaryDirectory(prefix="hier-validate-") as scratch:
            report = load_dataset(spec, Path(scratch) / "validate.duckdb")
    except DatasetError as error:
        if arguments.json:
            print(json.dumps({"valid": False, "error": str(error)}))
        else:
            print(f"invalid dataset: {error}", file=sys.stderr)
        return 2
    if arguments.json:
        print(json.dumps({"valid": True, **report.to_dict()}, indent=2))
    else:
        print(f"dataset '{spec.name}' is valid\n")
        print(report.to_markdown())
    return 0


def _generate(arguments: argparse.Namespace) -> int:
    from hier_pipeline.synthetic import SyntheticConfig, generate_world

    out = generate_world(
        arguments.out_dir, SyntheticConfig(scale=arguments.scale, seed=arguments.seed)
    )
    print(f"wrote the synthetic world to {out} (scale {arguments.scale}, seed {arguments.seed})")
    return 0


def _train(arguments: argparse.Namespace) -> int:
    from hier_pipeline.model.train import TrainConfig
    from hier_pipeline.pipeline import fit

    chosen = {k: getattr(arguments, k) for k in ("epochs", "steps_per_epoch", "batch_size", "seed")}
    config = TrainConfig(**{k: v for k, v in chosen.items() if v is not None})
    result = fit(arguments.dataset_dir, arguments.out, config)
    best = result.history[result.best_epoch]
    print(
        json.dumps(
            {"best_epoch": result.best_epoch + 1, **{k: round(v, 5) for k, v in best.items()}},
            indent=2,
        )
    )
    return 0


def _where(arguments: argparse.Namespace) -> int:
    """The outputs on disk, stage by stage, and how to open the UIs."""
    home = default_home()
    print(f"pipeline outputs under {home}:")
    for stage, pattern in (
        ("raw tables", "warehouse/*.duckdb"),
        ("graphs", "graphs/*.pt"),
        ("content", "content/*.pt"),
        ("model", "models/*.pt"),
        ("embeddings", "embeddings/*.pt"),
    ):
        files = sorted(home.glob(pattern))
        listed = ", ".join(
            f"{f.relative_to(home)} ({f.stat().st_size / 1e6:.1f} MB)" for f in files
        )
        print(f"  {stage:<11} {listed or '(not materialised yet)'}")
    print(
        "\n".join(
            [
                "Dagster UI:   make dev     -> http://127.0.0.1:3000 (asset graph, metadata, check results)",
                "MLflow UI:    make mlflow  -> http://127.0.0.1:5000",
                "validate a dataset folder:  .venv/bin/hier validate DATASET_DIR",
            ]
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
