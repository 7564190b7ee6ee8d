"""Hub dataset references are held to the Hub's naming rules before any client call: a
5,000-character name or a revision with `..`, slashes out of refs/ or control characters is one
`HubDataError` that shows at most 60 of its characters."""

from __future__ import annotations

import pytest

from zoo.hub.resolve import HubDataError, parse_repo_reference, resolve_data


@pytest.mark.parametrize(("text", "reason"), [
    ("a" * 2500 + "/" + "b" * 2500, "ORG must be 1-96"),
    ("org/" + "n" * 97, "NAME must be 1-96"),
    ("org/zo--o", "may not hold '--' or '..'"),
    ("org/zoo.git", "may not end with '.git'"),
    ("org/zoo@../../../etc", "REVISION must be"),
    ("org/zoo@refs/../../x", "REVISION must be"),
    ("org/zoo@main\x1b[2J", "REVISION must be"),
    ("org/zoo@" + "v" * 256, "REVISION has 256 characters; at most 255"),
    ("org/zo\u00e9", "NAME must be 1-96"),
])
def test_a_reference_breaking_the_hub_rules_is_one_short_line(text, reason, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HubDataError) as caught:
        resolve_data(text)
    message = str(caught.value)
    assert reason in message and "\n" not in message and "\x1b" not in message
    assert len(message) < 500


@pytest.mark.parametrize("text", ["org/zoo", "org/zoo@v0.1.0-1a2b3c4d", "my-org/zoo.v2@refs/pr/1",
                                  "org/zoo@" + "0" * 40, "o/" + "n" * 96])
def test_valid_references_still_parse(text):
    assert parse_repo_reference(text) is not None
