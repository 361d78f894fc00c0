"""One optimisation step of the interest model, and its validation.

One step: draw funnel positives (deep stages most often), sample every root's temporal
neighbourhood (users, positive items, the user's "not interested" items, random items), embed them,
and minimise  ranking + distill_weight * distillation + usage_weight * primitive usage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import cast

import numpy as np
import torch
from torch import Tensor

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import TemporalNeighborSampler
from hier_pipeline.graph.split import TemporalSplit, first_engagement_time
from hier_pipeline.model.checkpoint import Restorable
from hier_pipeline.model.device import mixed_precision, resolve_device
from hier_pipeline.model.distill import (
    DistillationConfig,
    DistillationLoss,
    ema_update,
    make_teacher,
)
from hier_pipeline.model.distributed import average_gradients, join_cluster
from hier_pipeline.model.examples import ExampleBatch, ExampleSampler
from hier_pipeline.model.factory import GraphEncoder, build_model
from hier_pipeline.model.history import InteractionHistory
from hier_pipeline.model.infer import embed_nodes, history_scores
from hier_pipeline.model.inputs import node_type_shapes
from hier_pipeline.model.losses import funnel_softmax_loss, primitive_usage_loss
from hier_pipeline.model.minibatch import GraphContext, ModelBatch, make_batch
from hier_pipeline.model.network import InterestModel
from hier_pipeline.model.schedule import Schedule
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.ranking.metrics import evaluate_embeddings
from hier_pipeline.ranking.window import target_window


@dataclass
class Trainer:
    """Everything one training run needs, built once from the graph and its split."""

    graph: RelationalGraph
    content: dict[str, dict[str, Tensor]]
    split: TemporalSplit
    config: TrainConfig

    def __post_init__(self) -> None:
        torch.manual_seed(self.config.seed)
        self.device = resolve_device(self.config.device, self.config.deterministic)
        meta, data, t1 = self.graph.metadata, self.graph.data, self.split.t1
        # One graph, one sampler index: the temporal sampler never crosses a seed's time, and
        # training seeds are all before t1, so no separate training graph needs to be held.
        relations = list(data.edge_types)
        self.context = GraphContext.of(data, relations, len(meta.stages), self.content, t1)
        self.sampler = TemporalNeighborSampler(data, self.config.neighbourhoods(len(meta.stages)))
        self.examples = ExampleSampler(data, meta, self.config.seed, before=t1)
        self.known_items = torch.nonzero(data[meta.item_type].time < t1).flatten()
        self.first_engagement = first_engagement_time(self.graph)
        self.history = InteractionHistory.of(self.graph)  # queried strictly before each time
        self.item_probability = torch.from_numpy(
            self.examples.item_probability(int(data[meta.item_type].num_nodes))
        ).float()
        shapes = node_type_shapes(data, self.content)
        attention = replace(self.config.model.attention, max_hops=len(self.config.fanouts))
        model_config = replace(self.config.model, attention=attention)
        self.model = build_model(shapes, relations, len(meta.stages), model_config)
        self.model.to(self.device)
        self.teacher = cast(GraphEncoder, make_teacher(self.model))
        self.distillation = DistillationLoss(
            DistillationConfig(num_primitives=self.config.model.num_primitives)
        ).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=self.config.learning_rate,
            weight_decay=self.config.weight_decay,
        )
        total_steps = max(1, self.config.epochs * self.config.steps_per_epoch)
        self.schedule = Schedule(
            total_steps=total_steps,
            warmup_steps=min(self.config.warmup_steps, total_steps),
            cosine=self.config.cosine_schedule,
            min_lr_ratio=self.config.min_lr_ratio,
            ema_start=self.config.ema_momentum,
            ema_end=self.config.ema_momentum_final,
        )
        self.rng = np.random.default_rng(self.config.seed)
        self.cluster = join_cluster(self.device)
        self.window = target_window(
            self.graph, self.split.t1, self.split.t2, self.config.max_eval_users, self.config.seed
        )

    def restorable(self) -> Restorable:
        """The state a checkpoint keeps: resumed, the run draws the same examples and neighbours."""
        return Restorable(
            modules={
                "model": self.model,
                "teacher": self.teacher,
                "distillation": self.distillation,
            },
            optimizer=self.optimizer,
            generators={
                "trainer": self.rng,
                "examples": self.examples.rng,
                "sampler": self.sampler.rng,
            },
        )

    def step(self, index: int) -> dict[str, float]:
        """Optimisation step number `index` (0-based; its learning rate and EMA momentum follow
        `self.schedule`); returns the loss parts."""
        config = self.config
        # Gaps are drawn for the global batch, as the batch is, so every rank agrees.
        batch = self._as_served(self.examples.draw(config.batch_size)).shard(self.cluster)
        with mixed_precision(self.device, config.amp):
            loss, parts = self._losses(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(self.model, self.cluster)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = config.learning_rate * self.schedule.lr_factor(index)
        self.optimizer.step()
        ema_update(self.teacher, self.model, self.schedule.ema_momentum(index))
        parts["loss/total"] = loss.item()
        return parts

    def _losses(self, batch: ExampleBatch) -> tuple[Tensor, dict[str, float]]:
        """The step's weighted loss and its parts: neighbourhoods are sampled on the CPU, the
        model and the losses run on `self.device`."""
        meta, config, on_device = self.graph.metadata, self.config, self._on_device
        size = len(batch.user)
        hard_items = self._hard_negatives(batch)
        hard = hard_items >= 0
        random_items = self.known_items[
            torch.from_numpy(self.rng.integers(0, len(self.known_items), config.random_negatives))
        ]
        random_times = batch.time[
            torch.from_numpy(self.rng.integers(0, size, config.random_negatives))
        ]
        hard_times = batch.time.unsqueeze(1).expand_as(hard_items)
        items = torch.cat([batch.item, hard_items[hard], random_items])
        item_times = self._as_if_cold(
            items, torch.cat([batch.time, hard_times[hard], random_times])
        )
        data = self.graph.data
        user_batch = make_batch(
            self.sampler.sample(meta.user_type, batch.user, batch.time), data, self.context
        ).to(self.device)
        item_batch = make_batch(
            self.sampler.sample(meta.item_type, items, item_times), data, self.context
        ).to(self.device)
        users, item_embeddings = self.model(user_batch), self.model(item_batch)
        positives, randoms = item_embeddings[:size], item_embeddings[size + int(hard.sum()) :]
        hard_embeddings = item_embeddings.new_zeros(*hard_items.shape, item_embeddings.size(1))
        hard_embeddings[on_device(hard)] = item_embeddings[size : size + int(hard.sum())]
        ranking = partial(
            funnel_softmax_loss,
            users,
            positives,
            on_device(batch.item),
            *self._single_stage(size),
            random_negatives=randoms,
            hard_negatives=hard_embeddings,
            hard_negative_mask=on_device(hard),
            temperature=config.temperature,
            log_q=self._log_q(torch.cat([batch.item, random_items]), size),
        )
        history = self._history_scores(batch, random_items, hard_items)
        loss = ranking(pair_scores=history)
        parts = {"loss/ranking": loss.item()}
        if history is not None and config.embedding_loss_weight > 0:
            # The same ranking by the inner product alone: the history term must not relieve
            # the embeddings of placing users near what they engage with, since the hierarchy,
            # the tokens and retrieval of new items use the embeddings only.
            embedding_only = (
                self._explore_loss(
                    batch, users, positives, (random_items, randoms), (hard_items, hard_embeddings)
                )
                if config.explore_embedding_loss
                else ranking()
            )
            loss = loss + config.embedding_loss_weight * embedding_only
            parts["loss/embedding_ranking"] = embedding_only.item()
        if isinstance(self.model, InterestModel):  # the HGT peer has neither term
            for name, (weight, term) in self._interest_terms(
                self.model, users, positives, item_batch, batch, len(random_items)
            ).items():
                loss = loss + weight * term
                parts[name] = term.item()
        return loss, parts

    def _on_device(self, values: Tensor) -> Tensor:
        return values.to(self.device)

    def _single_stage(self, size: int) -> tuple[Tensor, Tensor]:
        """`funnel_softmax_loss`'s stages and stage weights for `size` events weighed alike."""
        stage = torch.zeros(size, dtype=torch.long, device=self.device)
        return stage, torch.ones(1, device=self.device)

    def _explore_loss(
        self,
        batch: ExampleBatch,
        users: Tensor,
        positives: Tensor,
        randoms: tuple[Tensor, Tensor],
        hard: tuple[Tensor, Tensor],
    ) -> Tensor:
        """The ranking by inner product alone over the events whose item is new to the user,
        with the user's earlier items masked out of the in-batch and random negatives and only
        the "not interested" item kept of the hard ones. Zero when the batch has no such event.
        Shapes: users, positives [B, d]; randoms: items [M], embeddings [M, d]; hard: items
        [B, H] (-1 where absent), embeddings [B, H, d] -> scalar."""
        (random_items, random_embeddings), (hard_items, hard_embeddings) = randoms, hard
        rows = torch.nonzero(~self.history.engaged_before(batch.user, batch.item, batch.time))
        rows, on_device = rows.flatten(), self._on_device
        if len(rows) == 0:
            return users.sum() * 0.0
        candidates = torch.cat([batch.item[rows], random_items])
        grid = (len(rows), len(candidates))
        earlier = self.history.engaged_before(
            batch.user[rows].unsqueeze(1).expand(grid).flatten(),
            candidates.repeat(len(rows)),
            batch.time[rows].unsqueeze(1).expand(grid).flatten(),
        ).view(grid)
        masked = torch.zeros(grid).masked_fill(earlier, -math.inf)
        device_rows = on_device(rows)
        return funnel_softmax_loss(
            users[device_rows],
            positives[device_rows],
            on_device(batch.item[rows]),
            *self._single_stage(len(rows)),
            random_negatives=random_embeddings,
            hard_negatives=hard_embeddings[device_rows, :1],
            hard_negative_mask=on_device(hard_items[rows, :1] >= 0),
            temperature=self.config.temperature,
            log_q=self._log_q(candidates, len(rows)),
            pair_scores=on_device(torch.cat([masked, torch.zeros(len(rows), 1)], dim=1)),
        )

    def _as_served(self, batch: ExampleBatch) -> ExampleBatch:
        """The events with their times moved back by the serving gap (`serving_gap`): every
        neighbourhood, history feature and earlier-item negative of the step is read as of it."""
        if not self.config.serving_gap:
            return batch
        horizon = self.split.t2 - self.split.t1
        gap = torch.from_numpy((self.rng.random(len(batch.time)) * horizon).astype(np.int64))
        return replace(batch, time=batch.time - gap)

    def _as_if_cold(self, items: Tensor, times: Tensor) -> Tensor:
        """``times``, moved back to each item's first engagement for a `cold_item_rate` share of
        the items (rows drawn from the trainer's generator). Shapes: [N], [N] -> [N]."""
        drawn = torch.from_numpy(self.rng.random(len(items)) < self.config.cold_item_rate)
        return torch.where(drawn, torch.minimum(times, self.first_engagement[items]), times)

    def _hard_negatives(self, batch: ExampleBatch) -> Tensor:
        """Per event: the user's "not interested" item, then `history_negatives` items the user
        engaged with before (never the positive). The latter teach the ranking *among* a user's
        own earlier items, which in-batch and random negatives almost never contain.
        Shapes: -> [B, 1 + history_negatives], -1 where absent."""
        earlier = [
            self.history.sample_earlier(batch.user, batch.item, batch.time, self.rng)
            for _ in range(self.config.history_negatives if self.model.history_bias else 0)
        ]
        return torch.stack([batch.hard_item, *earlier], dim=1)

    def _history_scores(
        self, batch: ExampleBatch, random_items: Tensor, hard_items: Tensor
    ) -> Tensor | None:
        """The history bias of every (user, candidate) pair of the loss, as of the event's time.
        Shapes: -> [B, B + M + H] (in-batch, random, hard negatives), or None without the term."""
        bias = self.model.history_bias
        if bias is None:
            return None
        size = len(batch.user)
        candidates = torch.cat(
            [batch.item.repeat(size, 1), random_items.repeat(size, 1), hard_items], 1
        )
        users = batch.user.unsqueeze(1).expand_as(candidates).flatten()
        times = batch.time.unsqueeze(1).expand_as(candidates).flatten()
        features = self.history.features(users, candidates.flatten(), times)
        return bias(self._on_device(features)).view(size, -1)

    def _log_q(self, items: Tensor, batch_size: int) -> Tensor | None:
        """log of each item's expected count among one step's sampled candidates: `batch_size`
        positives drawn by `ExampleSampler`, M random negatives uniform over the known items."""
        if not self.config.logq_correction:
            return None
        uniform = self.config.random_negatives / len(self.known_items)
        expected = batch_size * self.item_probability[items] + uniform
        return self._on_device(torch.log(expected))

    def _interest_terms(
        self,
        model: InterestModel,
        users: Tensor,
        positives: Tensor,
        item_batch: ModelBatch,
        examples: ExampleBatch,
        random_count: int,
    ) -> dict[str, tuple[float, Tensor]]:
        """Weighted extra losses: primitive usage, the content view's own ranking, and content
        <-> behaviour distillation of the positive items with the EMA teacher on both views. The
        teacher's behaviour view is a fresh neighbourhood sample of the positives alone: a second
        view of the same items (as DINO's crops are), at a third of the cost of rerunning the
        whole item batch. `random_count`: the random negatives, last among the item roots."""
        config, size = self.config, len(examples.item)
        usage = primitive_usage_loss(
            model.primitives.assign(torch.cat([users, positives])), normalised=True
        )
        terms = {"loss/usage": (config.usage_weight, usage)}
        ranks_content = config.content_ranking_weight > 0
        if not (ranks_content or config.use_distillation):
            return terms
        item_type = self.graph.metadata.item_type
        # The content view of the positives, and of every item root when it ranks them.
        viewed = item_batch.seed_index.numel() if ranks_content else size
        roots = {k: v[:viewed] for k, v in item_batch.features[item_type].items()}
        content_all = model.content_embedding(item_type, roots)
        content = content_all[:size]
        if ranks_content:
            terms["loss/content_ranking"] = (
                config.content_ranking_weight,
                self._content_ranking(
                    examples, users, content, content_all[viewed - random_count :]
                ),
            )
        if not config.use_distillation:
            return terms
        teacher = cast(InterestModel, self.teacher)
        roots = {k: v[:size] for k, v in roots.items()}
        sampled = self.sampler.sample(item_type, examples.item, examples.time)
        with torch.no_grad():
            teacher_behaviour = teacher(
                make_batch(sampled, self.graph.data, self.context).to(self.device)
            )
            teacher_content = teacher.content_embedding(item_type, roots)
        distill = self.distillation.symmetric(
            model.primitive_logits(positives, 1.0),
            model.primitive_logits(content, 1.0),
            teacher.primitive_logits(teacher_behaviour, 1.0),
            teacher.primitive_logits(teacher_content, 1.0),
        )
        terms["loss/distillation"] = (config.distill_weight, distill)
        return terms

    def _content_ranking(
        self, examples: ExampleBatch, users: Tensor, content: Tensor, random_content: Tensor
    ) -> Tensor:
        """The user's embedding ranks the positive's content view above the other positives' and
        the random items' (CLCRec's user-content term, Wei et al. 2021): the content view lands
        where the users who engage with an item are, so a product without events is scored by
        the same inner product as one with many. Shapes: users, content [B, d]; random_content
        [M, d] -> scalar."""
        return funnel_softmax_loss(
            users,
            content,
            self._on_device(examples.item),
            *self._single_stage(len(examples.item)),
            random_negatives=random_content,
            temperature=self.config.temperature,
        )

    def validate(self) -> dict[str, float]:
        """Full-ranking metrics of the target stage on [t1, t2): users and items embedded as of t1."""
        meta, data, config, t1 = self.graph.metadata, self.graph.data, self.config, self.split.t1
        embed = partial(embed_nodes, self.model, self.sampler, data, self.context)
        users = embed(meta.user_type, self.window.users, t1)
        item_embeddings = embed(
            meta.item_type, torch.arange(int(data[meta.item_type].num_nodes)), t1
        )
        metrics = evaluate_embeddings(
            users,
            item_embeddings,
            self.window.relevant,
            ks=(config.eval_k,),
            pair_scores=history_scores(self.model, self.history, self.window.users, t1),
        )
        return {f"val/{name}": value for name, value in metrics.items()}
