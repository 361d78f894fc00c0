"""Atomic replacement of output files: readers see the previous file or the new one, never half.

Every output is written under a temporary name in the same folder (a rename across file systems
would copy, not swap), flushed to disk, and renamed over the target only when the writer finished.
A crash, a full disk or a permission error mid-write leaves the previous output as it was.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PARTIAL_SUFFIX = ".partial"


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path beside `target` to write to; it replaces `target` when the block ends
    without raising, and is removed when it raises (or when the rename itself fails)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(
        f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{PARTIAL_SUFFIX}"
    )
    try:
        yield temporary
        _fsync(temporary)
        os.replace(temporary, target)
        _fsync(target.parent)  # the rename itself survives a power cut
    finally:
        temporary.unlink(missing_ok=True)


def write_atomically(target: Path, content: str | bytes) -> Path:
    """`target.write_text` / `write_bytes` through `atomic_path`, for outputs held in memory."""
    with atomic_path(target) as partial:
        if isinstance(content, str):
            partial.write_text(content, encoding="utf-8")
        else:
            partial.write_bytes(content)
    return target


def partial_files(folder: Path) -> list[Path]:
    """Temporary files of `atomic_path` in `folder`: live writers' or dead writers' leftovers."""
    return sorted(folder.glob(f".*{PARTIAL_SUFFIX}"))


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
