"""The weight-space page for NFN authors (docs/weight-spaces.md), rendered from the families themselves.

Every table on the page is computed here from what a family declares:

- its member (`Family.build`), for each tensor's module type;
- its weight space (`Family.weight_space`): names, shapes, layers;
- its symmetry group (`Family.symmetry`).

Which axes a group permutes is measured, not written by hand. The group's relabelling subgroup acts on
members whose entries are their own flat indices. That subgroup is `mode="permutation"` of
`zoo.symmetry.feedforward`, or `permutations_only=True` of `zoo.symmetry.attention`. Each output entry
then says where it came from.

Axes that every sampled element relabels the same way are one factor of the group, such as a layer's
hidden units or a block's heads. An axis relabelled in runs of k consecutive indices by a factor of
another axis is a flatten. An example is a convolution's channels read as blocks of k dense inputs.

So a change to a family's model or group changes the page. Then `python -m zoo.weightspace_doc --check`
(and tests/zoo/test_weightspace_doc.py) fails until the page is rendered again.

    python -m zoo.weightspace_doc            # writes docs/weight-spaces.md
    python -m zoo.weightspace_doc --check    # exit 1 when the committed page differs
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from zoo.families import create_family
from zoo.symmetry.attention import AttentionSymmetry
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import WeightBatch, WeightSpace

PAGE = Path("docs") / "weight-spaces.md"
PROBE_MEMBERS = 16  # independent group elements: an axis no element moves is fixed, not unlucky
PROBE_SEED = 0
# the axis order of PyTorch's parameters, which every family's state dict keeps
AXES = {1: ("out",), 2: ("out", "in"), 4: ("out", "in", "kernel row", "kernel column")}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One family at one representative architecture; `hparams` label -> the hyperparameters its group reads."""

    family: str
    title: str
    architecture: dict
    hparams: dict[str, dict]
    note: str  # what the architecture is, in a line


VARIANTS = (
    Variant("cnn", "CNN (Small CNN Zoo)", {}, {"activation: relu": {"activation": "relu"},
                                              "activation: tanh": {"activation": "tanh"}},
            "the default `CNNArchitecture`: three 3x3 convolutions of 16 channels, global average pooling, "
            "a dense layer to 10 classes"),
    Variant("pooled_cnn", "Pooled CNN (Model Zoos, import-only)", {},
            {"activation: relu": {"activation": "relu"}, "activation: tanh": {"activation": "tanh"}},
            "the default `PooledCNNArchitecture` (CNN-s): convolutions 8@5x5, 6@5x5, 4@2x2, the last 4x3x3 "
            "feature map flattened channel-major into 36 -> 20 -> 10 dense layers"),
    Variant("inr", "SIREN (INR)", {}, {"": {}},
            "the default `INRArchitecture`: 2 -> 32 -> 32 -> 1 with sine activations"),
    Variant("transformer", "Transformer (Small Transformer Zoo)", {}, {"": {}},
            "the default `TransformerArchitecture` (MNIST): a 4x4 patch embedding, 2 encoder blocks of d_model "
            "32 with 2 heads of 16, MLP 32 -> 64 -> 32, no residual connections, a 32 -> 32 -> 10 head "
            "(with `input: word_embeddings` the frozen word vectors are no weights: the space starts at "
            "`encoder.0`)"),
    Variant("transformer", "Transformer with residual connections", {"residual": True}, {"": {}},
            "the same with `residual: true`: no model-dimension permutation survives the residual stream"),
)


# --- measuring which axes a group relabels ------------------------------------------------------

def relabelling_subgroup(symmetry: Any) -> Any:
    """The subgroup of `symmetry` that only relabels entries (no scaling, sign or GL mixing)."""
    if isinstance(symmetry, AttentionSymmetry):
        return dataclasses.replace(symmetry, permutations_only=True)
    if isinstance(symmetry, FeedforwardSymmetry):
        return dataclasses.replace(symmetry, mode="permutation")
    raise TypeError(f"no relabelling subgroup known for {type(symmetry).__name__}")


def _axis_permutations(space: WeightSpace, symmetry: Any) -> list[list[torch.Tensor | None]]:
    """Per tensor, per axis: the (members, n) relabelling the sampled elements apply.

    None where it is not the same along the rest of the tensor: the group mixes that axis with another.
    """
    subgroup = relabelling_subgroup(symmetry)
    indices = WeightBatch(space, tuple(torch.arange(t.numel, dtype=torch.float64).reshape(t.shape)
                                       .expand(PROBE_MEMBERS, *t.shape).clone() for t in space.tensors))
    moved = subgroup.act(subgroup.sample(torch.Generator().manual_seed(PROBE_SEED), PROBE_MEMBERS), indices)
    found = []
    for spec, tensor in zip(space.tensors, moved.tensors):
        source = tensor.round().long()  # (B, *shape): the flat index each entry came from
        flat = source.flatten(1)
        if not torch.equal(flat.sort(dim=1).values, torch.arange(spec.numel).expand_as(flat)):
            raise ValueError(f"{spec.name}: the relabelling subgroup does not permute its entries")
        coordinates = torch.unravel_index(source, spec.shape)
        axes = []
        for axis, coordinate in enumerate(coordinates):
            runs = coordinate.movedim(axis + 1, 1).reshape(PROBE_MEMBERS, spec.shape[axis], -1)  # (B, n, rest)
            permutation = runs[:, :, 0]
            axes.append(permutation if torch.equal(runs, permutation[:, :, None].expand_as(runs)) else None)
        found.append(axes)
    return found


@dataclasses.dataclass
class Factor:
    """One relabelling factor of the group: the axes it acts on, as (tensor name, axis, block size)."""

    symbol: str
    size: int
    axes: list[tuple[str, int, int]]
    group_size: int = 1  # > 1: runs of this many indices stay together (a head's rows), each run moved as one


def _kept_together(permutation: torch.Tensor) -> int:
    """The smallest run length d > 1 (a proper divisor of n) whose runs every element maps onto runs.

    Returns 1 if there is none.
    """
    n = permutation.shape[1]
    for d in range(2, n):
        if n % d == 0:
            runs = (permutation // d).reshape(permutation.shape[0], n // d, d)
            if torch.equal(runs, runs[:, :, :1].expand_as(runs)):
                return d
    return 1


def factors(space: WeightSpace, symmetry: Any) -> tuple[list[Factor], dict[tuple[str, int], str]]:
    """The group's relabelling factors, in order of first appearance, and each tensor axis's label.

    A label is "fixed", a factor's symbol, or "πk in blocks of n" (a flatten).
    """
    found: list[tuple[torch.Tensor, Factor]] = []
    labels: dict[tuple[str, int], str] = {}
    for spec, axes in zip(space.tensors, _axis_permutations(space, symmetry)):
        for axis, permutation in enumerate(axes):
            if permutation is None:
                raise ValueError(f"{spec.name} axis {axis}: relabelled differently along the other axes")
            if torch.equal(permutation, torch.arange(spec.shape[axis]).expand_as(permutation)):
                labels[spec.name, axis] = "fixed"
                continue
            label = None
            for known, factor in found:
                if torch.equal(known, permutation):
                    factor.axes.append((spec.name, axis, 1))
                    label = factor.symbol
                    break
                block = permutation.shape[1] // known.shape[1]
                if block > 1 and block * known.shape[1] == permutation.shape[1] and torch.equal(
                        (known[:, :, None] * block + torch.arange(block)).reshape(permutation.shape), permutation):
                    factor.axes.append((spec.name, axis, block))
                    label = f"{factor.symbol} in blocks of {block}"
                    break
            if label is None:
                factor = Factor(f"π{len(found) + 1}", spec.shape[axis], [(spec.name, axis, 1)],
                                _kept_together(permutation))
                found.append((permutation, factor))
                label = factor.symbol
            labels[spec.name, axis] = label
    return [factor for _, factor in found], labels


# --- rendering ----------------------------------------------------------------------------------

def _modules(model: nn.Module) -> dict[str, str]:
    """Tensor name -> the type of the module that holds it (`Conv2d`, `Linear`)."""
    return {f"{prefix}.{name}" if prefix else name: type(module).__name__
            for prefix, module in model.named_modules() for name, _ in module.named_parameters(recurse=False)}


def _position(space: WeightSpace, layer: int) -> str:
    if layer == 0:
        return "first"
    return "last" if layer == space.num_layers - 1 else "hidden"


def _shape(shape: Sequence[int]) -> str:
    return str(tuple(shape))


def _group_text(symmetry: Any) -> str:
    """What the group adds to its relabellings, read off the symmetry object's own fields."""
    if isinstance(symmetry, FeedforwardSymmetry):
        return {"permutation": "the permutations only (the activation commutes with no rescaling through the "
                               "network as built)",
                "scale": "each factor's units also scaled by positive factors d: the tensors whose out axis the "
                         "factor permutes are multiplied by d there, the in axis (or its block) of the next layer "
                         "divided by d (ReLU: relu(d z) = d relu(z) for d > 0)",
                "sign": "each factor's units also multiplied by signs s = ±1: out axis times s, the next layer's in "
                        "axis (or its block) times s (an odd activation: tanh, sine)"}[symmetry.mode]
    if isinstance(symmetry, AttentionSymmetry):
        parts = [f"per block, the heads (h = {symmetry.num_heads}) permuted as a whole; each head's query and key "
                 "rows (a run of the queries' and keys' factor above) mixed by an invertible M_i (queries M_i, keys "
                 "M_i^-T), its value rows and out-projection columns (a run of the values' factor) by an "
                 "invertible N_i: GL(d_k) x GL(d_v) per head"]
        if symmetry.mlp_scaling:
            parts.append("the MLP hidden units (fc1 rows and bias, fc2 columns) also scaled by positive factors")
        parts.append("residual connections: the model dimension is never permuted" if symmetry.residual else
                     "no residuals: the model dimension after each attention and after each MLP is permuted "
                     "(LayerNorm without scale or shift commutes with it)")
        return "; ".join(parts)
    raise TypeError(f"no description of {type(symmetry).__name__}")


def render_variant(variant: Variant) -> str:
    family = create_family(variant.family)
    space = family.weight_space(variant.architecture)
    modules = _modules(family.build(variant.architecture))
    symmetries = {label: family.symmetry(variant.architecture, hparams) for label, hparams in variant.hparams.items()}
    found, labels = factors(space, next(iter(symmetries.values())))
    lines = [f"## {variant.title}", "",
             f"Family `{variant.family}`, {variant.note}: {len(space.tensors)} tensors, "
             f"{space.num_params:,} parameters, {space.num_layers} layers "
             f"(`create_family({variant.family!r}).weight_space({variant.architecture!r})`).", "",
             "| # | tensor | shape | axes | module | role | layer | position |",
             "|---|---|---|---|---|---|---|---|"]
    for index, spec in enumerate(space.tensors):
        names = AXES.get(len(spec.shape), tuple(f"axis {axis}" for axis in range(len(spec.shape))))
        axes = ", ".join(f"{name}: {labels[spec.name, axis]}" for axis, name in enumerate(names))
        lines.append(f"| {index} | `{spec.name}` | {_shape(spec.shape)} | {axes} | {modules.get(spec.name, '?')} | "
                     f"{spec.role} | {spec.layer} | {_position(space, spec.layer)} |")
    lines += ["", "The relabelling factors (one independent permutation per member for each):", "",
              "| factor | size | moved as | acts on |", "|---|---|---|---|"]
    for factor in found:
        acts = ", ".join(f"`{name}` axis {axis}" + (f" (blocks of {block})" if block > 1 else "")
                         for name, axis, block in factor.axes)
        moved = (f"{factor.size // factor.group_size} runs of {factor.group_size} (each run kept together, "
                 "its entries permuted within)" if factor.group_size > 1 else "single indices")
        lines.append(f"| {factor.symbol} | {factor.size} | {moved} | {acts} |")
    lines.append("")
    for label, symmetry in symmetries.items():
        head = f"With `{label}`" if label else "The group"
        lines.append(f"- {head} (`{type(symmetry).__name__}`): {_group_text(symmetry)}.")
    return "\n".join(lines) + "\n"


EXAMPLE = '''\
import torch

from zoo.families import create_family
from zoo.weightspace import TensorSpec, WeightBatch, WeightSpace

# a 2 -> 3 -> 1 MLP described by hand: (out, in) weights, layer indices in forward order
space = WeightSpace((TensorSpec("fc1.weight", (3, 2), "weight", 0), TensorSpec("fc1.bias", (3,), "bias", 0),
                     TensorSpec("fc2.weight", (1, 3), "weight", 1), TensorSpec("fc2.bias", (1,), "bias", 1)))
generator = torch.Generator().manual_seed(0)
weights = WeightBatch(space, tuple(torch.randn(4, *t.shape, generator=generator) for t in space.tensors))
assert len(weights) == 4 and weights.flatten().shape == (4, space.num_params)  # (B, 13)

# members of a family: its weight space, and state dicts keyed by the tensors' names (random here;
# a zoo's checkpoints hold the same keys)
family = create_family("cnn")
cnn_space = family.weight_space({})
members = [{t.name: 0.3 * torch.randn(t.shape, generator=generator) for t in cnn_space.tensors} for _ in range(2)]
batch = WeightBatch.stack(cnn_space, members)
assert [tuple(t.shape) for t in batch.tensors][0] == (2, 16, 1, 3, 3)  # (B, out, in, kernel row, kernel column)

# the family's group acts on it: a ReLU member's function is unchanged (hidden channels permuted and scaled)
symmetry = family.symmetry({}, {"activation": "relu"})
moved = symmetry.act(symmetry.sample(torch.Generator().manual_seed(1), len(batch)), batch)
member = family.build({}).eval()  # ReLU
member.load_state_dict(batch.state_dict(0))
images = torch.rand(5, 1, 28, 28, generator=generator)
before = member(images)
member.load_state_dict(moved.state_dict(0))
assert torch.allclose(member(images), before, atol=1e-5)
'''


def render_page() -> str:
    parts = ["# Weight spaces for NFN authors", "",
             "*Generated from the families' own weight spaces and symmetry groups by "
             "`python -m zoo.weightspace_doc` (`--check` compares); edit `zoo/weightspace_doc.py`, not this page.*",
             "",
             "An NFN reads a `WeightBatch` (`zoo.weightspace`): one tensor per parameter of the members, in the "
             "member's forward order (its state dict's order), each of shape `(B, *shape)` with the batch first. "
             "`WeightBatch.space` is the `WeightSpace`: a `TensorSpec` per tensor with its `name` (the state-dict "
             "key), `shape`, `role` (`weight` or `bias`) and `layer` (the index of the module it belongs to, in "
             "forward order). Axes follow PyTorch: a linear weight is `(out, in)`, a convolution's "
             "`(out, in, kernel row, kernel column)`, a bias `(out,)`. `WeightBatch.flatten()` concatenates every "
             "tensor, row-major, in this order.", "",
             "Below, for one representative architecture of each family: every tensor, what each axis is "
             "relabelled by (a factor of the family's symmetry group, or *fixed*: not relabelled by the "
             "family's group, as inputs, outputs and kernel positions, and whatever the architecture pins), and "
             "what the group adds to the relabellings (scalings, sign flips, GL(d) of attention). The factors "
             "are measured, not written by hand: the group's permutation subgroup acts on members whose entries "
             f"are their own indices, and every axis moved the same way by {PROBE_MEMBERS} random elements is "
             "one factor. *Position* says whether the tensor's layer is the first, a hidden or the last one "
             "(in the CNNs and SIRENs the units permuted are the outputs of every layer but the last, and the "
             "inputs of the layer after). "
             "Where a convolution meets a dense layer, the dense layer's `in` axis shows how: the same factor as the "
             "last convolution's channels (global average pooling: one input per channel) or that factor *in "
             "blocks of k* (a channel-major flatten: k = H x W consecutive inputs per channel).", ""]
    parts += [render_variant(variant) for variant in VARIANTS]
    parts += ["## Building a `WeightBatch` by hand", "",
              "A weight space from `TensorSpec`s, a batch of random members, a family's weight space filled "
              "from state dicts (as a zoo's checkpoints hold them), and a group element acting on them "
              "(tests/zoo/test_weightspace_doc.py runs this block):", "",
              "<!-- weight-space-example -->", "```python", EXAMPLE.rstrip("\n"), "```", ""]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.weightspace_doc", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PAGE, help=f"the page (default {PAGE})")
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from what renders now")
    args = parser.parse_args(argv)
    page = render_page()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
        if current != page:
            print(f"{args.out} is stale: run `python -m zoo.weightspace_doc --out {args.out}`", file=sys.stderr)
            return 1
        print(f"{args.out} is current")
        return 0
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
