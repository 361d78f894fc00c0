"""The coarse levels' merge profiles: tokens x tokens cosines from sparse counts (`similarity`)
against the dense tokens x users profiles they replaced, each in a fresh process.

    .venv/bin/python benchmarks/bench_merge.py [--tokens 3847] [--users 2500,200000]
        [--events 2500000] [--seed 0] [--ward-codes 3847,16667]

Random events (items by a Zipf-like popularity, users uniform) over `--tokens` finest codes of
20 items each; one run per user count, each form timed in its own process (wall, CPU, peak
RSS), and each form's sum of the cosines, to compare them by. Complete Journey's shape: 3,847
codes, 2.5k households, about 2.5M events before t2.

Then Ward's linkage of `--ward-codes` codes' cosines (random unit vectors, grouped 8 to 1), from
the distance matrix as `ward_groups` built it before (the expression's k x k temporaries) and
from the condensed distances written in place (`condensed_distances`), each in a fresh process.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness import measure, write_results

ITEMS_PER_TOKEN = 20
WARD_FORMS = ("matrix", "condensed")
SHARE = 0.5  # both parts; the co-engagement's is the one that reads the events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=3847)
    parser.add_argument("--users", default="2500,200000")
    parser.add_argument("--events", type=int, default=2_500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ward-codes", default="3847,16667")
    arguments = parser.parse_args()
    results = []
    for users in (int(u) for u in arguments.users.split(",")):
        shape = f"{arguments.tokens},{users},{arguments.events},{arguments.seed}"
        row: dict[str, Any] = {"tokens": arguments.tokens, "users": users}
        for form in ("dense", "sparse"):
            row[form] = measure(cosines, shape, form, threads=1)
        row["wall_ratio"] = round(row["dense"]["wall_s"] / row["sparse"]["wall_s"], 2)
        print(
            f"{users} users: dense {row['dense']['wall_s']} s, {row['dense']['peak_rss_gb']} GB;"
            f" sparse {row['sparse']['wall_s']} s, {row['sparse']['peak_rss_gb']} GB",
            flush=True,
        )
        results.append(row)
    linkages = []
    for codes in (int(c) for c in arguments.ward_codes.split(",") if c):
        row = {"codes": codes, **{form: measure(ward, str(codes), form) for form in WARD_FORMS}}
        row["same_groups"] = row["matrix"]["checksum"] == row["condensed"]["checksum"]
        print(f"ward, {codes} codes: {row}", flush=True)
        linkages.append(row)
    write_results("merge", {"runs": results, "ward": linkages})
    return 0


def cosines(shape: str, form: str) -> dict[str, Any]:
    """One form's cosines on the events `shape` (tokens, users, events, seed) describes, and a
    checksum to compare the forms by."""
    import torch
    import torch.nn.functional as F

    from hier_pipeline.interests.events import FunnelEvents
    from hier_pipeline.interests.merge import similarity

    tokens, users, count, seed = (int(part) for part in shape.split(","))
    generator = torch.Generator().manual_seed(seed)
    items = tokens * ITEMS_PER_TOKEN
    popularity = 1.0 / torch.arange(1, items + 1, dtype=torch.float64) ** 0.8
    item = torch.multinomial(popularity, count, replacement=True, generator=generator)
    user = torch.randint(users, (count,), generator=generator)
    labels = torch.randperm(items, generator=generator) % tokens
    fused = F.normalize(torch.randn(items, 64, generator=generator), dim=1)
    events = FunnelEvents(user, item, torch.zeros_like(item), torch.zeros_like(item))
    if form == "sparse":
        cosine = similarity(fused, labels, events, SHARE)
    else:  # the profiles as they were: tokens x users, dense
        profile = torch.zeros(tokens, users).index_put_(
            (labels[item], user), torch.ones(count), accumulate=True
        )
        engaged = F.normalize(profile.sqrt(), dim=1)
        engaged = F.normalize(engaged - engaged.mean(dim=0), dim=1)
        content = F.normalize(torch.zeros(tokens, 64).index_add_(0, labels, fused), dim=1)
        cosine = SHARE * (engaged @ engaged.T).double() + (1 - SHARE) * (content @ content.T)
    return {"checksum": float(cosine.sum())}


def ward(codes: str, form: str) -> dict[str, Any]:
    """Ward's groups (one per 8 codes) of random codes' cosines, by one form, and a checksum."""
    import torch
    import torch.nn.functional as F
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    from hier_pipeline.interests.merge import ward_groups

    count = int(codes)
    generator = torch.Generator().manual_seed(0)
    x = F.normalize(torch.randn(count, 64, generator=generator), dim=1)
    cosine = (x @ x.T).double()
    if form == "condensed":
        groups = ward_groups(cosine, count // 8)
    else:  # as ward_groups built its input before
        distance = (2 - 2 * cosine).clamp_min(0).sqrt().fill_diagonal_(0).numpy()
        tree = linkage(squareform(distance, checks=False), method="ward")
        groups = torch.as_tensor(fcluster(tree, count // 8, criterion="maxclust") - 1)
    weights = torch.arange(count, dtype=torch.float64) % 1009
    return {"checksum": float((groups.double() * weights).sum())}


if __name__ == "__main__":
    raise SystemExit(main())
