"""Weight spaces and batches: the container every loader output and NFN input is."""

from __future__ import annotations

import pytest
import torch

from zoo.families import create_family
from zoo.weightspace import WeightBatch, WeightSpace


@pytest.fixture(scope="module")
def space() -> WeightSpace:
    return create_family("cnn").weight_space({})


def random_batch(space: WeightSpace, size: int, seed: int = 0) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(space, tuple(torch.randn(size, *t.shape, generator=generator) for t in space.tensors))


def test_from_state_dict_groups_weight_and_bias_by_layer():
    space = WeightSpace.from_state_dict({"a.weight": torch.zeros(3, 2), "a.bias": torch.zeros(3),
                                         "b.weight": torch.zeros(1, 3)})
    assert [(t.name, t.role, t.layer, t.numel) for t in space.tensors] == [
        ("a.weight", "weight", 0, 6), ("a.bias", "bias", 0, 3), ("b.weight", "weight", 1, 3)]
    assert space.num_layers == 2 and space.num_params == 12
    with pytest.raises(ValueError, match="'bn.running_mean' is neither a weight nor a bias"):
        WeightSpace.from_state_dict({"bn.running_mean": torch.zeros(3)})


def test_batch_checks_shapes(space):
    good = random_batch(space, 3)
    with pytest.raises(ValueError, match="expected 8 tensors, got 7"):
        WeightBatch(space, good.tensors[:-1])
    with pytest.raises(ValueError, match="disagree on the batch size"):
        WeightBatch(space, (good.tensors[0][:2],) + good.tensors[1:])
    with pytest.raises(ValueError, match=r"conv1\.weight: expected shape"):
        WeightBatch(space, (good.tensors[0].transpose(1, 2),) + good.tensors[1:])


def test_flatten_indexing_and_state_dict(space):
    batch = random_batch(space, 5)
    flat = batch.flatten()
    assert flat.shape == (5, 4970)
    member = batch.state_dict(2)
    assert list(member) == list(space.names)
    assert torch.equal(torch.cat([t.reshape(-1) for t in member.values()]), flat[2])
    member["conv1.weight"].zero_()  # a copy: the batch is untouched
    assert torch.equal(batch.flatten(), flat)
    assert torch.equal(batch[1].flatten(), flat[1:2])
    assert torch.equal(batch[torch.tensor([4, 0])].flatten(), flat[[4, 0]])
    assert torch.equal(batch[torch.tensor([True, False, True, False, False])].flatten(), flat[[0, 2]])
    assert torch.equal(WeightBatch.stack(space, [batch.state_dict(i) for i in range(5)]).flatten(), flat)


def test_batches_cover_every_member_and_shuffle_needs_a_generator(space):
    batch = random_batch(space, 7)
    seen = torch.cat([index for index, _ in batch.batches(3)])
    assert seen.tolist() == list(range(7))
    with pytest.raises(ValueError, match="explicit torch.Generator"):
        next(batch.batches(3, shuffle=True))
    first = [i.tolist() for i, _ in batch.batches(3, shuffle=True, generator=torch.Generator().manual_seed(1))]
    again = [i.tolist() for i, _ in batch.batches(3, shuffle=True, generator=torch.Generator().manual_seed(1))]
    assert first == again and sorted(sum(first, [])) == list(range(7)) and sum(first, []) != list(range(7))
    for index, sub in batch.batches(3, shuffle=True, generator=torch.Generator().manual_seed(2)):
        assert torch.equal(sub.flatten(), batch.flatten()[index])
