"""Frozen pretrained content encoders (text: all-MiniLM-L6-v2, image: EfficientNet-Lite0) behind a
content-hash cache, so each distinct text or image is embedded once, ever."""

from hier_pipeline.content.cache import CacheStats, EmbeddingCache, EncodeResult
from hier_pipeline.content.embed import (
    ContentConfig,
    ContentEmbeddings,
    Encoders,
    embed_content,
    join_text,
)
from hier_pipeline.content.image_encoder import (
    ImageEncoder,
    ImageEncoderConfig,
    ImageError,
    image_cache_id,
    load_image,
    read_image_file,
)
from hier_pipeline.content.text_encoder import TextEncoder, TextEncoderConfig, text_cache_id

__all__ = [
    "CacheStats",
    "ContentConfig",
    "ContentEmbeddings",
    "EmbeddingCache",
    "EncodeResult",
    "Encoders",
    "ImageEncoder",
    "ImageEncoderConfig",
    "ImageError",
    "TextEncoder",
    "TextEncoderConfig",
    "embed_content",
    "image_cache_id",
    "join_text",
    "load_image",
    "read_image_file",
    "text_cache_id",
]
