"""One writer per database file: a second load of the same DuckDB file fails at once, clearly.

Each load builds its own temporary file and renames it into place, so two concurrent loads would
not tear the file, but the later rename would silently replace the earlier run's database under
the graph and model built from it. Dagster's pool already serialises its own runs; this lock
covers everything else (the CLI, a second Dagster instance, a notebook).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path


class DatabaseInUseError(RuntimeError):
    """Another run is writing the same database file right now."""


@contextmanager
def exclusive_lock(database: Path, wait: bool = False) -> Iterator[None]:
    """Hold the write lock of `database` for the block, or raise `DatabaseInUseError` at once
    (with `wait`: block until the holder releases it, for stores whose writers queue briefly).

    An advisory `flock` on a hidden file beside the database: the kernel releases it when the
    holder exits, even when it is killed, so a crashed run never leaves a stale lock behind.
    """
    lock = database.with_name(f".{database.name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise DatabaseInUseError(
                f"database {database} is in use by another run ({holder}): wait for it to"
                " finish, or write to another folder"
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}, since {datetime.now():%Y-%m-%d %H:%M:%S}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
