"""Paths from a dataset never leave its folder or block a reader: dataset.yaml `file:` entries
through a symlinked folder or at a FIFO, and image cells of every hostile shape (the `..`,
absolute and symlinked-file cases of `file:` are in tests/dataset/test_parse.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from hier_pipeline.content import ContentConfig, embed_content
from hier_pipeline.dataset import DatasetError, parse_dataset
from hier_pipeline.dataset.parse import MAX_DESCRIPTION_BYTES
from tests.builders import tiny_description, write_dataset


def test_file_through_a_symlinked_folder_that_leaves(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "users.csv").write_text("user_id\n1\n")
    folder = write_dataset(tmp_path / "d")
    (folder / "shared").symlink_to(outside, target_is_directory=True)
    description = tiny_description()
    description["tables"]["users"]["file"] = "shared/users.csv"
    with pytest.raises(DatasetError, match=r"shared/users.csv.*leaves the dataset folder"):
        parse_dataset(write_dataset(folder, description))


def test_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    (folder / "users.csv").unlink()
    os.mkfifo(folder / "users.csv")
    with pytest.raises(DatasetError, match=r"table 'users': not a regular file"):
        parse_dataset(folder)


def test_oversized_or_deeply_nested_description(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    (folder / "dataset.yaml").write_text("name: x\n" + "#" * MAX_DESCRIPTION_BYTES)
    with pytest.raises(DatasetError, match="a description, not data"):
        parse_dataset(folder)
    (folder / "dataset.yaml").write_text("tables: " + "[" * 5000)
    with pytest.raises(DatasetError, match="nested too deeply"):
        parse_dataset(folder)


def test_hostile_image_cells_cost_one_image_each(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not for the model")
    (images / "link.png").symlink_to(secret)
    (images / "folder.png").mkdir()
    os.mkfifo(images / "pipe.png")
    cells = {
        "parent": "../secret.png",
        "absolute": str(secret),
        "link": "link.png",
        "nul": "a\0b.png",
        "huge": "x/" * 100_000,
        "folder": "folder.png",
        "fifo": "pipe.png",
        "missing": "nowhere.png",
    }
    frame = pd.DataFrame({"id": list(cells), "image": list(cells.values())})
    config = ContentConfig(image_column="image", image_dir=images, cache_dir=tmp_path / "cache")
    out = embed_content(frame, config)
    assert not out.has_image.any()
    assert set(out.image_errors) == set(cells)
    for key in ("parent", "absolute", "link"):
        assert "outside the image folder" in out.image_errors[key]
    assert "not a usable path" in out.image_errors["nul"]
    assert all(len(reason) < 1000 for reason in out.image_errors.values())
    for key in ("folder", "fifo"):
        assert "not a regular file" in out.image_errors[key]
