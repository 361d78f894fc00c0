"""The synthetic world: deterministic, a valid dataset folder, and carrying the planted signal."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from hier_pipeline.synthetic import SyntheticConfig, generate_world

TINY = SyntheticConfig(scale=0.05)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_world(tmp_path_factory.mktemp("tiny"), TINY)


@pytest.fixture(scope="module")
def medium(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Big enough for the statistical checks, small enough to stay fast."""
    return generate_world(tmp_path_factory.mktemp("medium"), SyntheticConfig(scale=0.3, seed=3))


@pytest.fixture(params=["tiny", "medium"])
def world(request: pytest.FixtureRequest) -> Path:
    path: Path = request.getfixturevalue(request.param)
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _spec(root: Path) -> dict:
    spec: dict = yaml.safe_load((root / "dataset.yaml").read_text())
    return spec


def _read(root: Path, table: str) -> pd.DataFrame:
    return pd.read_parquet(root / _spec(root)["tables"][table]["file"])


def _sql(root: Path, query: str) -> int:
    con = duckdb.connect()
    for name, table in _spec(root)["tables"].items():
        path = str(root / table["file"]).replace("'", "''")
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    row = con.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_same_seed_same_bytes_other_seed_differs(tiny: Path, tmp_path: Path) -> None:
    again = _files(generate_world(tmp_path / "again", TINY))
    assert again == _files(tiny)
    other = _files(generate_world(tmp_path / "other", SyntheticConfig(scale=0.05, seed=1)))
    assert other.keys() & again.keys()
    assert other["events.parquet"] != again["events.parquet"]
    assert other["products.parquet"] != again["products.parquet"]


def test_dataset_yaml_names_existing_files_and_hides_truth(world: Path) -> None:
    spec = _spec(world)
    assert re.fullmatch(r"[a-z0-9_]+", spec["name"])
    assert spec["roles"] == {"user": "users", "item": "products", "advertiser": "advertisers"}
    assert [s["name"] for s in spec["funnel"]] == ["impression", "click", "add_to_cart", "purchase"]
    for table in spec["tables"].values():
        assert (world / table["file"]).is_file()
    assert "truth" not in (world / "dataset.yaml").read_text()
    paths = _read(world, "products")["image_path"]
    assert 0.75 < paths.notna().mean() < 1.0
    for path in paths.dropna():
        assert (world / path).is_file()


def test_keys_are_int64_unique_and_foreign_keys_resolve(world: Path) -> None:
    spec = _spec(world)
    frames = {name: _read(world, name) for name in spec["tables"]}
    for name, table in spec["tables"].items():
        if "primary_key" in table:
            key = frames[name][table["primary_key"]]
            assert key.dtype == np.int64 and key.is_unique and key.notna().all(), name
        for column, target in table.get("foreign_keys", {}).items():
            values = frames[name][column].dropna()
            arrow_type = pq.read_schema(world / table["file"]).field(column).type
            assert arrow_type == pa.int64(), f"{name}.{column}"
            known = frames[target][spec["tables"][target]["primary_key"]]
            assert values.isin(known).all(), f"{name}.{column}"


def test_funnel_steps_follow_an_earlier_shallower_step(world: Path) -> None:
    for prev, step in [
        ("impression", "click"),
        ("click", "add_to_cart"),
        ("add_to_cart", "purchase"),
    ]:
        orphans = _sql(
            world,
            f"""SELECT count(*) FROM events e WHERE event_type = '{step}' AND NOT EXISTS (
                SELECT 1 FROM events p WHERE p.event_type = '{prev}' AND p.user_id = e.user_id
                AND p.product_id = e.product_id AND p.event_time < e.event_time)""",
        )
        assert orphans == 0, step


def test_nothing_happens_before_its_entities_exist(world: Path) -> None:
    early = _sql(
        world,
        """SELECT count(*) FROM events e JOIN products p USING (product_id)
           JOIN users u USING (user_id) LEFT JOIN campaigns c USING (campaign_id)
           WHERE e.event_time < p.created_at OR e.event_time < u.signup_time
              OR e.event_time < c.start_time OR e.event_time > c.end_time""",
    )
    assert early == 0
    early_feedback = _sql(
        world,
        """SELECT count(*) FROM feedback f JOIN products p USING (product_id)
           JOIN users u USING (user_id)
           WHERE f.feedback_time < p.created_at OR f.feedback_time < u.signup_time""",
    )
    assert early_feedback == 0
    late_owner = """SELECT count(*) FROM {0} x JOIN advertisers a USING (advertiser_id)
                    WHERE x.{1} < a.created_at"""
    assert _sql(world, late_owner.format("products", "created_at")) == 0
    assert _sql(world, late_owner.format("campaigns", "start_time")) == 0
    summary = json.loads((world / "truth" / "world.json").read_text())
    bounds = f"'{summary['start']}'::TIMESTAMP AND '{summary['end']}'::TIMESTAMP"
    assert _sql(world, f"SELECT count(*) FROM events WHERE event_time NOT BETWEEN {bounds}") == 0


def test_cold_start_entities_arrive_late_and_get_events(world: Path) -> None:
    cold = pd.Timestamp(
        json.loads((world / "truth" / "world.json").read_text())["cold_start_after"]
    )
    advertisers, products = _read(world, "advertisers"), _read(world, "products")
    new_advertisers = advertisers.loc[advertisers["created_at"] >= cold, "advertiser_id"]
    new_products = products[products["created_at"] >= cold]
    assert len(new_advertisers) >= 1
    assert new_products["advertiser_id"].isin(new_advertisers).any()
    assert (~new_products["advertiser_id"].isin(new_advertisers)).any()
    events = _read(world, "events")
    assert events["product_id"].isin(new_products["product_id"]).any()
    truth = pd.read_parquet(world / "truth" / "products.parquet")
    assert set(truth.loc[truth["cold_start"], "product_id"]) == set(new_products["product_id"])


def test_small_scale_has_every_kind_of_row(tiny: Path) -> None:
    counts = json.loads((tiny / "truth" / "world.json").read_text())["counts"]
    assert counts["users"] >= 20 and counts["advertisers"] >= 4 and counts["products"] >= 8
    assert all(n > 0 for n in counts.values())
    events, feedback = _read(tiny, "events"), _read(tiny, "feedback")
    assert set(events["event_type"]) == {"impression", "click", "add_to_cart", "purchase"}
    assert events["campaign_id"].notna().any() and events["campaign_id"].isna().any()
    assert set(feedback["feedback"]) == {"interested", "not_interested"}
    categories = _read(tiny, "categories")
    assert len(categories) == 40 and categories["parent_id"].isna().sum() == 8
    image = Image.open(
        io.BytesIO((tiny / _read(tiny, "products")["image_path"].dropna().iloc[0]).read_bytes())
    )
    assert image.size == (64, 64) and image.format == "PNG"


def test_truth_agrees_with_visible_taxonomy(world: Path) -> None:
    truth = pd.read_parquet(world / "truth" / "products.parquet")
    products = _read(world, "products").merge(truth, on="product_id")
    assert (products["category_id"] == products["mid_id"]).all()
    hierarchy = pd.read_parquet(world / "truth" / "hierarchy.parquet")
    assert len(hierarchy) == 128 and hierarchy["fine_name"].is_unique
    parents = _read(world, "categories").set_index("category_id")["parent_id"]
    assert (parents[hierarchy["mid_id"]].to_numpy() == hierarchy["coarse_id"].to_numpy()).all()
    users = pd.read_parquet(world / "truth" / "users.parquet")
    assert np.allclose([sum(w) for w in users["weights"]], 1.0)


def test_purchases_concentrate_on_planted_interests(medium: Path) -> None:
    users = pd.read_parquet(medium / "truth" / "users.parquet")
    top3 = {u: set(f[:3]) for u, f in zip(users["user_id"], users["fine_ids"], strict=True)}
    fine = pd.read_parquet(medium / "truth" / "products.parquet").set_index("product_id")["fine_id"]
    events = _read(medium, "events")
    buys = events[events["event_type"] == "purchase"]
    bought = fine[buys["product_id"]].to_numpy()
    hit = np.mean([f in top3[u] for u, f in zip(buys["user_id"], bought, strict=True)])
    shuffled = np.random.default_rng(0).permutation(bought)  # chance: same items, random buyers
    chance = np.mean([f in top3[u] for u, f in zip(buys["user_id"], shuffled, strict=True)])
    assert len(buys) > 100
    assert hit > 0.5 and hit > 5 * chance, (hit, chance)
    impressions = events[events["event_type"] == "impression"]
    shown = fine[impressions["product_id"]].to_numpy()
    shown_hit = np.mean([f in top3[u] for u, f in zip(impressions["user_id"], shown, strict=True)])
    assert hit > 2 * shown_hit  # the funnel, not only exposure, follows the interests


def test_not_interested_lands_far_from_interests(medium: Path) -> None:
    users = pd.read_parquet(medium / "truth" / "users.parquet")
    coarse_of = {
        u: {f // 16 for f in fs} for u, fs in zip(users["user_id"], users["fine_ids"], strict=True)
    }
    fine = pd.read_parquet(medium / "truth" / "products.parquet").set_index("product_id")["fine_id"]
    feedback = _read(medium, "feedback")
    feedback["near"] = [
        f // 16 in coarse_of[u]
        for u, f in zip(feedback["user_id"], fine[feedback["product_id"]], strict=True)
    ]
    near = feedback.groupby("feedback")["near"].mean()
    assert near["interested"] > 0.8 and near["not_interested"] < 0.3, near


def test_texts_of_one_fine_interest_share_more_words(medium: Path) -> None:
    products = _read(medium, "products").merge(
        pd.read_parquet(medium / "truth" / "products.parquet"), on="product_id"
    )
    words = [
        set(re.findall(r"[a-z0-9]+", f"{t} {d}".lower()))
        for t, d in zip(products["title"], products["description"], strict=True)
    ]
    fine, coarse = products["fine_id"].to_numpy(), products["coarse_id"].to_numpy()
    same, across = [], []
    for i, j in combinations(range(min(len(words), 300)), 2):
        jaccard = len(words[i] & words[j]) / len(words[i] | words[j])
        if fine[i] == fine[j]:
            same.append(jaccard)
        elif coarse[i] != coarse[j]:
            across.append(jaccard)
    assert len(same) > 20
    assert np.mean(same) > 3 * np.mean(across), (np.mean(same), np.mean(across))
    assert products["description"].nunique() > 0.95 * len(products)  # one interest, many wordings


def test_generator_never_imports_dagster() -> None:
    code = "import sys, hier_pipeline.synthetic; sys.exit('dagster' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
