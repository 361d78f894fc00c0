"""`hier`: the command line. Each sub-command is a thin wrapper over one core function."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hier_pipeline.cli_interests import add_interest_queries, text_table
from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import with_batches
from hier_pipeline.files.home import default_home

if TYPE_CHECKING:
    from hier_pipeline.model.train_config import TrainConfig


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

    arrive = commands.add_parser(
        "generate-batch",
        help="write a batch of new advertisers, products and first events to DIR/incoming/",
    )
    arrive.add_argument("dataset_dir", type=Path, help="a world written by `hier generate`")
    arrive.add_argument("--name", help="batch name (default: batchNNNN, the next number)")
    arrive.add_argument(
        "--fraction", type=float, default=0.01, help="new products per product already there"
    )
    arrive.add_argument("--seed", type=int, default=0)
    arrive.set_defaults(run=_generate_batch)

    worker = commands.add_parser(
        "arrivals",
        help="stay up and fit each new batch of incoming/ into the served model and tokens",
    )
    worker.add_argument("dataset_dir", type=Path)
    worker.add_argument("--poll", type=float, default=5.0, help="seconds between looks")
    worker.add_argument("--once", action="store_true", help="fit the pending batches and exit")
    worker.set_defaults(run=_arrivals)

    train = commands.add_parser(
        "train", help="train the interest model on a dataset folder (torchrun-ready)"
    )
    train.add_argument("dataset_dir", type=Path)
    train.add_argument("--out", type=Path, required=True, help="folder for the model and run files")
    _add_training_knobs(train)
    train.set_defaults(run=_train)

    _add_evaluate(commands)

    where = commands.add_parser("where", help="say where the pipeline's outputs and UIs are")
    where.set_defaults(run=_where)

    add_interest_queries(commands)

    arguments = parser.parse_args(argv)
    return int(arguments.run(arguments))


def _validate(arguments: argparse.Namespace) -> int:
    """Exit 0 when the description is valid (quarantined rows are reported, not an error).

    The batches in `incoming/` are read after their tables' files, as a full run reads them, so
    the answer is the pipeline's. The database is a scratch one, deleted before the report is
    printed, so the report does not name it."""
    try:
        spec = with_batches(parse_dataset(arguments.dataset_dir))
        with tempfile.TemporaryDirectory(prefix="hier-validate-") as scratch:
            report = load_dataset(spec, Path(scratch) / "validate.duckdb")
    except DatasetError as error:
        if arguments.json:
            print(json.dumps({"valid": False, "error": str(error)}))
        else:
            print(f"invalid dataset: {error}", file=sys.stderr)
        return 2
    if arguments.json:
        summary = {key: value for key, value in report.to_dict().items() if key != "database"}
        print(json.dumps({"valid": True, **summary}, indent=2))
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


def _generate_batch(arguments: argparse.Namespace) -> int:
    from hier_pipeline.synthetic.arrivals import BatchConfig, generate_batch

    config = BatchConfig(products_fraction=arguments.fraction, seed=arguments.seed)
    print(generate_batch(arguments.dataset_dir, arguments.name, config))
    return 0


def _arrivals(arguments: argparse.Namespace) -> int:
    """The resident worker over the pipeline's outputs in $HIER_HOME: one line per batch."""
    from hier_pipeline.incremental.worker import home_worker

    worker = home_worker(parse_dataset(arguments.dataset_dir), default_home())
    worker.warm_up()
    print(f"waiting for batches after {worker.after or 'none'}", flush=True)
    for update in worker.serve(
        arguments.poll, stop=lambda: arguments.once and not worker.pending()
    ):
        quarantined = sum(t.quarantined for t in update.load.tables.values())
        print(
            f"{update.batch}: new {update.entities}, embedded again {update.refreshed},"
            f" bags placed by {update.placed_by},"
            f" {quarantined} rows quarantined, {sum(update.seconds.values()):.1f} s",
            flush=True,
        )
    return 0


def _train(arguments: argparse.Namespace) -> int:
    """Exit 2 with the reason when the training device is not on this machine."""
    from hier_pipeline.pipeline.fit import fit

    try:
        config = _train_config(arguments)
    except ValueError as error:
        print(f"hier train: {error}", file=sys.stderr)
        return 2
    trained = fit(arguments.dataset_dir, arguments.out, config)
    result = trained.result
    best = result.history[result.best_epoch]
    popularity = {f"popularity/{k}": round(v, 5) for k, v in trained.popularity.items()}
    rounded = {k: round(v, 5) for k, v in best.items()}
    print(json.dumps({"best_epoch": result.best_epoch + 1, **rounded, **popularity}, indent=2))
    return 0


def _add_evaluate(commands: argparse._SubParsersAction) -> None:
    """`hier evaluate`: the pipeline, our model, its ablations and the baselines on one dataset."""
    evaluate = commands.add_parser(
        "evaluate",
        help="run the pipeline on a dataset folder and compare the model with the baselines",
    )
    evaluate.add_argument("dataset_dir", type=Path)
    evaluate.add_argument(
        "--out", type=Path, required=True, help="folder for metrics.json, report.md and plots"
    )
    evaluate.add_argument(
        "--ablations",
        type=_names,
        help="comma-separated ablations to train and score, or 'none' (default: all: "
        "hier_no_bias, hier_no_primitives, hier_no_distill, hier_no_history, "
        "hier_explore_embedding, hier_target_fanouts, hier_temporal_messages, and the views: "
        "hier_content_only, hier_no_ranker, hier_ranker_no_embedding, hier_ranker_no_tokens, "
        "hier_ranker_no_token_shares, hier_ranker_no_content, hier_ranker_no_content_view, "
        "hier_ranker_no_paths, hier_ranker_no_representation, hier_counts_only, "
        "hier_ranker_no_cold_items, hier_ranker_no_listing, hier_ranker_content_popularity, "
        "hier_ranker_new_item_candidates)",
    )
    evaluate.add_argument(
        "--baselines", type=_names, help="comma-separated baselines (default: all)"
    )
    evaluate.add_argument("--max-users", type=int, help="evaluated users (default 5000)")
    evaluate.add_argument(
        "--seeds", type=int, help="trainings of our model, seed, seed + 1, ... (default 3)"
    )
    evaluate.add_argument(
        "--baseline-steps", type=int, help="step budget of a trained baseline (its longest fit)"
    )
    evaluate.add_argument(
        "--baseline-workers",
        type=int,
        help="processes the baselines are tuned in side by side, one thread each (default 2;"
        " 1: one after another, on every torch thread)",
    )
    _add_training_knobs(evaluate)  # of our model and its trained ablations
    evaluate.set_defaults(run=_evaluate)


def _add_training_knobs(parser: argparse.ArgumentParser) -> None:
    """The `TrainConfig` fields `hier train` and `hier evaluate` set. Defaults (None) defer to
    TrainConfig, imported only when training: `hier validate` stays light."""
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--steps", type=int, dest="steps_per_epoch", help="steps per epoch")
    parser.add_argument("--batch-size", type=int, help="global batch, split across torchrun ranks")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--fanouts", type=_caps, help="neighbours drawn per hop, e.g. 8,4")
    parser.add_argument(
        "--target-fanouts",
        type=_caps,
        help="the target stage's edges drawn apart, these per hop, e.g. 32,4 (default: not apart)",
    )
    parser.add_argument(
        "--device", help="where the model trains: auto (a GPU when CUDA is present), cpu, cuda[:N]"
    )
    parser.add_argument(
        "--amp",
        action="store_true",
        default=None,
        help="bfloat16 autocast of the training steps on a GPU",
    )


def _train_config(arguments: argparse.Namespace) -> TrainConfig:
    """The config the knobs ask for; a ValueError, before any data is read, when its device is
    not on this machine or its fanouts do not match."""
    from hier_pipeline.model.device import resolve_device
    from hier_pipeline.model.train_config import TrainConfig

    knobs = (
        "epochs",
        "steps_per_epoch",
        "batch_size",
        "seed",
        "fanouts",
        "target_fanouts",
        "device",
        "amp",
    )
    chosen = {k: getattr(arguments, k) for k in knobs}
    config = TrainConfig(**{k: v for k, v in chosen.items() if v is not None})
    resolve_device(config.device, config.deterministic)
    return config


def _caps(value: str) -> tuple[int, ...]:
    """Caps per hop: "8,4" -> (8, 4)."""
    try:
        return tuple(int(cap) for cap in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not comma-separated integers") from None


def _names(value: str) -> tuple[str, ...]:
    return () if value == "none" else tuple(n.strip() for n in value.split(",") if n.strip())


def _evaluate(arguments: argparse.Namespace) -> int:
    """Exit 2 with the reason when a name or the device is unknown or the dataset is invalid."""
    from dataclasses import replace

    from hier_pipeline.evaluation.ablations import check_ablations
    from hier_pipeline.evaluation.baselines import BASELINES
    from hier_pipeline.evaluation.report import HEADLINE
    from hier_pipeline.pipeline.evaluate import EvaluateConfig, evaluate_dataset

    try:
        config = EvaluateConfig(train=_train_config(arguments))
        if arguments.ablations is not None:
            config = replace(config, ablations=arguments.ablations)
        if arguments.baselines is not None:
            config = replace(config, baselines=arguments.baselines)
        if arguments.max_users is not None:
            config = replace(config, max_users=arguments.max_users)
        if arguments.seeds is not None:
            config = replace(config, seeds=arguments.seeds)
        if arguments.baseline_steps is not None:
            budget = replace(config.budget, steps=arguments.baseline_steps)
            config = replace(config, budget=budget)
        if arguments.baseline_workers is not None:
            config = replace(config, baseline_workers=arguments.baseline_workers)
        check_ablations(config.ablations)
        if unknown := set(config.baselines) - set(BASELINES):
            raise ValueError(f"unknown baselines {sorted(unknown)}; known: {list(BASELINES)}")
        report = evaluate_dataset(
            arguments.dataset_dir, arguments.out, config, lambda m: print(m, file=sys.stderr)
        )
    except (DatasetError, ValueError) as error:
        print(f"hier evaluate: {error}", file=sys.stderr)
        return 2
    print(
        text_table(
            [
                {"model": name, **{m: metrics.get(m) for m in HEADLINE}}
                for name, metrics in report.ranked()
            ]
        )
    )
    print(f"\nwrote {arguments.out / 'metrics.json'} and {arguments.out / 'report.md'}")
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
        ("interests", "interests/*/*.*"),
        ("evaluation", "evaluation/*/report.md"),
        ("serving", "serving/*/manifest.json"),
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
