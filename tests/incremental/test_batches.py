"""Batches as the generator writes them and as a full run reads them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import list_batches, with_batches
from hier_pipeline.synthetic.arrivals import BatchConfig, generate_batch


def test_batches_continue_ids_and_time_and_a_full_load_reads_them(
    synthetic_world: Path, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    shutil.copytree(synthetic_world, world)
    first = generate_batch(world, config=BatchConfig(products_fraction=0.03))
    second = generate_batch(world, config=BatchConfig(products_fraction=0.03))
    assert list_batches(world) == ["batch0001", "batch0002"] == [first.name, second.name]
    with pytest.raises(ValueError, match="invalid or taken"):
        generate_batch(world, "batch0001")
    frames = {
        name: [pd.read_parquet(folder / f"{name}.parquet") for folder in (world, first, second)]
        for name in ("products", "advertisers", "events")
    }
    for name, key in (("products", "product_id"), ("advertisers", "advertiser_id")):
        old, a, b = (f[key] for f in frames[name])
        assert a.min() == old.max() + 1 and b.min() == a.max() + 1  # ids continue
    old, a, b = (f["event_time"] for f in frames["events"])
    assert a.min() > old.max() and b.min() > a.max()  # and so does time
    for folder in (first, second):
        for path in pd.read_parquet(folder / "products.parquet")["image_path"].dropna():
            assert (world / path).is_file()
        truth = world / "truth" / "batches" / folder.name
        assert len(pd.read_parquet(truth / "purchases.parquet")) > 0

    report = load_dataset(with_batches(parse_dataset(world)), tmp_path / "all.duckdb")
    for name, parts in frames.items():
        assert report.tables[name].accepted == sum(len(p) for p in parts)
        assert report.tables[name].quarantined == 0
