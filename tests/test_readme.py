"""The README a newcomer reads and the docs it points at: short enough to finish, every relative
link resolving (anchors into markdown files included), and a layout map that matches the tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = {
    "dataset contract": ROOT / "docs" / "dataset.md",
    "evaluation": ROOT / "docs" / "evaluation.md",
    "benchmarks": ROOT / "benchmarks" / "README.md",
}
MAX_README_BYTES = 25_000

FENCED = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^[ \t]*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
LAYOUT = re.compile(
    r"^## Layout[ \t]*\n+[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE
)


def markdown_files() -> list[Path]:
    return sorted({README, *DOCS.values(), *(ROOT / "docs").glob("*.md")})


def prose(text: str) -> str:
    """`text` without code blocks and code spans, where brackets are not links."""
    return INLINE_CODE.sub("", FENCED.sub("", text))


def relative_links(path: Path) -> list[str]:
    text = prose(path.read_text(encoding="utf-8"))
    targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
    return [t for t in targets if not SCHEME.match(t)]


def anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    for line in FENCED.sub("", path.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            if seen[slug]:
                seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def layout_paths() -> list[str]:
    """The first word of each line of the `## Layout` block that does not start with a space."""
    match = LAYOUT.search(README.read_text(encoding="utf-8"))
    assert match, "README has no `## Layout` heading followed by a fenced block"
    return [line.split()[0] for line in match.group(1).splitlines() if line[:1].strip()]


def test_readme_is_short_enough_to_finish() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size:,} bytes; move detail into docs/"


def test_the_docs_exist_and_the_readme_links_each() -> None:
    linked = {(README.parent / target.split("#")[0]).resolve() for target in relative_links(README)}
    for name, doc in DOCS.items():
        assert doc.is_file(), f"the {name} doc {doc.relative_to(ROOT)} is missing"
        assert doc.resolve() in linked, f"README does not link to {doc.relative_to(ROOT)}"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in relative_links(path):
        location, _, anchor = target.partition("#")
        location = location.split("?")[0]
        if location.startswith("/"):
            resolved = ROOT / location.lstrip("/")
        else:
            resolved = (path.parent / location) if location else path
        if not resolved.exists():
            broken.append(f"{target} (no such path)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{path.relative_to(ROOT)} has broken links: {broken}"


def test_layout_map_names_existing_folders_and_files() -> None:
    paths = layout_paths()
    assert paths, "the layout map is empty"
    missing = [
        p
        for p in paths
        if (p.endswith("/") and not (ROOT / p).is_dir())
        or (p.endswith(".py") and not (ROOT / p).is_file())
    ]
    assert not missing, f"the README's layout map names paths that do not exist: {missing}"


def test_layout_map_names_every_package() -> None:
    mapped = set(layout_paths())
    packages = {
        init.parent.relative_to(ROOT).as_posix() + "/"
        for init in (ROOT / "hier_pipeline").rglob("__init__.py")
    }
    missing = sorted(packages - mapped)
    assert not missing, f"packages missing from the README's layout map: {missing}"
