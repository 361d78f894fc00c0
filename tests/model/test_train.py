"""Training on the tiny synthetic world: it learns, it resumes exactly, it embeds new entities."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from hier_pipeline.evaluation.baselines import popularity_metrics
from hier_pipeline.graph.sampler import SamplerConfig, StageFanouts
from hier_pipeline.model.artifact import load_sampling, save_model
from hier_pipeline.model.embeddings import embed_entities
from hier_pipeline.model.network import ModelConfig
from hier_pipeline.model.progress import loss_fell
from hier_pipeline.model.train import train_model
from hier_pipeline.model.train_config import TrainConfig
from hier_pipeline.model.trainer import Trainer
from hier_pipeline.ranking.window import target_window


@pytest.fixture
def single_thread() -> Iterator[None]:
    """Multithreaded CPU scatter-adds sum in varying order, and Adam amplifies the difference; on
    one thread a resumed run must match the uninterrupted one to float precision."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TINY = TrainConfig(
    model=ModelConfig(dim=32, num_primitives=8),
    epochs=2,
    steps_per_epoch=4,
    batch_size=64,
    patience=5,
)


class Interrupted(Exception):
    """Raised by a progress callback: the process dies before the epoch's checkpoint."""


def test_resume_from_a_checkpoint_continues_the_same_run(
    synthetic_pipeline: tuple, tmp_path: Path, single_thread: None
) -> None:
    """Killed during its second epoch, rerun with the same config: the run ends where the
    uninterrupted one does, warm-up, learning-rate decay and EMA schedule included."""
    graph, content, split = synthetic_pipeline
    config = replace(TINY, warmup_steps=2, cosine_schedule=True, ema_momentum_final=0.999)
    straight = train_model(graph, content, split, config, checkpoint_dir=tmp_path / "a")

    def die_in_the_second_epoch(line: str) -> None:
        if line.startswith("epoch 2/"):
            raise Interrupted(line)

    with pytest.raises(Interrupted):
        train_model(
            graph,
            content,
            split,
            config,
            checkpoint_dir=tmp_path / "b",
            progress=die_in_the_second_epoch,
        )
    resumed = train_model(graph, content, split, config, checkpoint_dir=tmp_path / "b")
    assert len(resumed.history) == 2
    assert_same_training(
        (straight.history, straight.model.state_dict()),
        (resumed.history, resumed.model.state_dict()),
    )


def test_two_trainings_of_one_config_on_two_threads_end_with_the_same_weights(
    synthetic_pipeline: tuple,
) -> None:
    """Seeds everywhere: the same config trains the same model. Without the deterministic
    kernels, four such trainings in one process ended with four different weights."""
    graph, content, split = synthetic_pipeline
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        first, second = (train_model(graph, content, split, TINY).model for _ in range(2))
    finally:
        torch.set_num_threads(threads)
    for name, value in first.state_dict().items():
        assert torch.equal(value, second.state_dict()[name]), name
    assert not torch.are_deterministic_algorithms_enabled()  # restored after training


def assert_same_training(
    expected: tuple[list[dict[str, float]], dict[str, torch.Tensor]],
    actual: tuple[list[dict[str, float]], dict[str, torch.Tensor]],
) -> None:
    """Same (history, weights) to float precision: what a resumed run must end with."""
    for left, right in zip(expected[0], actual[0], strict=True):
        for key in ("loss/total", "val/map@10", "val/recall@10"):
            assert left[key] == pytest.approx(right[key], abs=1e-6), key
    for name, value in expected[1].items():
        assert torch.allclose(value, actual[1][name], atol=1e-6), name


def test_training_lowers_the_loss_and_embeds_cold_start_items(
    synthetic_pipeline: tuple, tmp_path: Path
) -> None:
    graph, content, split = synthetic_pipeline
    config = TrainConfig(**{**TINY.__dict__, "epochs": 3})
    result = train_model(graph, content, split, config)
    assert result.history[-1]["loss/ranking"] < result.history[0]["loss/ranking"]
    artifact = embed_entities(
        result.model,
        graph,
        content,
        tmp_path / "embeddings.pt",
        config.neighbourhoods(len(graph.metadata.stages)),
    )
    products = artifact.load()["products"]
    cold = graph.data["products"].time >= split.t1
    assert cold.any() and torch.isfinite(products[cold]).all()
    # A cold product's embedding comes from its content: two with different texts differ.
    cold_rows = cold.nonzero().flatten()[:2]
    assert not torch.allclose(products[cold_rows[0]], products[cold_rows[1]])


def test_a_tiny_training_beats_popularity_on_the_target_stage(synthetic_pipeline: tuple) -> None:
    """Fixed seed, same window and full candidate set for both: the model must rank better."""
    graph, content, split = synthetic_pipeline
    config = TrainConfig(**{**TINY.__dict__, "epochs": 4, "steps_per_epoch": 8})
    result = train_model(graph, content, split, config)
    window = target_window(graph, split.t1, split.t2, config.max_eval_users, config.seed)
    popularity = popularity_metrics(graph, window, split.t1, config.eval_k)
    assert result.best_map > popularity["map@10"]


@pytest.mark.parametrize("rate", [0.0, 0.5, 1.0])
def test_cold_item_rate_embeds_that_share_of_items_before_their_first_engagement(
    synthetic_pipeline: tuple, rate: float
) -> None:
    """DropoutNet for graphs: a drawn item root is sampled as of its first engagement, so its
    neighbourhood holds none of its own events, as a new product's does."""
    from hier_pipeline.graph import first_engagement_time

    graph, content, split = synthetic_pipeline
    trainer = Trainer(graph, content, split, replace(TINY, cold_item_rate=rate))
    examples = trainer.examples.draw(400)
    times = trainer._as_if_cold(examples.item, examples.time)
    first = first_engagement_time(graph)[examples.item]
    moved = times != examples.time
    assert torch.all(times <= examples.time)
    assert torch.all(times[moved] == first[moved])
    can_move = first < examples.time  # the event is not the item's first engagement itself
    share = float(moved.sum()) / max(int(can_move.sum()), 1)
    assert abs(share - rate) < 0.1
    sampled = trainer.sampler.sample(graph.metadata.item_type, examples.item, times)
    engaged = sampled.edge_index[graph.metadata.engaged]
    roots_reached = sampled.hop[graph.metadata.item_type][engaged[1]] == 0
    cold_roots = set(torch.nonzero(times <= first).flatten().tolist())
    root_of = sampled.root[graph.metadata.item_type][engaged[1][roots_reached]]
    assert not cold_roots & set(root_of.tolist())


def test_one_epoch_tells_whether_the_loss_fell(synthetic_pipeline: tuple) -> None:
    """The loss check compared the first and the last epoch: one epoch could never pass it."""
    graph, content, split = synthetic_pipeline
    result = train_model(graph, content, split, replace(TINY, epochs=1, steps_per_epoch=8))
    first, last = loss_fell(result.history)
    assert len(result.history) == 1 and last < first
    assert (first, last) == (
        result.history[0]["loss/first_steps"],
        result.history[0]["loss/last_steps"],
    )


def test_the_explore_loss_ignores_repeat_events_and_the_users_earlier_items(
    synthetic_pipeline: tuple,
) -> None:
    """Issue 18, item 1: the embedding's loss learns interests, not replay. On a batch of one
    repeat event and one explore event, moving the repeat event's user, or an earlier item of
    the explore event's user among the random negatives, leaves the loss unchanged; moving the
    explore event's user, or an item new to them, does not."""
    from hier_pipeline.model.examples import ExampleBatch

    graph, content, split = synthetic_pipeline
    trainer = Trainer(graph, content, split, replace(TINY, explore_embedding_loss=True))
    drawn = trainer.examples.draw(400)
    history = trainer.history
    earlier = history.engaged_before(drawn.user, drawn.item, drawn.time)
    rng = np.random.default_rng(0)
    seen = history.sample_earlier(drawn.user, drawn.item, drawn.time, rng, tries=64)
    explore = int(torch.nonzero(~earlier & (seen >= 0))[0])
    rows = torch.tensor([int(torch.nonzero(earlier)[0]), explore])
    batch = ExampleBatch(*(values[rows] for values in vars(drawn).values()))
    items = torch.arange(int(graph.data["products"].num_nodes))
    user, time = (torch.full_like(items, int(v[explore])) for v in (drawn.user, drawn.time))
    new = int(torch.nonzero(~history.engaged_before(user, items, time))[0])
    random_items = torch.tensor([int(seen[explore]), new])
    generator = torch.Generator().manual_seed(0)
    # Small vectors: at the loss's temperature, unit-scale ones saturate the softmax.
    users, positives, randoms = (0.1 * torch.randn(2, 8, generator=generator) for _ in range(3))
    hard = (torch.full((2, 1), -1), torch.zeros(2, 1, 8))

    def loss(users: torch.Tensor, randoms: torch.Tensor) -> float:
        return float(trainer._explore_loss(batch, users, positives, (random_items, randoms), hard))

    def moved(values: torch.Tensor, row: int) -> torch.Tensor:
        return values + 0.5 * (torch.arange(len(values)) == row).unsqueeze(1)

    base = loss(users, randoms)
    assert loss(moved(users, 0), randoms) == pytest.approx(base)  # the repeat event
    assert loss(users, moved(randoms, 0)) == pytest.approx(base)  # an earlier item
    assert loss(moved(users, 1), randoms) != pytest.approx(base)
    assert loss(users, moved(randoms, 1)) != pytest.approx(base)


def test_the_content_ranking_loss_teaches_the_content_view_to_rank(
    synthetic_pipeline: tuple,
) -> None:
    """Issue 18, item 5: with `content_ranking_weight`, users rank items by their content view
    alone (how a product without events is placed) far better than the view distillation
    alone leaves: recall@50 on the validation window, users embedded as of t1."""
    from hier_pipeline.evaluation.interest_recommender import AsOf, content_item_vectors
    from hier_pipeline.ranking.metrics import evaluate_embeddings

    graph, content, split = synthetic_pipeline
    window = target_window(graph, split.t1, split.t2, TINY.max_eval_users, TINY.seed)

    def content_recall(weight: float) -> float:
        config = replace(TINY, epochs=3, steps_per_epoch=8, content_ranking_weight=weight)
        model = train_model(graph, content, split, config).model
        sampling = config.neighbourhoods(len(graph.metadata.stages))
        users = AsOf(model, graph, content, sampling, split.t1)("users", window.users)
        items = content_item_vectors(model, graph, content)
        return evaluate_embeddings(users, items, window.relevant, ks=(50,))["recall@50"]

    without, with_loss = content_recall(0.0), content_recall(1.0)
    assert with_loss > without + 0.05, (without, with_loss)


def test_a_model_file_keeps_the_neighbourhoods_it_was_trained_on(
    synthetic_pipeline: tuple, tmp_path: Path
) -> None:
    """The target stage drawn apart in training is drawn apart by whatever embeds with the saved
    model (`load_sampling`), as served; a file written before models recorded it gets the default
    training config's fanouts."""
    graph, content, split = synthetic_pipeline
    stages = len(graph.metadata.stages)
    config = replace(TINY, epochs=1, steps_per_epoch=2, target_fanouts=(16, 2))
    trainer = Trainer(graph, content, split, config)
    engaged = [c for c in trainer.sampler.channels if c.edge_type == graph.metadata.engaged]
    assert [c.fanouts for c in engaged] == [TINY.fanouts, (16, 2)]
    target = graph.data[graph.metadata.engaged].edge_stage[torch.from_numpy(engaged[1].csr.e_id)]
    assert len(target) > 0 and bool((target == stages - 1).all())
    model = train_model(graph, content, split, config).model
    save_model(model, tmp_path / "model.pt", config.neighbourhoods(stages))
    expected = SamplerConfig(TINY.fanouts, "recent", stage=StageFanouts(stages - 1, (16, 2)))
    assert load_sampling(tmp_path / "model.pt") == expected
    older = {"state_dict": model.state_dict(), "config": asdict(model.config)}
    torch.save(older, tmp_path / "older.pt")
    assert load_sampling(tmp_path / "older.pt") == SamplerConfig(TrainConfig.fanouts, "recent")
