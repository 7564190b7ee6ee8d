"""The checkpoint record and its encodings: deterministic safetensors bytes and the Arrow row."""

from __future__ import annotations

import dataclasses
import json
import struct

import pyarrow as pa
import pytest
import safetensors.torch
import torch

from zoo.storage import safetensors_io
from zoo.families import create_family
from zoo.training.train import CLASSIFICATION_METRICS as METRIC_NAMES
from zoo.families.cnn import CNNArchitecture, CNNFamily, CNNHParams
from zoo.storage.record import (IDENTITY_COLUMNS, METADATA_KEY, arrow_schema, encode_weights, from_row,
                                parse_weights_metadata,
                        to_row)
from zoo.weightspace import WeightSpace

ARCH = dataclasses.asdict(CNNArchitecture())
HPARAM_NAMES = [f.name for f in dataclasses.fields(CNNHParams)]


def cnn_weights(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = create_family("cnn").build(ARCH).state_dict()
    return {name: torch.randn(tensor.shape, generator=generator) for name, tensor in shapes.items()}


def header_bytes(buffer: bytes) -> bytes:
    _, start = safetensors_io.read_header(buffer)
    return buffer[:start]


# --- safetensors_io -------------------------------------------------------------------------

def test_encode_is_read_by_the_safetensors_library():
    weights = cnn_weights(0)
    buffer = safetensors_io.encode(weights, {"note": "hello"})
    loaded = safetensors.torch.load(buffer)
    assert set(loaded) == set(weights)
    for name, tensor in weights.items():
        assert torch.equal(loaded[name], tensor)
    header, _ = safetensors_io.read_header(buffer)
    assert header["__metadata__"] == {"note": "hello"}


def test_decode_reads_what_the_safetensors_library_writes():
    weights = cnn_weights(1)
    tensors, metadata = safetensors_io.decode(safetensors.torch.save(weights, metadata={"k": "v"}))
    assert metadata == {"k": "v"}
    assert set(tensors) == set(weights)
    assert all(torch.equal(tensors[n], weights[n]) for n in weights)


def test_round_trip_keeps_layer_order_and_values():
    weights = cnn_weights(2)
    tensors, metadata = safetensors_io.decode(safetensors_io.encode(weights))
    assert metadata == {}
    assert list(tensors) == list(weights)  # data order = layer order
    assert all(torch.equal(tensors[n], weights[n]) for n in weights)


def test_data_section_is_the_flat_weight_vector_in_layer_order():
    weights = cnn_weights(3)
    buffer = safetensors_io.encode(weights, {"a": "b"})
    _, start = safetensors_io.read_header(buffer)
    assert start % 8 == 0  # header padded so the data section is 8-byte aligned
    flat = torch.cat([t.reshape(-1) for t in weights.values()])
    assert buffer[start:] == flat.numpy().tobytes()
    assert len(flat) == 4970


def test_encoding_is_deterministic():
    weights = cnn_weights(4)
    first = safetensors_io.encode(weights, {"b": "2", "a": "1"})
    assert first == safetensors_io.encode({k: v.clone() for k, v in weights.items()}, {"a": "1", "b": "2"})


def test_same_architecture_gives_byte_identical_headers(make_record):
    space = WeightSpace.from_state_dict(cnn_weights(0))
    first, second = make_record(5), make_record(6)
    assert WeightSpace.from_state_dict(first.weights) == WeightSpace.from_state_dict(second.weights) == space
    a, b = encode_weights(first), encode_weights(second)
    assert a != b and len(a) == len(b)
    assert header_bytes(a) == header_bytes(b)
    other = encode_weights(make_record(5, architecture={**ARCH, "channels": 8}))
    assert header_bytes(other) != header_bytes(a)


@pytest.mark.parametrize("dtype", [d for d in safetensors_io.DTYPES if d is not torch.bfloat16])
def test_every_supported_dtype_round_trips(dtype):
    tensors = {"weight": (torch.arange(12) % 3).to(dtype).reshape(3, 4), "bias": torch.ones(4, dtype=dtype)}
    buffer = safetensors_io.encode(tensors)
    decoded, _ = safetensors_io.decode(buffer)
    reference = safetensors.torch.load(buffer)
    for name, tensor in tensors.items():
        assert decoded[name].dtype == dtype and torch.equal(decoded[name], tensor)
        assert torch.equal(reference[name], tensor)


def test_bfloat16_round_trips():
    tensors = {"weight": torch.linspace(-1, 1, 6, dtype=torch.bfloat16).reshape(2, 3)}
    decoded, _ = safetensors_io.decode(safetensors_io.encode(tensors))
    assert torch.equal(decoded["weight"], tensors["weight"])


def test_scalar_tensor_round_trips():
    tensors = {"scale": torch.tensor(2.5)}
    decoded, _ = safetensors_io.decode(safetensors_io.encode(tensors))
    assert decoded["scale"].shape == () and decoded["scale"].item() == 2.5


def test_empty_tensor_round_trips():
    tensors = {"a": torch.zeros(0, 3), "b": torch.ones(2)}
    buffer = safetensors_io.encode(tensors)
    decoded, _ = safetensors_io.decode(buffer)
    assert decoded["a"].shape == (0, 3) and torch.equal(decoded["b"], tensors["b"])
    assert safetensors.torch.load(buffer)["a"].shape == (0, 3)


@pytest.mark.parametrize("buffer, message", [
    (b"\x01\x02", "shorter than its 8-byte header length"),
    (struct.pack("<Q", 1000) + b"{}", "header of 1000 bytes exceeds"),
])
def test_read_header_rejects_truncated_buffers(buffer, message):
    with pytest.raises(ValueError, match=message):
        safetensors_io.read_header(buffer)


# --- records --------------------------------------------------------------------------------

def test_weights_metadata_rebuilds_the_architecture(make_record):
    record = make_record(7)
    header, _ = safetensors_io.read_header(encode_weights(record))
    assert set(header["__metadata__"]) == {METADATA_KEY}
    family, architecture, space = parse_weights_metadata(header["__metadata__"])
    assert family == "cnn" and architecture == ARCH
    assert space == create_family("cnn").weight_space(ARCH)
    assert space.names == ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                           "conv3.weight", "conv3.bias", "dense.weight", "dense.bias")


def test_architecture_id_depends_on_the_architecture_only(make_record):
    assert make_record(1).architecture_id == make_record(2, epoch=0).architecture_id
    assert make_record(1).architecture_id != make_record(1, architecture={**ARCH, "channels": 8}).architecture_id
    # same layer shapes, different model: the id must still differ
    assert make_record(1).architecture_id != make_record(1, architecture={**ARCH, "stride": 1}).architecture_id


@pytest.mark.parametrize("status", ["ok", "diverged"])
def test_record_round_trips_through_a_row(status, make_record, assert_same_record):
    record = make_record(8, status=status)
    row = to_row(record)
    assert row["architecture"] == record.architecture_id
    assert_same_record(from_row(row, HPARAM_NAMES, METRIC_NAMES), record)


@pytest.mark.parametrize("status", ["ok", "diverged"])
def test_record_round_trips_through_an_arrow_table(status, make_record, assert_same_record):
    records = [make_record(9, status=status), make_record(10)]
    schema = arrow_schema(CNNHParams, CNNFamily.METRICS)
    table = pa.Table.from_pylist([to_row(r) for r in records], schema=schema)
    assert table.schema == schema
    for record, row in zip(records, table.to_pylist()):
        assert_same_record(from_row(row, HPARAM_NAMES, METRIC_NAMES), record)


def test_arrow_schema_columns_are_typed_and_ordered():
    schema = arrow_schema(CNNHParams, CNNFamily.METRICS)
    expected = (list(IDENTITY_COLUMNS) + HPARAM_NAMES + list(METRIC_NAMES) + ["status", "weights"])
    assert schema.names == expected
    types = {field.name: field.type for field in schema}
    assert types["epoch"] == types["seed"] == pa.int64()
    for name in ("model_id", "run_id", "family", "config", "architecture", "status"):
        assert types[name] == pa.string(), name
    for name in ("optimizer", "init", "activation"):  # Literal hyperparameters
        assert types[name] == pa.string(), name
    for name in ("learning_rate", "l2", "init_std", "dropout", "train_fraction", *METRIC_NAMES):
        assert types[name] == pa.float64(), name
    assert types["weights"] == pa.large_binary()


def test_arrow_schema_rejects_an_untyped_hyperparameter():
    @dataclasses.dataclass(frozen=True)
    class Odd:
        widths: list

    with pytest.raises(TypeError, match="has no column type"):
        arrow_schema(Odd, CNNFamily.METRICS)


def test_row_weights_are_the_encoded_weights(make_record):
    record = make_record(11)
    weights = to_row(record)["weights"]
    assert weights == encode_weights(record)
    metadata = json.loads(safetensors_io.read_header(weights)[0]["__metadata__"][METADATA_KEY])
    assert metadata["architecture"] == ARCH
