"""Small procedural product images that encode the planted hierarchy visually.

Background hue follows the coarse interest, the central shape the mid interest (within its coarse),
and the pattern on the shape the fine interest (within its mid); per-product seeded jitter and
pixel noise keep images of one fine interest similar but never identical. An image encoder can
therefore recover the hierarchy from pixels alone, as a weaker, complementary view to text.
"""

from __future__ import annotations

import colorsys
import io

import numpy as np
from PIL import Image, ImageDraw


def _rgb(hue: float, lightness: float, saturation: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hls_to_rgb(hue % 1.0, lightness, saturation)
    return round(r * 255), round(g * 255), round(b * 255)


def _shape(draw: ImageDraw.ImageDraw, kind: int, box: tuple[float, float, float, float]) -> None:
    """Draw filled shape ``kind`` (circle, square, triangle, diamond) into a mask."""
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if kind == 0:
        draw.ellipse(box, fill=255)
    elif kind == 1:
        draw.rectangle(box, fill=255)
    elif kind == 2:
        draw.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=255)
    else:
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=255)


def _pattern(
    draw: ImageDraw.ImageDraw, kind: int, size: int, step: int, ink: tuple[int, ...]
) -> None:
    """Draw pattern ``kind`` (horizontal stripes, vertical stripes, dots, diagonals) everywhere."""
    width = max(1, step // 3)
    for k in range(-size, 2 * size, step):
        if kind == 0:
            draw.line([(0, k), (size, k)], fill=ink, width=width)
        elif kind == 1:
            draw.line([(k, 0), (k, size)], fill=ink, width=width)
        elif kind == 2:
            for y in range(step // 2, size, step):
                draw.ellipse([(k - width, y - width), (k + width, y + width)], fill=ink)
        else:
            draw.line([(k, 0), (k + size, size)], fill=ink, width=width)


def product_image(fine: int, seed: int, product_id: int, size: int = 64) -> bytes:
    """PNG bytes for one product; depends only on (fine, seed, product_id, size)."""
    rng = np.random.default_rng([seed, product_id, 0x1A6E])
    coarse, mid_pos, fine_pos = fine // 16, (fine // 4) % 4, fine % 4
    hue = coarse / 8 + rng.normal(0, 0.012)
    img = Image.new("RGB", (size, size), _rgb(hue, rng.uniform(0.55, 0.7), rng.uniform(0.45, 0.7)))
    layer = Image.new("RGB", (size, size), _rgb(hue + 0.5, rng.uniform(0.75, 0.85), 0.5))
    step = max(3, round(size / rng.uniform(7, 9)))
    _pattern(ImageDraw.Draw(layer), fine_pos, size, step, _rgb(hue + 0.5, 0.25, 0.6))
    mask = Image.new("L", (size, size), 0)
    half = size * rng.uniform(0.28, 0.38)
    cx, cy = size / 2 + rng.normal(0, size / 20, 2)
    _shape(ImageDraw.Draw(mask), mid_pos, (cx - half, cy - half, cx + half, cy + half))
    img.paste(layer, (0, 0), mask)
    noisy = np.asarray(img, dtype=np.int16) + rng.integers(-12, 13, (size, size, 3))
    out = io.BytesIO()
    # Fixed encoder settings; Pillow writes no timestamp chunk, so equal pixels give equal bytes.
    pixels = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), "RGB")
    pixels.save(out, format="PNG", optimize=False, compress_level=6)
    return out.getvalue()
