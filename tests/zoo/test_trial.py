"""One trial without Ray (`zoo.distributed.trial` is framework-free): the events it streams, the checkpoints
it sends equal to what `train_runs` stages itself, and training data that arrived changed refused."""

from __future__ import annotations

import dataclasses

import pytest

from zoo.families import create_family
from zoo.planning.plan import plan_runs
from zoo.storage.staging import Staging, payload_problem
from zoo.distributed.trial import data_sha256, trial
from zoo.training.worker import train_runs


@pytest.fixture(scope="module")
def two_runs(tiny_zoo_spec):
    runs = plan_runs(tiny_zoo_spec)[:2]
    return runs, create_family(tiny_zoo_spec.family).load_data(tiny_zoo_spec)


def test_a_trial_streams_its_machine_each_checkpoint_each_run_and_its_end(tiny_zoo_spec, two_runs, tmp_path):
    runs, data = two_runs
    wanted = [m for run in runs for m in run.model_ids][1:]  # one checkpoint already staged: not sent
    events = list(trial(tiny_zoo_spec.to_data(), runs, wanted, data, data_sha256(data), "cpu", None))
    assert events[0][0] == "machine" and events[0][1]["aten_isa"] and events[0][2] is None  # no Ray here
    assert events[-1][0] == "done" and events[-1][1] > 0
    sent = {e[1]: e[2] for e in events if e[0] == "checkpoint"}
    assert sorted(sent) == sorted(wanted)
    assert [e[1] for e in events if e[0] == "run"] == [run.run_id for run in runs]
    # the bytes sent are the staging files train_runs writes itself, checksum and all
    staging = Staging(tmp_path / "staging")
    train_runs(tiny_zoo_spec, runs, staging, data=data)
    for model_id, payload in sent.items():
        assert payload_problem(payload) is None
        assert payload == staging.path(model_id).read_bytes()


def test_training_data_that_arrived_changed_is_refused_before_training(tiny_zoo_spec, two_runs):
    runs, data = two_runs
    expected = data_sha256(data)
    changed_x = data.train.x.clone()
    changed_x.view(-1)[12345] += 1e-7  # one value
    changed = dataclasses.replace(data, train=dataclasses.replace(data.train, x=changed_x))
    found = data_sha256(changed)
    assert found != expected  # the negative control: the hash sees one changed value
    with pytest.raises(ValueError) as error:
        next(trial(tiny_zoo_spec.to_data(), runs, [], changed, expected, "cpu", None))
    assert str(error.value) == (f"the training data arrived changed on this node (sha256 {found}, the driver sent "
                                f"{expected}); not training on it")


def test_a_payload_for_another_id_or_with_a_flipped_byte_is_not_staged(tiny_zoo_spec, two_runs, tmp_path):
    runs, data = two_runs
    staging = Staging(tmp_path / "staging")
    train_runs(tiny_zoo_spec, runs[:1], staging, data=data)
    first, second = runs[0].model_ids[:2]
    payload = staging.path(first).read_bytes()
    receiving = Staging(tmp_path / "received")
    with pytest.raises(ValueError, match=f"checkpoint {second} as received: it holds checkpoint '{first}'; not staged"):
        receiving.write_payload(second, payload)
    flipped = bytearray(payload)
    flipped[-3] ^= 0x01
    with pytest.raises(ValueError, match="its checksum does not match its contents"):
        receiving.write_payload(first, bytes(flipped))
    assert receiving.model_ids() == []
    receiving.write_payload(first, payload)
    assert receiving.model_ids() == [first]
