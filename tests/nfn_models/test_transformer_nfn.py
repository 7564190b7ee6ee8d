"""Transformer-NFN (nfn_models.transformer_nfn, nfn_models.layers.attention): exactness.

Group elements come from the family's own sampler (`zoo.symmetry.attention.AttentionSymmetry`
restricted to the paper's group: heads, GL(d_k) and GL(d_v) per head, pi_O without residuals,
pi_A), with GL condition numbers set exactly (`condition_number`). Measured errors of the
invariant model (relative to its output's size, 8 members): float32 ~1e-6 at condition 1e2,
~1e-5 at 1e3, ~2e-4 at 1e4; float64 ~5e-14 at 1e3 and ~1e-10 at 1e6, so the float32 error is
rounding amplified by the condition number, not a broken symmetry. Weight spaces: 2 blocks x
2 heads (the Small Transformer Zoo's) and 3 blocks x 4 heads, each with and without residual
connections.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nfn_models import create_model
from nfn_models.attention_space import AttentionLayout, block_features, block_weights
from nfn_models.layers.attention import AttentionInvariant, AttentionLinear, TermSum, axis_kinds, axis_sizes
from zoo.families import get_family
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch

FAMILY = get_family("transformer")
SPACES = {
    "2x2": {"d_model": 16, "num_blocks": 2, "num_heads": 2, "head_dim": 4, "mlp_dim": 12, "residual": False},
    "2x2-residual": {"d_model": 16, "num_blocks": 2, "num_heads": 2, "head_dim": 4, "mlp_dim": 12, "residual": True},
    "3x4": {"d_model": 8, "num_blocks": 3, "num_heads": 4, "head_dim": 2, "mlp_dim": 10, "residual": False},
    "3x4-residual": {"d_model": 8, "num_blocks": 3, "num_heads": 4, "head_dim": 2, "mlp_dim": 10, "residual": True},
}
# (dtype, GL condition number, relative tolerance of the invariant model's output)
PRECISION = [(torch.float32, 1e2, 2e-5), (torch.float32, 1e3, 1e-4), (torch.float64, 1e3, 1e-12),
             (torch.float64, 1e6, 1e-8)]


def _paper_group(arch: dict, condition_number: float | None = None, **changes):
    paper = {"mlp_scaling": False, "permute_block_outputs": False, "condition_number": condition_number}
    return dataclasses.replace(FAMILY.symmetry(arch), **{**paper, **changes})


def _weights(space, size: int, seed: int, dtype=torch.float32) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(space, tuple((0.3 * torch.randn(size, *t.shape, generator=generator)).to(dtype)
                                    for t in space.tensors))


def _model(arch: dict, dtype=torch.float32, seed: int = 0, **overrides):
    space = FAMILY.weight_space(arch)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = create_model("transformer_nfn", space, num_heads=arch["num_heads"], residual=arch["residual"],
                             **overrides)
    return model.to(dtype).eval()


@pytest.mark.parametrize("name", sorted(SPACES))
@pytest.mark.parametrize("dtype, condition, rtol", PRECISION)
def test_the_model_is_invariant_to_the_papers_group(name, dtype, condition, rtol):
    arch = SPACES[name]
    model, symmetry = _model(arch, dtype), _paper_group(arch, condition)
    with torch.no_grad():
        for seed in (0, 1):
            weights = _weights(symmetry.space, 6, seed, dtype)
            g = symmetry.sample(torch.Generator().manual_seed(seed + 10), batch_size=6)
            output, moved = model(weights), model(symmetry.act(g, weights))
            scale = output.abs().max()
            assert (moved - output).abs().max() <= rtol * scale, f"{name}: {(moved - output).abs().max() / scale:.2e}"


def test_the_sampled_gl_elements_have_the_stated_condition_number():
    symmetry = _paper_group(SPACES["3x4"], 1e4)
    g = symmetry.sample(torch.Generator().manual_seed(0), batch_size=5)
    for matrices in (*g.query_key, *g.value_output):
        torch.testing.assert_close(torch.linalg.cond(matrices),
                                   torch.full(matrices.shape[:2], 1e4, dtype=torch.float64),
                                   rtol=1e-8, atol=0)


def _channels(weights_list: list[WeightBatch], layout: AttentionLayout) -> list[dict[str, torch.Tensor]]:
    """Several members' features stacked along the channel axis."""
    per_member = [block_features(w, layout) for w in weights_list]
    return [{key: torch.cat([member[b][key] for member in per_member], dim=1) for key in per_member[0][b]}
            for b in range(layout.num_blocks)]


@pytest.mark.parametrize("name", sorted(SPACES))
def test_each_equivariant_layer_commutes_with_the_action(name):
    arch = SPACES[name]
    symmetry = _paper_group(arch, 1e2, max_log_scale=1.0)
    space = symmetry.space
    layout = AttentionLayout.from_space(space, arch["num_heads"])
    sizes = axis_sizes(arch["num_heads"], layout.d_model, layout.d_k, layout.d_v, layout.mlp_dim)
    torch.manual_seed(0)
    layer = AttentionLinear(layout.num_blocks, sizes, 2, 3, arch["residual"]).double()
    members = [_weights(space, 4, seed, torch.float64) for seed in (0, 1)]  # 2 input channels
    g = symmetry.sample(torch.Generator().manual_seed(5), batch_size=4)
    with torch.no_grad():
        out = layer(_channels(members, layout))
        moved = layer(_channels([symmetry.act(g, w) for w in members], layout))
    for channel in range(3):
        expected = symmetry.act(g, block_weights(out, layout, space, channel))
        found = block_weights(moved, layout, space, channel)
        for spec, a, b in zip(space.tensors, expected.tensors, found.tensors):
            torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-9, msg=f"{name}: {spec.name} channel {channel}")


def test_the_invariant_layer_is_invariant_and_reads_every_input():
    arch = SPACES["3x4"]
    symmetry = _paper_group(arch, 1e2)
    layout = AttentionLayout.from_space(symmetry.space, arch["num_heads"])
    sizes = axis_sizes(arch["num_heads"], layout.d_model, layout.d_k, layout.d_v, layout.mlp_dim)
    torch.manual_seed(0)
    pool = AttentionInvariant(layout.num_blocks, sizes, 1, 5, layer_norm=False).double()
    weights = _weights(symmetry.space, 4, 0, torch.float64)
    g = symmetry.sample(torch.Generator().manual_seed(1), batch_size=4)
    with torch.no_grad():
        out = pool(block_features(weights, layout))
        torch.testing.assert_close(pool(block_features(symmetry.act(g, weights), layout)), out, rtol=1e-10, atol=1e-10)
        assert out.shape == (4, 3 * 5)
        for index in layout.blocks[1].values():  # every tensor of block 1 moves block 1's outputs only
            tensors = list(weights.tensors)
            tensors[index] = tensors[index] + 0.5
            changed = pool(block_features(WeightBatch(weights.space, tuple(tensors)), layout)) - out
            assert changed[:, 5:10].abs().max() > 1e-6
            assert changed[:, :5].abs().max() == 0 == changed[:, 10:].abs().max()


def test_the_layers_have_the_papers_terms():
    """Term for term the paper's layers (Tran et al. 2025, the authors' TransformersLinear/Inv)."""
    sizes = axis_sizes(2, 32, 16, 16, 64)
    layer = AttentionLinear(1, sizes, 1, 10).blocks[0]
    counts = {name: len(module.terms) + (module.bias is not None) for name, module in layer.items()}
    assert counts == {"wq": 1, "wk": 1, "wv": 1, "wo": 2, "wa": 13, "ba": 10, "wb": 10, "bb": 7}
    invariant = AttentionInvariant(1, sizes, 10, 10).blocks[0]
    assert len(invariant.terms) + 1 == 7
    cubic = sorted((name, t.source) for name, module in layer.items() for t in module.terms if len(t.shape) == 5)
    assert cubic == [("bb", "qk"), ("wb", "qk")]  # [W_Q W_K^T] -> W_B, b_B: D x D in, D out
    # with residual connections pi_O's axis is fixed: W_O mixes it, and nothing is summed over it
    residual = AttentionLinear(1, sizes, 1, 10, residual=True).blocks[0]
    assert len(residual["wo"].terms) == 1 and residual["wo"].terms[0].shape == (10, 1, 32, 32)
    assert TermSum("oa", {"vo": "io"}, axis_kinds(True), sizes, 1, 1).terms[0].shape == (1, 1, 32, 32, 32)


def test_the_default_model_on_the_small_transformer_zoo_member():
    """About 1.8M parameters, 72% in the two D^3 terms of each block (as the issue states the paper's)."""
    from zoo.planning.spec import load_spec

    model = create_model("transformer_nfn", FAMILY.weight_space(load_spec("transformer-mnist").architecture))
    total = sum(p.numel() for p in model.parameters())
    cubic = sum(p.numel() for p in model.parameters() if p.dim() == 5)
    assert total == 1_812_181 and 0.72 < cubic / total < 0.73


def test_negative_control_a_query_transform_without_the_key_inverse_changes_the_output():
    arch = SPACES["2x2"]
    model, symmetry = _model(arch), _paper_group(arch)
    weights = _weights(symmetry.space, 4, 0)
    index = symmetry.space.names.index("encoder.0.attention.queries.weight")
    m = symmetry._random_gl(torch.Generator().manual_seed(3), 4, 4)[:, 0].float()  # one head's M, (B, d_k, d_k)
    tensors = list(weights.tensors)
    rows = tensors[index].clone()
    rows[:, :4] = m @ rows[:, :4]  # head 0's query rows by M, its key rows left alone
    tensors[index] = rows
    with torch.no_grad():
        assert (model(WeightBatch(weights.space, tuple(tensors))) - model(weights)).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["2x2-residual", "3x4-residual"])
def test_negative_control_model_dimension_permutations_change_a_residual_members_output(name):
    """pi_O is no symmetry of a residual member, and the residual model is not invariant to it."""
    arch = SPACES[name]
    model = _model(arch)
    permuting = _paper_group(arch, residual=False)  # the non-residual group: pi_O moves too
    weights = _weights(permuting.space, 4, 0)
    g = permuting.sample(torch.Generator().manual_seed(1), batch_size=4)
    with torch.no_grad():
        assert (model(permuting.act(g, weights)) - model(weights)).abs().max() > 1e-3
        member = FAMILY.build(arch).eval()  # ... and indeed not a symmetry of the member
        x = torch.rand(2, 1, 28, 28)
        outputs = []
        for w in (weights, permuting.act(g, weights)):
            member.load_state_dict({t.name: v[0] for t, v in zip(w.space.tensors, w.tensors)})
            outputs.append(member(x))
        assert (outputs[0] - outputs[1]).abs().max() > 1e-3


def test_negative_controls_the_groups_outside_the_papers_change_the_output():
    arch = SPACES["2x2"]
    model = _model(arch)
    for changes in ({"mlp_scaling": True}, {"permute_block_outputs": True}):
        symmetry = _paper_group(arch, **changes)
        weights = _weights(symmetry.space, 4, 0)
        g = symmetry.sample(torch.Generator().manual_seed(2), batch_size=4)
        with torch.no_grad():
            assert (model(symmetry.act(g, weights)) - model(weights)).abs().max() > 1e-3, changes


def test_block_weights_inverts_block_features():
    arch = SPACES["3x4"]
    space = FAMILY.weight_space(arch)
    layout = AttentionLayout.from_space(space, arch["num_heads"])
    weights = _weights(space, 3, 0)
    back = block_weights(block_features(weights, layout), layout, space)
    for i, (a, b) in enumerate(zip(weights.tensors, back.tensors)):
        expected = a if any(i in block.values() for block in layout.blocks) else torch.zeros_like(a)
        torch.testing.assert_close(b, expected, rtol=0, atol=0)


def test_any_depth_and_heads_and_text_members_build_and_train():
    for arch in ({"d_model": 8, "num_blocks": 1, "num_heads": 1, "head_dim": 8, "mlp_dim": 4, "residual": False},
                 {"d_model": 8, "num_blocks": 4, "num_heads": 4, "head_dim": 2, "mlp_dim": 6, "residual": True}):
        model = _model(arch, channels=(3, 2)).train()
        weights = _weights(FAMILY.weight_space(arch), 5, 0)
        model(weights).sum().backward()
        assert all(p.grad is not None for p in model.parameters())
    from zoo.planning.spec import load_spec

    text = load_spec("transformer-agnews").architecture  # frozen word vectors: no stem weights
    model = create_model("transformer_nfn", FAMILY.weight_space(text))
    assert model.embedding is None and model.output.in_features == 20


def test_bad_configs_and_spaces_are_refused():
    arch = SPACES["2x2"]
    space = FAMILY.weight_space(arch)
    with pytest.raises(ValueError, match="num_heads=3 does not divide"):
        create_model("transformer_nfn", space, num_heads=3)
    with pytest.raises(SchemaError, match="invariant_channels"):
        create_model("transformer_nfn", space, invariant_channels=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_the_model_runs_on_cuda_and_matches_the_cpu():
    arch = SPACES["3x4"]
    model = _model(arch)
    weights = _weights(FAMILY.weight_space(arch), 4, 0)
    with torch.no_grad():
        cpu = model(weights)
        cuda = model.to("cuda")(WeightBatch(weights.space, tuple(t.cuda() for t in weights.tensors)))
    torch.testing.assert_close(cuda.cpu(), cpu, rtol=1e-4, atol=1e-5)
