"""Sampling the synthetic ads/commerce world from one seed.

Every entity and event is drawn with a single ``numpy.random.Generator`` in a fixed order, so one
config always gives the same world. Times are integer seconds since the Unix epoch (naive UTC).
Entity arrays are indexed 0..n-1 in creation order; ids in the written tables are index + 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hier_pipeline.synthetic import vocabulary as voc

DAY = 86_400
WEEK = 7 * DAY
HOUR = 3_600
# Affinity of a user's fine interest to a product's fine interest by the level they share:
# steep, so deep-funnel events are driven by the planted fine interests.
AFFINITY = {"fine": 1.0, "mid": 0.25, "coarse": 0.06, "other": 0.01}
AGE_BANDS = ("18-24", "25-34", "35-44", "45-54", "55-64", "65+")
REGIONS = ("north_america", "europe", "asia_pacific", "latin_america", "middle_east_africa")
EVENT_TYPES = ("impression", "click", "add_to_cart", "purchase")

Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class SyntheticConfig:
    """Knobs of the generator; ``scale`` multiplies every entity and event count."""

    scale: float = 1.0
    seed: int = 0
    start: str = "2025-01-01"
    weeks: int = 26
    users: int = 2000
    advertisers: int = 100
    products: int = 3000
    organic_per_user_week: float = 1.6  # mean organic impressions of an active user per week
    random_exposure: float = 0.4  # share of organic impressions that ignore the user's interests
    campaigns_per_advertiser: float = 3.0
    cost_per_impression: float = 50.0  # campaign budget spent per impression
    cold_start_at: float = 0.8  # fraction of the timeline after which new entities arrive
    cold_advertiser_fraction: float = 0.1
    late_product_fraction: float = 0.05  # new products of existing advertisers in that window
    image_fraction: float = 0.9
    image_size: int = 64


@dataclass(frozen=True)
class World:
    """Everything sampled: per-entity column arrays plus the timeline bounds (epoch seconds)."""

    start: int
    cold_start_after: int
    end: int
    users: Arrays
    advertisers: Arrays
    products: Arrays
    campaigns: Arrays
    events: Arrays
    feedback: Arrays


@dataclass(frozen=True)
class _Catalog:
    """Product lookups used every week: products sorted by fine interest, and per advertiser."""

    by_fine: np.ndarray  # product indices sorted by fine interest
    bounds: np.ndarray  # by_fine[bounds[f]:bounds[f + 1]] are the products of fine f
    mid_of: np.ndarray
    owned: list[np.ndarray]  # product indices per advertiser

    @staticmethod
    def of(prods: Arrays) -> _Catalog:
        by_fine = np.argsort(prods["fine"], kind="stable")
        bounds = np.searchsorted(prods["fine"][by_fine], np.arange(voc.N_FINE + 1))
        owners = range(int(prods["owner"].max()) + 1)
        owned = [np.flatnonzero(prods["owner"] == i) for i in owners]
        return _Catalog(by_fine, bounds, prods["fine"] // 4, owned)


def _count(base: int, scale: float, minimum: int) -> int:
    return max(minimum, round(base * scale))


def mixture(users: Arrays, week: float) -> np.ndarray:
    """Users' fine-interest mixture at a week: one interest fades out, a new one ramps up."""
    mix = users["base"].copy()
    rows = np.arange(len(mix))
    fade = np.clip(1 - (week - users["fade_start"]) / users["fade_len"], 0, 1)
    mix[rows, users["fade_fine"]] *= fade
    mix[rows, users["new_fine"]] += (
        np.clip((week - users["new_start"]) / 4, 0, 1) * users["new_weight"]
    )
    return mix / mix.sum(1, keepdims=True)


class _Sampler:
    """Draws entities and events in a fixed order from one Generator (the order is the contract)."""

    def __init__(self, cfg: SyntheticConfig) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        self.t0 = int(np.datetime64(cfg.start, "s").astype(np.int64))
        self.end = self.t0 + cfg.weeks * WEEK
        self.cold = self.t0 + int(cfg.cold_start_at * cfg.weeks * 7) * DAY  # whole days

    def delay(self, n: int, mean_s: float) -> np.ndarray:
        """Positive gap between two funnel steps, capped so a whole funnel stays within a day."""
        return 1 + np.minimum(self.rng.exponential(mean_s, n), 6 * HOUR).astype(np.int64)

    def users(self) -> Arrays:
        """Users with a sparse Dirichlet mixture over fine interests in 1-2 coarse domains."""
        rng, cfg, n = self.rng, self.cfg, _count(self.cfg.users, self.cfg.scale, 20)
        early = rng.random(n) < 0.75
        signup = np.where(
            early, self.t0 - rng.integers(DAY, 365 * DAY, n), rng.integers(self.t0, self.cold, n)
        )
        base = np.zeros((n, voc.N_FINE))
        fade_fine, new_fine = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for i in range(n):
            domains = rng.choice(voc.N_COARSE, 1 + int(rng.random() < 0.4), replace=False)
            fines: list[int] = []
            while len(fines) < 2 + min(int(rng.poisson(1.5)), 5):
                c = (
                    int(rng.choice(domains))
                    if rng.random() < 0.9
                    else int(rng.integers(voc.N_COARSE))
                )
                own = [f // 4 for f in fines if f // 16 == c]
                reuse = bool(own) and rng.random() < 0.6  # stay near a mid already liked
                m = int(rng.choice(own)) if reuse else c * 4 + int(rng.integers(4))
                if (f := m * 4 + int(rng.integers(4))) not in fines:
                    fines.append(f)
            base[i, fines] = rng.dirichlet(np.full(len(fines), 0.8))
            fade_fine[i] = fines[int(rng.integers(len(fines)))]
            fresh = [f for f in range(domains[0] * 16, domains[0] * 16 + 16) if f not in fines]
            new_fine[i] = fresh[int(rng.integers(len(fresh)))]
        return {
            "signup": np.sort(signup),
            "age_band": rng.choice(
                np.array(AGE_BANDS, object), n, p=[0.12, 0.26, 0.22, 0.18, 0.13, 0.09]
            ),
            "region": rng.choice(np.array(REGIONS, object), n, p=[0.3, 0.3, 0.2, 0.12, 0.08]),
            "activity": rng.lognormal(-0.125, 0.5, n),
            "base": base,
            "fade_fine": fade_fine,
            "fade_start": rng.uniform(0, cfg.weeks, n),
            "fade_len": rng.uniform(3, 10, n),
            "new_fine": new_fine,
            "new_start": rng.uniform(0.2 * cfg.weeks, 0.9 * cfg.weeks, n),
            "new_weight": rng.uniform(0.3, 0.8, n),
        }

    def advertisers(self) -> Arrays:
        """Advertisers in one coarse domain and 1-3 of its mids; the latest ones are cold start."""
        rng, n = self.rng, _count(self.cfg.advertisers, self.cfg.scale, 4)
        n_cold = max(1, round(n * self.cfg.cold_advertiser_fraction))
        warm = self.t0 - rng.integers(30 * DAY, 3 * 365 * DAY, n - n_cold)
        late = self.cold + rng.integers(0, (self.end - self.cold) // 2, n_cold)
        created = np.sort(np.concatenate([warm, late]))
        primary = rng.permutation(
            np.resize(rng.permutation(voc.N_MID), n)
        )  # every mid gets sellers
        mids = np.full((n, 3), -1, np.int64)
        texts = []
        for i, m in enumerate(primary):
            others = [x for x in range(m // 4 * 4, m // 4 * 4 + 4) if x != m]
            extra = rng.choice(others, int(rng.choice(3, p=[0.4, 0.35, 0.25])), replace=False)
            chosen = [int(m), *map(int, extra)]
            mids[i, : len(chosen)] = chosen
            texts.append(voc.advertiser_text(rng, chosen))
        return {
            "created": created,
            "cold": created >= self.cold,
            "coarse": primary // 4,
            "mids": mids,
            "size": rng.lognormal(0, 0.8, n),
            "name": np.array([t[0] for t in texts], object),
            "description": np.array([t[1] for t in texts], object),
        }

    def products(self, adv: Arrays) -> Arrays:
        """Products in their advertiser's mids, heavy-tailed popularity, staggered creation."""
        rng, cfg, t0, cold, end = self.rng, self.cfg, self.t0, self.cold, self.end
        n_adv = len(adv["created"])
        n = _count(cfg.products, cfg.scale, 2 * n_adv)
        sizes = adv["size"] / adv["size"].sum()
        owner = np.concatenate([np.arange(n_adv), rng.choice(n_adv, n - n_adv, p=sizes)])
        n_mids = (adv["mids"][owner] >= 0).sum(1)
        mid = adv["mids"][owner, (rng.random(n) * n_mids).astype(np.int64)]
        fine = mid * 4 + rng.integers(0, 4, n)
        a_created, a_cold = adv["created"][owner], adv["cold"][owner]
        late = ~a_cold & (rng.random(n) < cfg.late_product_fraction)
        during, u = rng.random(n) < 0.15, rng.random(n)
        warm = np.where(during, t0 + u * (cold - t0), a_created + u * (t0 - a_created))
        warm = np.where(late, cold + u * 0.6 * (end - cold), warm)
        created = np.where(a_cold, a_created + u * 0.5 * (end - a_created), warm).astype(np.int64)
        order = np.argsort(created, kind="stable")
        texts = [voc.product_text(rng, int(f)) for f in fine[order]]
        prices = rng.lognormal(np.log([voc.MID[m].price for m in mid[order]]), 0.45)
        return {
            "created": created[order],
            "owner": owner[order],
            "fine": fine[order],
            "title": np.array([t[0] for t in texts], object),
            "description": np.array([t[1] for t in texts], object),
            "price": np.round(prices, 2),
            "popularity": rng.lognormal(0, 1.3, n),
            "has_image": rng.random(n) < cfg.image_fraction,
        }

    def campaigns(self, adv: Arrays) -> Arrays:
        """Campaigns of whole weeks [w0, w1), each promoting one of its advertiser's mids."""
        rng, cfg, t0 = self.rng, self.cfg, self.t0
        first = np.maximum(0, -(-(adv["created"] - t0) // WEEK))  # first week after creation
        per_adv = (1 + rng.poisson(cfg.campaigns_per_advertiser - 1, len(first))) * (
            first < cfg.weeks
        )
        owner = np.repeat(np.arange(len(first)), per_adv)
        n = len(owner)
        w0 = first[owner] + (rng.random(n) * (cfg.weeks - first[owner])).astype(np.int64)
        w1 = np.minimum(w0 + rng.integers(2, 9, n), cfg.weeks)
        start = np.maximum(adv["created"][owner], t0 + w0 * WEEK - rng.integers(0, 2 * DAY, n))
        n_mids = (adv["mids"][owner] >= 0).sum(1)
        out = {
            "start": start,
            "end": t0 + w1 * WEEK - rng.integers(0, 6 * HOUR, n),  # after the last funnel step
            "owner": owner,
            "w0": w0,
            "w1": w1,
            "budget": np.round(rng.lognormal(np.log(10_000), 0.7, n), 2),
            "conversion": rng.random(n) < 0.5,
            "mid": adv["mids"][owner, (rng.random(n) * n_mids).astype(np.int64)],
        }
        order = np.argsort(start, kind="stable")
        out = {k: v[order] for k, v in out.items()}
        out["rate"] = out["budget"] / (out["w1"] - out["w0"]) / cfg.cost_per_impression
        out["noise"] = np.where(out["conversion"], 0.02, 0.3)  # awareness targets broadly
        return out

    def organic(self, mix: np.ndarray, weight: np.ndarray, cat: _Catalog) -> np.ndarray:
        """Organic exposure: browsing near a sampled interest (blurred to its mid/coarse) or random."""
        rng, n = self.rng, len(mix)
        fine = np.minimum((mix.cumsum(1) < rng.random(n)[:, None]).sum(1), voc.N_FINE - 1)
        blur = rng.random(n)
        fine = np.where(blur < 0.2, fine // 4 * 4 + rng.integers(0, 4, n), fine)
        fine = np.where(blur > 0.92, fine // 16 * 16 + rng.integers(0, 16, n), fine)
        # a popularity-weighted pick inside each fine interest's products
        cw = np.concatenate([[0.0], np.cumsum(weight[cat.by_fine])])
        lo, hi = cw[cat.bounds[fine]], cw[cat.bounds[fine + 1]]
        pos = np.searchsorted(cw[1:], lo + rng.random(n) * (hi - lo), side="right")
        picked = cat.by_fine[np.minimum(pos, len(weight) - 1)]
        fallback = (hi <= lo) | (weight[picked] <= 0) | (rng.random(n) < self.cfg.random_exposure)
        picked[fallback] = rng.choice(len(weight), int(fallback.sum()), p=weight / weight.sum())
        return picked

    def campaign_reach(
        self, week: int, camps: Arrays, mix_mid: np.ndarray, weight: np.ndarray, cat: _Catalog
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Campaign impressions: users drawn by their weight on the campaign's mid, plus noise.

        ``mix_mid`` is zero for users who cannot be reached yet (not signed up).
        """
        reachable = mix_mid.sum(1) > 0
        us, ps, cs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for c in np.flatnonzero((camps["w0"] <= week) & (week < camps["w1"])):
            items = cat.owned[camps["owner"][c]]
            pw = weight[items] * np.where(cat.mid_of[items] == camps["mid"][c], 1.0, 0.05)
            target = mix_mid[:, camps["mid"][c]] + camps["noise"][c] * reachable
            n = int(self.rng.poisson(camps["rate"][c]))
            if n == 0 or pw.sum() <= 0:
                continue
            us.append(self.rng.choice(len(target), n, p=target / target.sum()))
            ps.append(self.rng.choice(items, n, p=pw / pw.sum()))
            cs.append(np.full(n, c))
        return np.concatenate(us), np.concatenate(ps), np.concatenate(cs)

    def events(self, users: Arrays, prods: Arrays, camps: Arrays) -> tuple[Arrays, Arrays]:
        """Week by week: impressions, then a funnel whose step rates rise steeply with the match."""
        rng, fine_of, a, cat = self.rng, prods["fine"], AFFINITY, _Catalog.of(prods)
        ev: list[tuple[np.ndarray, ...]] = []
        fb: list[tuple[np.ndarray, ...]] = []
        for week in range(self.cfg.weeks):
            ws = self.t0 + week * WEEK
            weight = prods["popularity"] * (prods["created"] < ws)
            active = users["signup"] < ws
            if weight.sum() <= 0 or not active.any():
                continue
            mix = mixture(users, week)
            mix_mid = mix.reshape(len(mix), voc.N_MID, 4).sum(2)
            mix_coarse = mix_mid.reshape(len(mix), voc.N_COARSE, 4).sum(2)
            idx = np.flatnonzero(active)
            u_org = np.repeat(
                idx, rng.poisson(self.cfg.organic_per_user_week * users["activity"][idx])
            )
            p_org = self.organic(mix[u_org], weight, cat)
            u_c, p_c, c_c = self.campaign_reach(week, camps, mix_mid * active[:, None], weight, cat)
            u, p = np.concatenate([u_org, u_c]), np.concatenate([p_org, p_c])
            c, f, n = np.concatenate([np.full(len(u_org), -1), c_c]), fine_of[p], len(u)
            match = (  # = sum over the user's fine interests of weight x AFFINITY(level shared)
                mix[u, f] * (a["fine"] - a["mid"])
                + mix_mid[u, f // 4] * (a["mid"] - a["coarse"])
                + mix_coarse[u, f // 16] * (a["coarse"] - a["other"])
                + a["other"]
            )
            t_imp = ws + rng.integers(0, 6 * DAY, n)
            click = rng.random(n) < 0.02 + 0.5 * match
            cart = click & (rng.random(n) < 0.04 + 0.6 * match)
            buy = cart & (rng.random(n) < 0.1 + 0.8 * match)
            t_click = t_imp + self.delay(n, 120)
            t_cart = t_click + self.delay(n, 900)
            stages = ((np.ones(n, bool), t_imp), (click, t_click), (cart, t_cart))
            for code, (mask, t) in enumerate((*stages, (buy, t_cart + self.delay(n, 3600)))):
                ev.append((u[mask], p[mask], c[mask], np.full(mask.sum(), code), t[mask]))
            r, t_fb = rng.random(n), t_imp + self.delay(n, 1800)
            negative = ~click & (r < 0.08 * np.exp(-match / 0.04))  # far from the user's interests
            for code, mask in enumerate((r > 1 - 0.12 * match, negative)):
                fb.append((u[mask], p[mask], np.full(mask.sum(), code), t_fb[mask]))
        events = _stack(ev, ("user", "product", "campaign", "type", "time"))
        return events, _stack(fb, ("user", "product", "negative", "time"))


def _stack(chunks: list[tuple[np.ndarray, ...]], names: tuple[str, ...]) -> Arrays:
    """Concatenate weekly chunks and sort rows by (time, user, product, code) for stable output."""
    cols = [np.concatenate(col) for col in zip(*chunks, strict=True)]
    order = np.lexsort((cols[-2], cols[1], cols[0], cols[-1]))
    return {name: col[order] for name, col in zip(names, cols, strict=True)}


def sample_world(config: SyntheticConfig) -> World:
    """Draw the whole world from ``config.seed``."""
    s = _Sampler(config)
    users, adv = s.users(), s.advertisers()
    prods = s.products(adv)
    camps = s.campaigns(adv)
    events, feedback = s.events(users, prods, camps)
    return World(s.t0, s.cold, s.end, users, adv, prods, camps, events, feedback)
