"""Writing a sampled world as a dataset folder (docs/dataset.md) plus hidden ground truth.

The folder holds ``dataset.yaml``, one parquet file per table and ``images/``; ``truth/`` holds the
planted hierarchy and assignments that no model may read (dataset.yaml never names it). Parquet is
written from explicit Arrow schemas with fixed settings, so one config gives byte-identical files.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hier_pipeline.synthetic.images import product_image
from hier_pipeline.synthetic.vocabulary import COARSE, FINE, MID, N_COARSE
from hier_pipeline.synthetic.world import (
    EVENT_TYPES,
    WEEK,
    SyntheticConfig,
    World,
    mixture,
    sample_world,
)

DATASET_YAML = """\
name: synthetic_ads
tables:
  users: {file: users.parquet, primary_key: user_id, time: signup_time,
          columns: {age_band: categorical, region: categorical}}
  advertisers: {file: advertisers.parquet, primary_key: advertiser_id, time: created_at,
                text: [name, description]}
  categories: {file: categories.parquet, primary_key: category_id,
               foreign_keys: {parent_id: categories}, text: [name]}
  products: {file: products.parquet, primary_key: product_id,
             foreign_keys: {advertiser_id: advertisers, category_id: categories},
             time: created_at, text: [title, description], image: image_path}
  campaigns: {file: campaigns.parquet, primary_key: campaign_id,
              foreign_keys: {advertiser_id: advertisers}, time: start_time}
  events: {file: events.parquet,
           foreign_keys: {user_id: users, product_id: products, campaign_id: campaigns},
           time: event_time}
  feedback: {file: feedback.parquet, foreign_keys: {user_id: users, product_id: products},
             time: feedback_time}
roles: {user: users, item: products, advertiser: advertisers}
funnel:  # shallow -> deep; purchase is the target
  - {name: impression, table: events, user: user_id, item: product_id, time: event_time,
     where: "event_type = 'impression'"}
  - {name: click, table: events, user: user_id, item: product_id, time: event_time,
     where: "event_type = 'click'"}
  - {name: add_to_cart, table: events, user: user_id, item: product_id, time: event_time,
     where: "event_type = 'add_to_cart'"}
  - {name: purchase, table: events, user: user_id, item: product_id, time: event_time,
     where: "event_type = 'purchase'"}
negative_feedback:
  - {table: feedback, user: user_id, item: product_id, time: feedback_time,
     where: "feedback = 'not_interested'"}
"""


def coarse_category_id(coarse: np.ndarray | int) -> np.ndarray | int:
    """category_id of a coarse interest (1..8); truth uses the same ids."""
    return coarse + 1


def mid_category_id(mid: np.ndarray | int) -> np.ndarray | int:
    """category_id of a mid interest (9..40); truth uses the same ids."""
    return mid + N_COARSE + 1


def _ids(n: int) -> pa.Array:
    return pa.array(np.arange(1, n + 1, dtype=np.int64))


def _ts(seconds: np.ndarray) -> pa.Array:
    return pa.array(seconds.astype(np.int64) * 1_000_000, type=pa.timestamp("us"))


def _strings(values: np.ndarray | list[str]) -> pa.Array:
    return pa.array(list(values), type=pa.string())


def _refs(idx: np.ndarray) -> pa.Array:
    """Foreign keys from 0-based indices: 1-based int64 ids, and null where the index is -1."""
    return pa.array(idx.astype(np.int64) + 1, type=pa.int64(), mask=idx < 0)


def dataset_tables(world: World) -> dict[str, pa.Table]:
    """The visible tables, named and typed as dataset.yaml declares them."""
    u, a, p, c, e, f = (
        world.users,
        world.advertisers,
        world.products,
        world.campaigns,
        world.events,
        world.feedback,
    )
    images = [_image_path(i) if has else None for i, has in enumerate(p["has_image"].tolist())]
    parents = [None] * len(COARSE) + [coarse_category_id(m.parent) for m in MID]
    return {
        "users": pa.table(
            {
                "user_id": _ids(len(u["signup"])),
                "signup_time": _ts(u["signup"]),
                "age_band": _strings(u["age_band"]),
                "region": _strings(u["region"]),
            }
        ),
        "advertisers": pa.table(
            {
                "advertiser_id": _ids(len(a["created"])),
                "name": _strings(a["name"]),
                "description": _strings(a["description"]),
                "created_at": _ts(a["created"]),
            }
        ),
        "categories": pa.table(
            {
                "category_id": _ids(len(COARSE) + len(MID)),
                "parent_id": pa.array(parents, pa.int64()),
                "name": _strings([x.name for x in (*COARSE, *MID)]),
            }
        ),
        "products": pa.table(
            {
                "product_id": _ids(len(p["created"])),
                "advertiser_id": _refs(p["owner"]),
                "category_id": pa.array(mid_category_id(p["fine"] // 4)),
                "title": _strings(p["title"]),
                "description": _strings(p["description"]),
                "price": pa.array(p["price"], pa.float64()),
                "image_path": pa.array(images, pa.string()),
                "created_at": _ts(p["created"]),
            }
        ),
        "campaigns": pa.table(
            {
                "campaign_id": _ids(len(c["start"])),
                "advertiser_id": _refs(c["owner"]),
                "start_time": _ts(c["start"]),
                "end_time": _ts(c["end"]),
                "objective": _strings(np.where(c["conversion"], "conversion", "awareness")),
                "budget": pa.array(c["budget"], pa.float64()),
            }
        ),
        "events": pa.table(
            {
                "user_id": _refs(e["user"]),
                "product_id": _refs(e["product"]),
                "campaign_id": _refs(e["campaign"]),
                "event_type": _strings(np.array(EVENT_TYPES)[e["type"]]),
                "event_time": _ts(e["time"]),
            }
        ),
        "feedback": pa.table(
            {
                "user_id": _refs(f["user"]),
                "product_id": _refs(f["product"]),
                "feedback": _strings(np.where(f["negative"] == 1, "not_interested", "interested")),
                "feedback_time": _ts(f["time"]),
            }
        ),
    }


def truth_tables(world: World) -> dict[str, pa.Table]:
    """Planted ground truth: hierarchy, product/advertiser labels, users' starting mixtures."""
    fine = np.arange(len(FINE))
    p_fine, u = world.products["fine"], world.users
    start = mixture(u, 0.0)
    order = np.argsort(-start, axis=1, kind="stable")
    fines = [[int(j) for j in row if start[i, j] > 0] for i, row in enumerate(order)]
    return {
        "hierarchy": pa.table(
            {
                "fine_id": pa.array(fine),
                "mid_id": pa.array(mid_category_id(fine // 4)),
                "coarse_id": pa.array(coarse_category_id(fine // 16)),
                "fine_name": _strings([x.name for x in FINE]),
                "mid_name": _strings([MID[x.parent].name for x in FINE]),
                "coarse_name": _strings([COARSE[MID[x.parent].parent].name for x in FINE]),
            }
        ),
        "products": pa.table(
            {
                "product_id": _ids(len(p_fine)),
                "coarse_id": pa.array(coarse_category_id(p_fine // 16)),
                "mid_id": pa.array(mid_category_id(p_fine // 4)),
                "fine_id": pa.array(p_fine),
                "cold_start": pa.array(world.products["created"] >= world.cold_start_after),
            }
        ),
        "users": pa.table(
            {
                "user_id": _ids(len(fines)),
                "top_fine_id": pa.array(order[:, 0]),
                "fine_ids": pa.array(fines, pa.list_(pa.int64())),
                "weights": pa.array(
                    [start[i, row].tolist() for i, row in enumerate(fines)], pa.list_(pa.float64())
                ),
                "fading_fine_id": pa.array(u["fade_fine"]),
                "fade_start": _ts(world.start + np.round(u["fade_start"] * WEEK)),
                "emerging_fine_id": pa.array(u["new_fine"]),
                "emerge_start": _ts(world.start + np.round(u["new_start"] * WEEK)),
            }
        ),
        "advertisers": pa.table(
            {
                "advertiser_id": _ids(len(world.advertisers["created"])),
                "coarse_id": pa.array(coarse_category_id(world.advertisers["coarse"])),
                "cold_start": pa.array(world.advertisers["cold"]),
            }
        ),
    }


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd", compression_level=3, use_dictionary=True)


def generate_world(out_dir: Path, config: SyntheticConfig = SyntheticConfig()) -> Path:
    """Sample the world for ``config`` and write it to ``out_dir``.

    The folder is created if needed; files of an earlier world there are overwritten, and its
    surplus product images removed, so the folder always holds exactly this world.
    """
    world = sample_world(config)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "truth").mkdir(exist_ok=True)
    tables = dataset_tables(world)
    for name, table in tables.items():
        _write_parquet(table, out_dir / f"{name}.parquet")
    for name, table in truth_tables(world).items():
        _write_parquet(table, out_dir / "truth" / f"{name}.parquet")
    written = set()
    for i in np.flatnonzero(world.products["has_image"]).tolist():
        png = product_image(int(world.products["fine"][i]), config.seed, i + 1, config.image_size)
        (out_dir / _image_path(i)).write_bytes(png)
        written.add(out_dir / _image_path(i))
    for stale in set((out_dir / "images").glob("p" + "[0-9]" * 6 + ".png")) - written:
        stale.unlink()
    (out_dir / "dataset.yaml").write_text(DATASET_YAML)
    summary = {
        "config": asdict(config),
        "counts": {name: table.num_rows for name, table in tables.items()},
        "images": int(world.products["has_image"].sum()),
        "start": _iso(world.start),
        "end": _iso(world.end),
        "cold_start_after": _iso(world.cold_start_after),
    }
    (out_dir / "truth" / "world.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True) + "\n"
    )
    return out_dir


def _image_path(index: int) -> str:
    return f"images/p{index + 1:06d}.png"


def _iso(seconds: int) -> str:
    return str(np.datetime64(seconds, "s"))
