"""The Dagster and MLflow UIs listen on 127.0.0.1 unless someone asks otherwise: neither has any
authentication, and both can run code or read every artifact."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def _recipe(target: str) -> list[str]:
    """The command lines of a Makefile target, as argument lists."""
    text = MAKEFILE.read_text(encoding="utf-8")
    match = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, flags=re.MULTILINE)
    assert match, f"no '{target}' target in the Makefile"
    return [shlex.split(line) for line in match.group(1).splitlines()]


def _host(arguments: list[str], flags: tuple[str, ...]) -> str | None:
    for i, argument in enumerate(arguments):
        if argument in flags and i + 1 < len(arguments):
            return arguments[i + 1]
        for flag in flags:
            if argument.startswith(f"{flag}="):
                return argument.split("=", 1)[1]
    return None


@pytest.mark.parametrize(
    ("target", "program", "flags"),
    [("dev", "dagster", ("-h", "--host")), ("mlflow", "mlflow", ("-h", "--host"))],
)
def test_ui_binds_to_loopback(target: str, program: str, flags: tuple[str, ...]) -> None:
    launches = [c for c in _recipe(target) if c and c[0].endswith(f"/{program}")]
    assert launches, f"'make {target}' does not start {program}"
    for command in launches:
        assert _host(command, flags) == "127.0.0.1", shlex.join(command)


def test_urls_shown_to_users_are_loopback() -> None:
    from resources import MLflowResource

    assert MLflowResource().ui_url.startswith("http://127.0.0.1:")
