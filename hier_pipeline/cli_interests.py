"""`hier interests QUERY ...`: the retrieval API over the served interests, on the command line;
and the plain-text table every `hier` command that prints rows prints them in."""

from __future__ import annotations

import argparse
import json
import math
import sys

from hier_pipeline.files.home import default_home


def add_interest_queries(commands: argparse._SubParsersAction) -> None:
    """`hier interests QUERY ...`: the retrieval API over the materialised interests."""
    interests = commands.add_parser(
        "interests", help="query the materialised interest tokens and embeddings"
    )
    queries = interests.add_subparsers(dest="query", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dataset", help="dataset name under $HIER_HOME/interests (default: the only one)"
    )
    common.add_argument("--json", action="store_true", help="print JSON")
    counted = argparse.ArgumentParser(add_help=False, parents=[common])
    counted.add_argument("--k", type=int, default=10, help="how many to return")
    ranked = argparse.ArgumentParser(add_help=False, parents=[counted])
    ranked.add_argument("--by", choices=["embedding", "tokens"], default="embedding")

    recommend = queries.add_parser(
        "recommend", parents=[ranked], help="top items (or advertisers) for a user"
    )
    recommend.add_argument("user")
    recommend.add_argument("--advertisers", action="store_true", help="rank advertisers instead")
    recommend.set_defaults(
        ask=lambda index, a: (index.top_advertisers if a.advertisers else index.top_items)(
            a.user, a.k, a.by
        )
    )
    similar = queries.add_parser("similar", parents=[ranked], help="items similar to an item")
    similar.add_argument("item")
    similar.set_defaults(ask=lambda index, a: index.similar_items(a.item, a.k, a.by))
    explain = queries.add_parser(
        "explain", parents=[common], help="why an item suits a user: the tokens they share"
    )
    explain.add_argument("user")
    explain.add_argument("item")
    explain.set_defaults(ask=lambda index, a: index.explain(a.user, a.item))
    users = queries.add_parser(
        "users", parents=[counted], help="users closest to an interest token"
    )
    users.add_argument("token", help="e.g. L1:07.3")
    users.set_defaults(ask=lambda index, a: index.users_for_interest(a.token, a.k))
    serves = queries.add_parser(
        "serves", parents=[common], help="the interests an advertiser serves"
    )
    serves.add_argument("advertiser")
    serves.set_defaults(ask=lambda index, a: index.advertiser_interests(a.advertiser))
    interests.set_defaults(run=_interests)


def _interests(arguments: argparse.Namespace) -> int:
    """Exit 2 with a one-line reason when the outputs or an id are missing."""
    from dataclasses import asdict

    from hier_pipeline.interests.index import InterestIndex, UnknownEntityError
    from hier_pipeline.release.serving import find_serving_folder

    try:
        index = InterestIndex.open(find_serving_folder(default_home(), arguments.dataset))
        answer = arguments.ask(index, arguments)
    except (FileNotFoundError, UnknownEntityError, ValueError) as error:
        print(f"hier interests {arguments.query}: {error}", file=sys.stderr)
        return 2
    plain = [asdict(row) for row in answer] if isinstance(answer, list) else asdict(answer)
    if arguments.json:
        print(json.dumps(plain, indent=2))
    elif isinstance(plain, list):  # matches or interests
        print(text_table(plain))
    else:  # an explanation: its scores, then the shared tokens
        shared = plain.pop("shared")
        print("\n".join(f"{k}: {v}" for k, v in plain.items()) + "\n\n" + text_table(shared))
    return 0


def text_table(rows: list[dict[str, object]]) -> str:
    """Rows of the same keys as aligned columns under their keys; floats to 4 places."""
    if not rows:
        return "(nothing)"
    cells = [[_cell(v) for v in r.values()] for r in rows]
    headers = list(rows[0])
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else "-"
    return "-" if value is None else str(value)
