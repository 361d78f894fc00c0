"""Small real datasets written to disk for tests: one place for every fake, so tests stay short."""

from __future__ import annotations

import copy
import io
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

SHARED_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"

TINY_FILES: dict[str, str] = {
    "users.csv": "user_id,signup,age\n1,2024-01-01,30\n2,2024-01-02,41\n3,2024-01-03,25\n",
    "products.csv": (
        "product_id,brand_id,title,price,created_at\n"
        "10,100,red running shoes,59.5,2024-01-01\n"
        "11,100,trail running socks,9.0,2024-01-01\n"
        "12,200,espresso machine,199.0,2024-01-05\n"
    ),
    "events.csv": (
        "user_id,product_id,kind,ts\n"
        "1,10,click,2024-02-01 10:00:00\n"
        "1,10,purchase,2024-02-01 10:05:00\n"
        "2,12,click,2024-02-02 11:00:00\n"
        "3,11,click,2024-02-03 12:00:00\n"
        "3,11,purchase,2024-02-03 12:30:00\n"
    ),
}

TINY_DESCRIPTION: dict[str, Any] = {
    "name": "tiny",
    "tables": {
        "users": {"file": "users.csv", "primary_key": "user_id", "columns": {"age": "numeric"}},
        "brands": {"implicit": True, "primary_key": "brand_id"},
        "products": {
            "file": "products.csv",
            "primary_key": "product_id",
            "foreign_keys": {"brand_id": "brands"},
            "time": "created_at",
            "text": ["title"],
        },
        "events": {
            "file": "events.csv",
            "foreign_keys": {"user_id": "users", "product_id": "products"},
            "time": "ts",
        },
    },
    "roles": {"user": "users", "item": "products", "advertiser": "brands"},
    "funnel": [
        {
            "name": "click",
            "table": "events",
            "user": "user_id",
            "item": "product_id",
            "time": "ts",
            "where": "kind = 'click'",
        },
        {
            "name": "purchase",
            "table": "events",
            "user": "user_id",
            "item": "product_id",
            "time": "ts",
            "where": "kind = 'purchase'",
        },
    ],
}


def tiny_description() -> dict[str, Any]:
    """A fresh, mutable copy of the tiny description, for a test to break."""
    return copy.deepcopy(TINY_DESCRIPTION)


def write_dataset(
    folder: Path,
    description: Mapping[str, Any] | None = None,
    files: Mapping[str, str | bytes] | None = None,
) -> Path:
    """Write a dataset folder: the tiny one by default, with any file or description replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in {**TINY_FILES, **(files or {})}.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    document = description if description is not None else TINY_DESCRIPTION
    (folder / "dataset.yaml").write_text(yaml.safe_dump(dict(document), sort_keys=False))
    return folder


def completejourney_slice(folder: Path, households: int = 40) -> Path:
    """A small, consistent slice of the real Complete Journey files, with its dataset.yaml unchanged.

    The first `households` households, their first 8 weeks of transactions, the products they bought
    plus a few hundred more, and the promotions, coupons and campaigns that touch them.
    """
    import duckdb

    source = SHARED_DATASETS / "completejourney"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.yaml").write_text((source / "dataset.yaml").read_text())
    con = duckdb.connect()

    def src(name: str) -> str:
        return f"read_parquet('{source / name}')"

    con.execute(
        f"CREATE TABLE hh AS SELECT DISTINCT household_id FROM {src('transactions.parquet')} WHERE week <= 8 ORDER BY 1 LIMIT {households}"
    )
    con.execute(
        f"CREATE TABLE tx AS SELECT * FROM {src('transactions.parquet')} WHERE household_id IN (SELECT * FROM hh) AND week <= 8"
    )
    con.execute(
        f"""CREATE TABLE pr AS SELECT * FROM {src("products.parquet")}
            WHERE product_id IN (SELECT product_id FROM tx) OR product_id % 200 = 0"""
    )
    queries = {
        "transactions.parquet": "SELECT * FROM tx",
        "products.parquet": "SELECT * FROM pr",
        "demographics.parquet": f"SELECT * FROM {src('demographics.parquet')} WHERE household_id IN (SELECT * FROM hh)",
        "campaign_descriptions.parquet": f"SELECT * FROM {src('campaign_descriptions.parquet')}",
        "campaigns.parquet": f"SELECT * FROM {src('campaigns.parquet')} WHERE household_id IN (SELECT * FROM hh)",
        "coupons.parquet": f"SELECT * FROM {src('coupons.parquet')} WHERE product_id IN (SELECT product_id FROM pr)",
        "coupon_redemptions.parquet": f"SELECT * FROM {src('coupon_redemptions.parquet')} WHERE household_id IN (SELECT * FROM hh)",
        "promotions.parquet": f"""SELECT * FROM {src("promotions.parquet")}
            WHERE week <= 8 AND product_id IN (SELECT product_id FROM pr) LIMIT 20000""",
    }
    for name, query in queries.items():
        con.execute(f"COPY ({query}) TO '{folder / name}' (FORMAT parquet)")
    con.close()
    return folder


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A tiny valid PNG whose header claims width x height: a decompression bomb as the decoder
    first sees it (a real one has highly compressible pixel data of that size behind it)."""
    data = bytearray(png_bytes(Image.new("1", (8, 8))))
    data[16:24] = width.to_bytes(4, "big") + height.to_bytes(4, "big")  # IHDR width, height
    data[29:33] = zlib.crc32(data[12:29]).to_bytes(4, "big")  # IHDR checksum
    return bytes(data)


def events_of_unknown_users(count: int) -> str:
    """An events.csv for the tiny description whose every row names a user that does not exist:
    a required table with nothing to accept."""
    return "user_id,product_id,kind,ts\n" + "".join(
        f"9{i},10,purchase,2024-02-01 10:00:00\n" for i in range(count)
    )
