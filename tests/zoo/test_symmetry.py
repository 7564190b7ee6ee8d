"""The CNN family's symmetry group: function preservation on real MNIST, group laws, negative controls."""

from __future__ import annotations

import pytest
import torch

from zoo.families import create_family
from zoo.planning.spec import load_spec
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import WeightBatch

TOLERANCE = 1e-4  # float32 logits of magnitude ~1-10 after rescaled products


@pytest.fixture(scope="module")
def mnist_batch():
    family = create_family("cnn")
    spec = load_spec("cnn-mnist", "tiny")
    return spec, family.load_data(spec).test.x[:128]


def _model_batch(family, spec, hparams, members: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    models = []
    for _ in range(members):
        model = family.build(spec.architecture, hparams).eval()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.normal_(0.0, 0.3, generator=generator)
        models.append(model)
    space = family.weight_space(spec.architecture)
    return models, WeightBatch.stack(space, [m.state_dict() for m in models])


def _outputs(family, spec, hparams, batch: WeightBatch, x: torch.Tensor) -> torch.Tensor:
    outputs = []
    for i in range(len(batch)):
        model = family.build(spec.architecture, hparams).eval()
        model.load_state_dict(batch.state_dict(i))
        with torch.no_grad():
            outputs.append(model(x))
    return torch.stack(outputs)


HPARAMS = {"optimizer": "adam", "learning_rate": 1e-3, "l2": 0.0, "init": "normal", "init_std": 0.1,
           "dropout": 0.0, "train_fraction": 1.0}


@pytest.mark.parametrize("activation, wrong_mode", [("relu", "sign"), ("tanh", "scale")])
def test_random_group_elements_preserve_the_function(mnist_batch, activation, wrong_mode):
    spec, x = mnist_batch
    family = create_family("cnn")
    hparams = {**HPARAMS, "activation": activation}
    symmetry = family.symmetry(spec.architecture, hparams)
    models, weights = _model_batch(family, spec, hparams, members=4, seed=1)
    reference = _outputs(family, spec, hparams, weights, x)
    element = symmetry.sample(torch.Generator().manual_seed(2), len(weights))
    transformed = symmetry.act(element, weights)
    assert any(not torch.allclose(a, b) for a, b in zip(transformed.tensors, weights.tensors))  # weights moved
    assert (_outputs(family, spec, hparams, transformed, x) - reference).abs().max() < TOLERANCE

    # Negative control: the rescaling the activation does not commute with changes the outputs.
    wrong = FeedforwardSymmetry(symmetry.space, wrong_mode)
    broken = wrong.act(wrong.sample(torch.Generator().manual_seed(3), len(weights)), weights)
    assert (_outputs(family, spec, hparams, broken, x) - reference).abs().max() > 100 * TOLERANCE


def test_permuting_only_outputs_is_not_a_symmetry(mnist_batch):
    spec, x = mnist_batch
    family = create_family("cnn")
    hparams = {**HPARAMS, "activation": "relu"}
    symmetry = family.symmetry(spec.architecture, hparams)
    _, weights = _model_batch(family, spec, hparams, members=2, seed=4)
    element = symmetry.sample(torch.Generator().manual_seed(5), len(weights))
    # Forget the matching permutation of the next layer's inputs: apply the action to layer 1's tensors only.
    transformed = symmetry.act(element, weights)
    half = WeightBatch(weights.space, tuple(t if spec_.layer == 0 else w for spec_, t, w in
                                            zip(weights.space.tensors, transformed.tensors, weights.tensors)))
    reference = _outputs(family, spec, hparams, weights, x)
    assert (_outputs(family, spec, hparams, half, x) - reference).abs().max() > 100 * TOLERANCE


@pytest.mark.parametrize("mode", ["permutation", "scale", "sign"])
def test_group_laws(mode):
    family = create_family("cnn")
    spec = load_spec("cnn-mnist", "tiny")
    symmetry = FeedforwardSymmetry(family.weight_space(spec.architecture), mode)
    generator = torch.Generator().manual_seed(6)
    weights = WeightBatch(symmetry.space, tuple(torch.randn(3, *t.shape, generator=generator)
                                                for t in symmetry.space.tensors))
    a, b = symmetry.sample(generator, 3), symmetry.sample(generator, 3)

    def close(x: WeightBatch, y: WeightBatch) -> bool:
        return all(torch.allclose(p, q, rtol=1e-5, atol=1e-5) for p, q in zip(x.tensors, y.tensors))

    assert close(symmetry.act(symmetry.compose(a, b), weights), symmetry.act(a, symmetry.act(b, weights)))
    assert close(symmetry.act(symmetry.inverse(a), symmetry.act(a, weights)), weights)
    assert close(symmetry.act(symmetry.identity(3), weights), weights)
    assert not close(symmetry.act(symmetry.compose(a, b), weights), symmetry.act(b, symmetry.act(a, weights)))
    # each member of the batch gets its own element
    assert not torch.equal(a.permutations[0][0], a.permutations[0][1])
