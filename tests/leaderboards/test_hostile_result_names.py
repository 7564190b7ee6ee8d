"""A results file's names are parsed once, where it is submitted (docs/security.md, "results file"): every
key that reaches a path or a page, with every hostile spelling, is refused, and nothing is written
anywhere beside the board."""

from __future__ import annotations

import pytest

from hostile_names import HOSTILE
from leaderboards import SubmissionRejected, submit
from zoo.storage.lock import LOCK_FILE
from zoo.validation.inputs import InputError
from zoo.validation.schema import SchemaError

KEYS = {  # the results' keys whose value becomes part of a file name, a pinned file's path or a page
    "model": lambda data, value: data.update(model=value),
    "task": lambda data, value: data.update(task=value),
    "dataset.config": lambda data, value: data["dataset"].update(config=value),
    "dataset.family": lambda data, value: data["dataset"].update(family=value),
    "task_config.splits": lambda data, value: data["task_config"].update(splits=value),
    "predictions": lambda data, value: data.update(predictions=value),
    "model_config.<key>": lambda data, value: data["model_config"].update({value: 1}),
}


def _written(folder) -> list:
    return sorted(p for p in folder.rglob("*") if p.name != LOCK_FILE)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("spelling", HOSTILE)
def test_every_hostile_spelling_of_every_named_key_is_refused(root, write_results, make_data, key, spelling):
    data = make_data()
    KEYS[key](data, HOSTILE[spelling])
    path = write_results(data)
    before = _written(root.parent)
    with pytest.raises((SubmissionRejected, InputError, SchemaError)):
        submit(path, root)
    assert _written(root.parent) == before


def test_the_unchanged_results_are_accepted(root, write_results, make_data):  # the negative control
    assert submit(write_results(make_data()), root).path.is_file()
