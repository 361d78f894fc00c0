"""EfficientNet-Lite0 image encoder: real photos classified sensibly, hostile files reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sklearn.datasets
from PIL import Image

from hier_pipeline.content import (
    ImageEncoder,
    ImageEncoderConfig,
    ImageError,
    load_image,
    read_image_file,
)
from tests.builders import png_bytes, png_claiming

# sklearn ships two real photos. ImageNet-1k indices (the packages ship no label file):
# 442 bell cote, 483 castle, 497 church, 538 dome, 663 monastery, 698 palace; 985 daisy.
SAMPLE_IMAGES = Path(sklearn.datasets.__file__).parent / "images"
TEMPLE_CLASSES = {442, 483, 497, 538, 663, 698}
DAISY = 985


@pytest.fixture(scope="module")
def encoder() -> ImageEncoder:
    return ImageEncoder(ImageEncoderConfig(batch_size=4))


def test_temple_photo_gets_a_building_class(encoder: ImageEncoder) -> None:
    top5 = encoder.classify((SAMPLE_IMAGES / "china.jpg").read_bytes())
    assert top5[0][0] in TEMPLE_CLASSES
    assert len(TEMPLE_CLASSES & {c for c, _ in top5}) >= 2


def test_flower_photo_is_a_daisy(encoder: ImageEncoder) -> None:
    top5 = encoder.classify((SAMPLE_IMAGES / "flower.jpg").read_bytes())
    assert top5[0][0] == DAISY


def test_features_are_1280d_unit_norm_and_deterministic(encoder: ImageEncoder) -> None:
    photo = (SAMPLE_IMAGES / "china.jpg").read_bytes()
    first = encoder.encode_items([photo, photo])
    again = encoder.encode_items([photo])
    assert first.vectors.shape == (2, 1280)
    assert first.ok.all()
    np.testing.assert_allclose(np.linalg.norm(first.vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(first.vectors[0], again.vectors[0], atol=1e-6)


@pytest.mark.parametrize(
    ("size", "side"), [((64, 64), 128), ((5, 7), 64), ((100, 300), 224), ((640, 427), 224)]
)
def test_small_images_are_upsampled_at_most_twice(size: tuple[int, int], side: int) -> None:
    assert load_image(png_bytes(Image.new("RGB", size, (10, 200, 30)))).shape == (3, side, side)


def test_a_batch_of_mixed_sizes_encodes_each_image_as_alone(encoder: ImageEncoder) -> None:
    photo = (SAMPLE_IMAGES / "flower.jpg").read_bytes()
    thumbnail = png_bytes(Image.open(SAMPLE_IMAGES / "china.jpg").resize((64, 48)))
    mixed = encoder.encode_items([thumbnail, photo, thumbnail])
    assert mixed.ok.all()
    for row, item in ((0, thumbnail), (1, photo)):
        alone = encoder.encode_items([item]).vectors[0]
        np.testing.assert_allclose(mixed.vectors[row], alone, atol=1e-5)
    assert not np.allclose(mixed.vectors[0], mixed.vectors[1], atol=1e-2)


def test_odd_modes_and_sizes_are_accepted(encoder: ImageEncoder) -> None:
    cutout = Image.new("RGBA", (300, 120), (0, 0, 0, 0))
    cutout.paste((200, 30, 30, 255), (100, 20, 200, 100))
    items = [
        png_bytes(cutout),
        png_bytes(Image.new("L", (5, 7), 128)),
        png_bytes(Image.new("P", (64, 64))),
    ]
    assert encoder.encode_items(items).ok.all()


def test_hostile_files_are_reported_per_item_not_raised(encoder: ImageEncoder) -> None:
    good = png_bytes(Image.new("RGB", (64, 64), (10, 200, 10)))
    jpeg = (SAMPLE_IMAGES / "flower.jpg").read_bytes()
    bombs = [png_claiming(20_000, 20_000), png_claiming(8_000, 8_000)]  # over Pillow's / our cap
    items = [good, b"name,price\nshoe,10\n", good[: len(good) // 2], jpeg[:2000], *bombs, b""]
    names = ["good.png", "table.csv", "cut.png", "cut.jpg", "bomb.png", "big.png", "empty.png"]
    result = encoder.encode_items(items, names)
    assert result.ok.tolist() == [True] + [False] * 6
    assert "over the 50000000 limit" in str(result.reasons[5])
    assert result.reasons[0] is None
    for name, reason in zip(names[1:], result.reasons[1:], strict=True):
        assert reason is not None
        assert reason.startswith(f"{name}: ")
    assert not result.vectors[1:].any()
    np.testing.assert_allclose(
        result.vectors[0], encoder.encode_items([good]).vectors[0], atol=1e-6
    )


def test_pixel_limit_is_checked_before_decoding() -> None:
    with pytest.raises(ImageError, match=r"big\.png: 200x200 pixels, over the 10000 limit"):
        load_image(png_bytes(Image.new("RGB", (200, 200))), "big.png", max_pixels=10_000)


def test_single_image_helpers_raise_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"notes\.txt: not an image file"):
        load_image(b"just some text", "notes.txt")
    with pytest.raises(ImageError, match=r"missing\.png: cannot read"):
        read_image_file(tmp_path / "missing.png", max_bytes=1000)
    with pytest.raises(ImageError, match="not a regular file"):
        read_image_file(tmp_path, max_bytes=1000)
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * 2000)
    with pytest.raises(ImageError, match="over the 1000-byte limit"):
        read_image_file(big, max_bytes=1000)
