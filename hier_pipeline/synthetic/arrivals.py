"""New arrivals for a generated world: a batch of new advertisers, their new products and the
first funnel events of existing users on them, written as `incoming/<batch>/` (see
`hier_pipeline.dataset.arrivals`).

Products follow the planted hierarchy (a fine interest inside one of the advertiser's mids), and
the users who meet them are drawn by their planted weight on that interest, so the batch carries
the same signal as the world. Later purchases of the new products are kept out of the batch, in
`truth/batches/<batch>/purchases.parquet`, to measure cold-start retrieval; their planted
interests are appended to `truth/products.parquet`.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hier_pipeline.dataset.arrivals import BATCH_NAME, INCOMING, incoming_folder, list_batches
from hier_pipeline.synthetic import vocabulary as voc
from hier_pipeline.synthetic.images import product_image
from hier_pipeline.synthetic.world import DAY, EVENT_TYPES, HOUR
from hier_pipeline.synthetic.writer import coarse_category_id, mid_category_id

KEYS = {"advertisers": "advertiser_id", "products": "product_id"}


@dataclass(frozen=True)
class BatchConfig:
    products_fraction: float = 0.01  # new products, as a share of the products already there
    products_per_advertiser: int = 5  # one new advertiser per this many new products
    users_per_product: int = 12  # users who meet each new product in the batch
    held_out_per_product: int = 4  # later purchases per product, kept in truth/ only
    seed: int = 0
    image_size: int = 64


def generate_batch(
    dataset: Path, name: str | None = None, config: BatchConfig = BatchConfig()
) -> Path:
    """Write the next batch of `dataset` (a generated world) and return its folder. Ids continue
    after the largest of the world and its earlier batches; times start after their last event."""
    batches = list_batches(dataset)
    name = name or f"batch{len(batches) + 1:04d}"
    if not BATCH_NAME.match(name) or name in batches:
        raise ValueError(f"batch name '{name}' is invalid or taken (batches: {batches})")
    rng = np.random.default_rng([config.seed, len(batches)])
    tables = [dataset] + [incoming_folder(dataset) / b for b in batches]
    start = _max(tables, "events", "event_time") // 1_000_000 + HOUR  # microseconds -> s
    n_products = max(1, math.ceil(config.products_fraction * _count(dataset / "products.parquet")))
    n_advertisers = max(1, math.ceil(n_products / config.products_per_advertiser))
    advertisers = _advertisers(
        rng, n_advertisers, _max(tables, "advertisers", "advertiser_id") + 1, start
    )
    first_product = _max(tables, "products", "product_id") + 1
    products = _products(rng, advertisers, n_products, first_product, name)
    users = pq.read_table(
        dataset / "truth" / "users.parquet", columns=["user_id", "fine_ids", "weights"]
    )
    events, held_out = _events(rng, products, users.to_pydict(), start, config)

    scratch = incoming_folder(dataset) / f".{name}"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "images").mkdir(parents=True)
    for pid, fine, has_image in zip(
        products["product_id"], products["fine"], products["has_image"], strict=True
    ):
        if has_image:
            png = product_image(int(fine), config.seed, int(pid), config.image_size)
            (scratch / "images" / f"p{pid:06d}.png").write_bytes(png)
    _write(
        scratch / "advertisers.parquet",
        {k: advertisers[k] for k in ("advertiser_id", "name", "description", "created_at")},
    )
    _write(
        scratch / "products.parquet",
        {
            k: products[k]
            for k in (
                "product_id",
                "advertiser_id",
                "category_id",
                "title",
                "description",
                "price",
                "image_path",
                "created_at",
            )
        },
    )
    _write(scratch / "events.parquet", events)
    truth = dataset / "truth" / "batches" / name
    truth.mkdir(parents=True, exist_ok=True)
    _write(truth / "purchases.parquet", held_out)
    _append_truth(dataset / "truth" / "products.parquet", products)
    os.replace(scratch, incoming_folder(dataset) / name)  # the batch appears whole
    return incoming_folder(dataset) / name


def _advertisers(rng: np.random.Generator, n: int, first_id: int, start: int) -> dict[str, Any]:
    """Advertisers in one coarse domain, selling in one or two of its mids."""
    ids, mids, names, descriptions = [], [], [], []
    for i in range(n):
        coarse = int(rng.integers(voc.N_COARSE))
        chosen = [
            int(m)
            for m in rng.choice(
                range(coarse * 4, coarse * 4 + 4), 1 + int(rng.random() < 0.5), replace=False
            )
        ]
        name, description = voc.advertiser_text(rng, chosen)
        ids.append(first_id + i)
        mids.append(chosen)
        names.append(name)
        descriptions.append(description)
    created = start + rng.integers(0, DAY, n)
    return {
        "advertiser_id": ids,
        "name": names,
        "description": descriptions,
        "created_at": _times(created),
        "mids": mids,
        "created": created,
    }


def _products(
    rng: np.random.Generator, advertisers: dict[str, Any], n: int, first_id: int, batch: str
) -> dict[str, Any]:
    owner = np.concatenate(
        [
            np.arange(len(advertisers["advertiser_id"])),
            rng.integers(
                0, len(advertisers["advertiser_id"]), max(0, n - len(advertisers["advertiser_id"]))
            ),
        ]
    )[:n]
    mid = np.array([rng.choice(advertisers["mids"][o]) for o in owner])
    fine = mid * 4 + rng.integers(0, 4, n)
    texts = [voc.product_text(rng, int(f)) for f in fine]
    ids = list(range(first_id, first_id + n))
    has_image = rng.random(n) < 0.9
    created = np.asarray(advertisers["created"])[owner] + rng.integers(HOUR, 2 * DAY, n)
    return {
        "product_id": ids,
        "advertiser_id": [advertisers["advertiser_id"][o] for o in owner],
        "category_id": [int(mid_category_id(int(m))) for m in mid],
        "title": [t[0] for t in texts],
        "description": [t[1] for t in texts],
        "price": np.round(rng.lognormal(np.log([voc.MID[m].price for m in mid]), 0.45), 2).tolist(),
        "image_path": [
            f"{INCOMING}/{batch}/images/p{i:06d}.png" if h else None
            for i, h in zip(ids, has_image, strict=True)
        ],
        "created_at": _times(created),
        "fine": fine.tolist(),
        "has_image": has_image.tolist(),
        "created": created,
    }


def _events(
    rng: np.random.Generator,
    products: dict[str, Any],
    users: dict[str, Any],
    start: int,
    config: BatchConfig,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per new product: users drawn by their planted weight on its fine interest (a little on its
    mid, so a niche interest still finds someone) walk the funnel in the batch's first week; the
    held-out purchases come the week after."""
    weight = np.zeros((len(users["user_id"]), voc.N_FINE))
    for row, (fines, weights) in enumerate(zip(users["fine_ids"], users["weights"], strict=True)):
        weight[row, fines] = weights
    mid_weight = weight.reshape(len(weight), voc.N_MID, 4).sum(axis=2)
    rows: list[tuple[int, int, str, int]] = []
    held: list[tuple[int, int, int]] = []
    for pid, fine, created in zip(
        products["product_id"], products["fine"], products["created"], strict=True
    ):
        p = weight[:, fine] + 0.2 * mid_weight[:, fine // 4] + 1e-3
        met = rng.choice(
            len(p), min(config.users_per_product, len(p)), replace=False, p=p / p.sum()
        )
        for user in met:
            match = min(1.0, weight[user, fine] + 0.5 * mid_weight[user, fine // 4])
            t = int(created) + int(rng.integers(HOUR, 5 * DAY))
            stage = 0
            while stage < len(EVENT_TYPES) - 1 and rng.random() < 0.3 + 0.6 * match:
                stage += 1
            for step in range(stage + 1):
                rows.append(
                    (int(users["user_id"][user]), int(pid), EVENT_TYPES[step], t + step * 600)
                )
        later = rng.choice(
            len(p), min(config.held_out_per_product, len(p)), replace=False, p=p / p.sum()
        )
        held += [
            (int(users["user_id"][u]), int(pid), int(created) + 7 * DAY + int(rng.integers(DAY)))
            for u in later
        ]
    rows.sort(key=lambda r: (r[3], r[0], r[1]))
    events = {
        "user_id": [r[0] for r in rows],
        "product_id": [r[1] for r in rows],
        "campaign_id": pa.nulls(len(rows), pa.int64()),
        "event_type": [r[2] for r in rows],
        "event_time": _times(np.array([r[3] for r in rows], dtype=np.int64)),
    }
    purchases = {
        "user_id": [h[0] for h in held],
        "product_id": [h[1] for h in held],
        "purchase_time": _times(np.array([h[2] for h in held], dtype=np.int64)),
    }
    return events, purchases


def _append_truth(path: Path, products: dict[str, Any]) -> None:
    """The new products' planted interests join the world's truth (it describes every item the
    dataset holds, so that a run that learns from the batches is scored on them too)."""
    fine = np.asarray(products["fine"])
    table = pq.read_table(path)
    added = pa.table(
        {
            "product_id": pa.array(products["product_id"], pa.int64()),
            "coarse_id": pa.array(coarse_category_id(fine // 16), pa.int64()),
            "mid_id": pa.array(mid_category_id(fine // 4), pa.int64()),
            "fine_id": pa.array(fine, pa.int64()),
            "cold_start": pa.array(np.ones(len(fine), dtype=bool)),
        }
    )
    pq.write_table(pa.concat_tables([table, added.cast(table.schema)]), path, compression="zstd")


def _times(seconds: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(seconds, dtype=np.int64) * 1_000_000, type=pa.timestamp("us"))


def _write(path: Path, columns: dict[str, Any]) -> None:
    """Parquet with every integer column as int64, like the world's files."""
    table = pa.table(
        {
            k: v if isinstance(v, pa.Array | pa.ChunkedArray) else pa.array(v)
            for k, v in columns.items()
        }
    )
    table = table.cast(
        pa.schema(
            [f.with_type(pa.int64()) if pa.types.is_integer(f.type) else f for f in table.schema]
        )
    )
    pq.write_table(table, path, compression="zstd")


def _count(path: Path) -> int:
    return int(pq.ParquetFile(path).metadata.num_rows)


def _max(folders: list[Path], table: str, column: str) -> int:
    """The largest value of an id or time column (as int64: microseconds for a time) over the
    world and its batches; a batch without the table is skipped."""
    files = [f / f"{table}.parquet" for f in folders if (f / f"{table}.parquet").is_file()]
    return max(
        int(pc.max(pq.read_table(path, columns=[column])[column].cast(pa.int64())).as_py())
        for path in files
    )
