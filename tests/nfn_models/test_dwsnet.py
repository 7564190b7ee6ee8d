"""DWSNets' layer against an independent dense construction of the equivariant basis.

For a tiny MLP (2 -> 3 -> 2 -> 2) the DWS layer is an affine map of the 23 weight-space
entries; its dense matrix is read off by feeding basis vectors. The hidden-unit group
S_3 x S_2 acts by permutation matrices built here from the definition (not `zoo.symmetry`):
the layer's matrix must commute with all 12 of them, its constant part must be invariant, and
over random parameters its matrices must span the whole commutant, whose dimension is computed
by solving P X = X P for the group's generators. Negative controls: permuting the (fixed) input
units does not commute with it, and a perturbed matrix fails the same check. The registry-wide
exactness tests (`test_exactness.py`) cover the model.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from nfn_models import create_model, model_config
from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.dws import DWSLinear
from zoo.weightspace import WeightBatch, WeightSpace

SIZES = (2, 3, 2, 2)  # n_0 (inputs), hidden 3 and 2, n_L (outputs)
SPACE = WeightSpace.from_state_dict({name: torch.zeros(shape) for i in range(3) for name, shape in (
    (f"fc{i}.weight", (SIZES[i + 1], SIZES[i])), (f"fc{i}.bias", (SIZES[i + 1],)))})
DESCRIPTION = NetworkDescription.from_weight_space(SPACE)
D = SPACE.num_params  # 23


def _layer(seed: int) -> DWSLinear:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = DWSLinear(DESCRIPTION, 1, 1).double()
        for parameter in layer.parameters():
            parameter.data.normal_()
    return layer


def _affine(layer: DWSLinear) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer as x -> M x + c on flat weight vectors: (M (D, D), c (D,))."""
    inputs = torch.cat([torch.zeros(1, D), torch.eye(D)]).double()  # (1 + D, D)
    features = WeightSpaceFeatures.from_weight_batch(WeightBatch.from_flat(SPACE, inputs), DESCRIPTION)
    with torch.no_grad():
        outputs = layer(features).to_weight_batch(SPACE).flatten()  # (1 + D, D)
    constant = outputs[0]
    return (outputs[1:] - constant).T, constant


def _permutation_matrix(hidden: tuple[list[int], list[int]], inputs: list[int] | None = None) -> torch.Tensor:
    """The flat-vector permutation of hidden units `hidden` (and optionally of the input units)."""
    p0 = inputs or list(range(SIZES[0]))
    p1, p2 = hidden
    index = torch.arange(D)
    tensors = list(WeightBatch.from_flat(SPACE, index[None]).tensors)  # each entry holds its flat index
    w0, b0, w1, b1, w2, b2 = (t[0] for t in tensors)
    moved = (w0[p1][:, p0], b0[p1], w1[p2][:, p1], b1[p2], w2[:, p2], b2)  # W_i -> P_{i+1} W_i P_i^T
    source = torch.cat([t.flatten() for t in moved])
    return torch.eye(D, dtype=torch.float64)[source]  # (P x)[k] = x[source[k]]


GROUP = [_permutation_matrix((list(p1), list(p2))) for p1 in itertools.permutations(range(3))
         for p2 in itertools.permutations(range(2))]


def _commutant_dimension(generators: list[torch.Tensor]) -> int:
    """dim {X : P X = X P for every generator}, from the Kronecker form of the constraints."""
    eye = torch.eye(D, dtype=torch.float64)
    constraints = torch.cat([torch.kron(eye, P) - torch.kron(P.T.contiguous(), eye) for P in generators])
    return D * D - int(torch.linalg.matrix_rank(constraints))


def test_the_dense_map_commutes_with_every_hidden_permutation_and_its_constant_is_invariant():
    matrix, constant = _affine(_layer(0))
    for P in GROUP:
        torch.testing.assert_close(P @ matrix, matrix @ P, rtol=0, atol=1e-12)
        torch.testing.assert_close(P @ constant, constant, rtol=0, atol=1e-12)
    assert matrix.abs().min() < matrix.abs().max()  # not trivially constant


def test_the_layers_maps_span_the_whole_commutant():
    generators = [_permutation_matrix(([1, 0, 2], [0, 1])), _permutation_matrix(([1, 2, 0], [0, 1])),
                  _permutation_matrix(([0, 1, 2], [1, 0]))]  # S_3 x S_2
    dimension = _commutant_dimension(generators)
    layer = _layer(0)
    linear_parameters = sum(m.weight.numel() for m in layer.modules() if isinstance(m, torch.nn.Linear))
    # hidden sizes >= 2, so the basis has no redundancy: one parameter per basis element
    assert dimension == linear_parameters
    maps = torch.stack([_affine(_layer(seed))[0].flatten() for seed in range(dimension + 3)])
    assert int(torch.linalg.matrix_rank(maps)) == dimension
    # the constant part: one bias per orbit of output entries under the group
    orbits = int(torch.stack(GROUP).mean(dim=0).trace().round())
    assert sum(m.bias.numel() for m in layer.modules() if getattr(m, "bias", None) is not None) == orbits


def test_negative_controls_input_permutations_and_a_perturbed_map_fail():
    matrix, _ = _affine(_layer(1))
    swap_inputs = _permutation_matrix(([0, 1, 2], [0, 1]), inputs=[1, 0])
    assert (swap_inputs @ matrix - matrix @ swap_inputs).abs().max() > 1e-3  # inputs are not permuted
    perturbed = matrix.clone()
    perturbed[0, 5] += 1.0
    assert max((P @ perturbed - perturbed @ P).abs().max().item() for P in GROUP) > 0.5


def test_a_layer_needs_a_hidden_layer():
    one_layer = WeightSpace.from_state_dict({"fc.weight": torch.zeros(2, 3), "fc.bias": torch.zeros(2)})
    with pytest.raises(ValueError, match="needs a hidden layer"):
        DWSLinear(NetworkDescription.from_weight_space(one_layer), 1, 1)


def test_the_papers_inr_classification_setting_and_the_budget():
    paper = model_config("dwsnet", preset="inr-classification")
    assert (paper.channels, paper.hidden_sizes, paper.dropout, paper.batch_norm, paper.out_features) == (
        (32,) * 5, (), 0.0, True, 10)
    budget = model_config("dwsnet", preset="inr-classification-budget")
    assert max(budget.channels) < 32 and budget.out_features == 10
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        editor = create_model("dwsnet", SPACE, channels=(4,), output="weights").eval()
    batch = WeightBatch.from_flat(SPACE, torch.randn(3, D))
    assert editor(batch).space == SPACE
