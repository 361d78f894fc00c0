"""The README's generated parts, drawn from the one Definitions object so they cannot drift: the
asset graph as a mermaid diagram, the jobs, and every launchpad config with defaults.

`python -m assets.readme` rewrites only the blocks between `<!-- generated:NAME -->` and
`<!-- /generated:NAME -->` in README.md; `tests/assets/test_catalog.py` fails while they differ.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import dagster as dg

README = Path(__file__).resolve().parents[1] / "README.md"
QUOTES = "'\""  # around a return annotation written as a string


def asset_graph(defs: dg.Definitions) -> str:
    """A mermaid flowchart: one subgraph per group, one arrow per dependency."""
    graph = defs.resolve_asset_graph()
    nodes = sorted(graph.asset_nodes, key=lambda node: node.key.to_user_string())
    lines = ["```mermaid", "flowchart TD"]
    for group in sorted({node.group_name for node in nodes}):
        lines.append(f"  subgraph {group}")
        for node in (n for n in nodes if n.group_name == group):
            name = node.key.to_user_string()
            kinds = ", ".join(sorted(node.kinds))
            lines.append(f'    {_mermaid_id(name)}["{name}<br/>{kinds}"]')
        lines.append("  end")
    for node in nodes:
        for parent in sorted(node.parent_keys, key=lambda key: key.to_user_string()):
            lines.append(
                f"  {_mermaid_id(parent.to_user_string())} --> "
                f"{_mermaid_id(node.key.to_user_string())}"
            )
    lines.append("```")
    return "\n".join(lines)


def jobs(defs: dg.Definitions) -> str:
    """The jobs a user can launch, with the assets each selects."""
    rows = ["| job | assets | what it is for |", "|---|---|---|"]
    for job in sorted(defs.jobs or [], key=lambda job: job.name):
        resolved = defs.resolve_job_def(job.name)
        selected = sorted(k.to_user_string() for k in resolved.asset_layer.selected_asset_keys)
        description = " ".join((job.description or "").split())
        rows.append(f"| `{job.name}` | {', '.join(selected)} | {description} |")
    return "\n".join(rows)


def launchpad(defs: dg.Definitions) -> str:
    """Per Config class: the assets it configures, the core dataclass it maps to, and its own
    fields (an inherited class lists only what it adds) with defaults as the launchpad's YAML."""
    by_class: dict[type[dg.Config], list[str]] = {}
    for node in sorted(defs.resolve_asset_graph().asset_nodes, key=lambda n: n.key.path):
        config = _config_class(defs.get_assets_def(node.key))
        if config is not None:
            by_class.setdefault(config, []).append(node.key.to_user_string())
    return "\n\n".join(_config_table(config, assets) for config, assets in by_class.items())


def _config_table(config: type[dg.Config], assets: list[str]) -> str:
    parents = [base for base in config.__bases__ if base is not dg.Config]
    inherited = {name for base in parents for name in getattr(base, "model_fields", {})}
    core = getattr(config, "to_core", None)
    maps_to = inspect.signature(core).return_annotation if core else None
    head = f"`{config.__name__}` (`{config.__module__.replace('.', '/')}.py`)"
    if maps_to:
        head += f", mapped to the core `{str(maps_to).strip(QUOTES)}`"
    head += ": " + ", ".join(f"`{a}`" for a in assets)
    if parents:
        head += " (every field of " + ", ".join(f"`{b.__name__}`" for b in parents) + ", plus)"
    rows = ["| field | default | description |", "|---|---|---|"]
    for name, field in config.model_fields.items():
        if name not in inherited:
            default = json.dumps(field.get_default(call_default_factory=True))
            rows.append(f"| `{name}` | `{default}` | {field.description or ''} |")
    return head + "\n\n" + "\n".join(rows)


GENERATORS: dict[str, Callable[[dg.Definitions], str]] = {
    "asset-graph": asset_graph,
    "jobs": jobs,
    "launchpad": launchpad,
}


def render(text: str, defs: dg.Definitions) -> str:
    """`text` with every generated block replaced by its current content."""
    for name, generate in GENERATORS.items():
        pattern = re.compile(
            rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)", flags=re.DOTALL
        )
        if not pattern.search(text):
            raise ValueError(f"README has no block <!-- generated:{name} -->")
        text = pattern.sub(lambda m, g=generate: f"{m.group(1)}{g(defs)}\n{m.group(2)}", text)
    return text


def _config_class(assets_def: dg.AssetsDefinition) -> type[dg.Config] | None:
    parameter = inspect.signature(
        assets_def.op.compute_fn.decorated_fn, eval_str=True
    ).parameters.get("config")
    if parameter is None or not isinstance(parameter.annotation, type):
        return None
    return parameter.annotation if issubclass(parameter.annotation, dg.Config) else None


def _mermaid_id(name: str) -> str:
    return re.sub(r"\W", "_", name)


def main() -> None:
    from assets.definitions import defs

    README.write_text(render(README.read_text(encoding="utf-8"), defs), encoding="utf-8")
    print(f"updated the generated blocks of {README}", file=sys.stderr)


if __name__ == "__main__":
    main()
