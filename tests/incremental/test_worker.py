"""The resident arrivals worker: batch after batch in one process, the model and encoders loaded
once, the state read again only when a full run or a release replaced it, the same vectors as
the one-shot path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from hier_pipeline.cli import main
from hier_pipeline.dataset import parse_dataset
from hier_pipeline.incremental.update import Current, update_batch
from hier_pipeline.incremental.worker import ArrivalsWorker
from hier_pipeline.interests.arrivals import load_batch_tokens
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.release.promotion import PromotionConfig, promote
from hier_pipeline.synthetic.arrivals import BatchConfig, generate_batch
from tests.incremental.conftest import Base
from tests.incremental.test_chain import world_without_batches
from tests.incremental.test_promotion import PASSING


def test_a_worker_fits_batch_after_batch_with_what_it_loaded_once(
    arrivals: Path, base: Base, tmp_path: Path
) -> None:
    world = world_without_batches(arrivals, tmp_path / "world")
    for seed in (1, 2):
        generate_batch(world, config=BatchConfig(products_fraction=0.03, seed=seed))
    spec = parse_dataset(world)
    served = promote(PASSING, base.model, base.tokens, tmp_path / "serving", PromotionConfig(), {})
    reads: list[Current] = []
    version = [0]

    def read_current() -> Current:
        reads.append(base.current(served.folder, tmp_path / "cache"))
        return reads[-1]

    worker = ArrivalsWorker(spec, read_current, lambda: version[0], tmp_path / "work")
    worker.warm_up()
    _, loaded = worker.state()
    assert loaded.encoders.text is not None and len(reads) == 1
    assert worker.pending() == ["batch0001", "batch0002"]

    updates = list(worker.serve(0, stop=lambda: not worker.pending()))

    assert [u.batch for u in updates] == ["batch0001", "batch0002"]
    assert worker.state()[1] is loaded and len(reads) == 1  # nothing read or loaded again
    assert all(u.entities["products"] > 0 for u in updates)
    version[0] += 1  # a release: the state is read and the model loaded again, encoders kept
    current, reloaded = worker.state()
    assert len(reads) == 2 and reloaded.model is not loaded.model
    assert reloaded.encoders is loaded.encoders
    restarted = ArrivalsWorker(spec, read_current, lambda: 0, tmp_path / "work")
    assert restarted.pending() == []  # it resumes after the batches the state holds

    one_shot = promote(PASSING, base.model, base.tokens, tmp_path / "one", PromotionConfig(), {})
    update_batch(spec, "batch0001", base.current(one_shot.folder, tmp_path / "c"), tmp_path / "w")
    hierarchy = current.tokens.hierarchy
    (ours,) = [b for b in load_batch_tokens(served.folder, hierarchy) if b.batch == "batch0001"]
    (theirs,) = load_batch_tokens(one_shot.folder, hierarchy)
    assert ours.keys == theirs.keys
    for node_type, vectors in ours.vectors.items():
        assert torch.equal(vectors, theirs.vectors[node_type]), node_type


def test_hier_arrivals_fits_the_pending_batches_over_the_pipeline_outputs(
    arrivals: Path,
    base: Base,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`hier arrivals DIR --once` over a home laid out as the assets write it: the batch is
    fitted, served, and reported in one line."""
    world = world_without_batches(arrivals, tmp_path / "world")
    generate_batch(world, config=BatchConfig(products_fraction=0.03, seed=3))
    home, name = tmp_path / "home", base.spec.name
    for source, target in (
        (base.raw.database, home / "warehouse" / f"{name}.duckdb"),
        (base.graph_artifact.path, home / "graphs" / f"{name}.pt"),
        (base.graph_artifact.path.parent / "content.pt", home / "content" / f"{name}.pt"),
    ):
        target.parent.mkdir(parents=True)
        shutil.copy(source, target)
    promote(PASSING, base.model, base.tokens, home / "serving" / name, PromotionConfig(), {})
    monkeypatch.setenv("HIER_HOME", str(home))

    assert main(["arrivals", str(world), "--once", "--poll", "0"]) == 0

    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "waiting for batches after none"
    assert printed[1].startswith("batch0001: new {'advertisers': ")
    assert " 0 rows quarantined" in printed[1]
    assert "bags placed by {" in printed[1] and "'advertisers': {'events': " in printed[1]
    index = InterestIndex.open(home / "serving" / name)
    assert len(index.keys["products"]) > len(base.tokens.load().keys["products"])
