"""No credentials in the repository: every tracked file is scanned for the shapes real secrets have
(cloud keys, private keys, API tokens), and no key or environment file is tracked at all."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_BYTES = 5 * 1024 * 1024  # larger files are data, checked by their own tests

SECRET_SHAPES = {
    "AWS access key id": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "AWS secret access key": r"aws_secret_access_key\s*[=:]\s*['\"]?[A-Za-z0-9/+]{40}",
    "private key": r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY( BLOCK)?-----",
    "GitHub token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "Slack token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    "Google API key": r"\bAIza[0-9A-Za-z_\-]{35}\b",
    "Hugging Face token": r"\bhf_[A-Za-z]{34,}\b",
    "OpenAI/Anthropic key": r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{32,}",
    "Stripe live key": r"\b[rs]k_live_[0-9A-Za-z]{20,}",
}
PATTERN = re.compile("|".join(f"(?P<g{i}>{p})" for i, p in enumerate(SECRET_SHAPES.values())))
FORBIDDEN_FILES = re.compile(r"(^|/)(\.env(\..+)?|id_(rsa|ed25519|ecdsa)|.+\.(pem|key|p12|pfx))$")


def find_secrets(text: str) -> list[str]:
    """The kind of every secret-shaped string in `text`."""
    names = list(SECRET_SHAPES)
    return [names[int(str(m.lastgroup)[1:])] for m in PATTERN.finditer(text)]


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in listed.split("\0") if name]


def test_the_scanner_finds_planted_secrets() -> None:
    """Built at run time, so that this file itself holds no secret-shaped string."""
    planted = {
        "AWS access key id": "AKIA" + "Q" * 16,
        "private key": "-----BEGIN " + "OPENSSH PRIVATE KEY-----",
        "GitHub token": "ghp_" + "a1" * 18,
        "Hugging Face token": "hf_" + "x" * 34,
    }
    for kind, secret in planted.items():
        assert find_secrets(f"config = '{secret}'\n") == [kind]
    assert find_secrets("AKIA is a prefix; sk-learn; hf_hub_download") == []


def test_no_tracked_file_holds_a_secret() -> None:
    found = []
    for name in tracked_files():
        path = REPO / name
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        found += [f"{name}: {kind}" for kind in find_secrets(data.decode("utf-8", "replace"))]
    assert not found, found


def test_no_key_or_environment_file_is_tracked() -> None:
    assert not [name for name in tracked_files() if FORBIDDEN_FILES.search(name)]
