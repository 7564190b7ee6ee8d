"""Board integrity: entries that cannot collide, duplicates in any spelling, names no one can mistake,
and an audit that sees everything under `entries/`.

Real files and the real CLI (`nfnzoo leaderboard ...` in a fresh process, `tests/forked_cli.py`): a birthday pair of
results whose content hashes share their first 8 hex digits (the ids of older boards) is found in
the test, both are submitted and both stay; a file or a dangling link already at an entry's path is
never overwritten; a stray HTML page, Parquet file, folder, FIFO or link to a system file under
`entries/` fails `audit --require-verified`, each named in one line, where the clean board passes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from leaderboards import SubmissionRejected, submit
from leaderboards.audit import audit
from leaderboards.entries import canonical_json, content_hash, entry_id, load_entries
from leaderboards.migrate_ids import migrate
from leaderboards.names import builtin_model_problem, skeleton
from leaderboards.seal import sealed
from zoo.validation.names import look_alike
from zoo.validation.text import visible


def _birthday_pair(make_data) -> tuple[dict, dict]:
    """Two valid results of one model, differing in a model config note, whose content hashes share their
    first 8 hex digits: ~2**16 tries by the birthday bound, each one sha256 of the canonical JSON."""
    marker = "@@NOTE@@"
    data = make_data(model_config={"hidden_sizes": [128, 128], "activation": "relu", "dropout": 0.0,
                                   "out_features": 1, "note": marker})
    prefix, suffix = canonical_json(data).split(marker)
    start = hashlib.sha256(prefix.encode())
    seen: dict[str, int] = {}
    for index in range(4_000_000):
        state = start.copy()
        state.update(f"v{index}{suffix}".encode())
        head = state.hexdigest()[:8]
        if head in seen:
            first, second = json.loads(json.dumps(data)), json.loads(json.dumps(data))
            first["model_config"]["note"], second["model_config"]["note"] = f"v{seen[head]}", f"v{index}"
            return first, second
        seen[head] = index
    raise AssertionError("no 8-hex-digit birthday pair in 4,000,000 tries")


def test_two_results_whose_old_ids_collide_are_two_entries(root, write_results, make_data, board_cli):
    first, second = _birthday_pair(make_data)
    hashes = content_hash(first), content_hash(second)
    assert hashes[0] != hashes[1] and hashes[0][:8] == hashes[1][:8]  # one id under the old scheme
    assert entry_id("statnn", hashes[0]) != entry_id("statnn", hashes[1])
    for data in (first, second):
        done = board_cli("leaderboard", "submit", str(write_results(data)), "--root", str(root))
        assert done.returncode == 0, done.stderr
    entries = load_entries(root)
    assert sorted(entry.submission.content_hash for _, entry in entries) == sorted(hashes)
    assert all(len(entry.submission.id) == len("statnn-") + 32 for _, entry in entries)
    clean = board_cli("leaderboard", "audit", "--root", str(root))
    assert clean.returncode == 0 and "2 entries: 0 verified, 0 with problems" in clean.stdout, clean.stdout


@pytest.mark.parametrize("occupant", ["file", "dangling link", "link to a victim"])
def test_an_existing_file_at_an_entrys_path_is_never_overwritten(root, write_results, make_data, tmp_path, board_cli,
                                                                  occupant):
    data = make_data()
    target = root / "entries" / data["task"] / data["dataset"]["dataset_hash"][:12] / \
        f"{entry_id(data['model'], content_hash(data))}.json"
    target.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's bytes")
    if occupant == "file":  # an earlier entry's bytes (another experiment's) where the new one would go
        earlier = submit(write_results(make_data(seeds=(7, 8, 9))), root).path
        target.write_bytes(earlier.read_bytes())
    else:
        target.symlink_to(victim if occupant == "link to a victim" else tmp_path / "nowhere")
    done = board_cli("leaderboard", "submit", str(write_results(data)), "--root", str(root))
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("nfnzoo leaderboard: error: ") and str(target) in lines[0], lines[0]
    assert "already exists" in lines[0] and entry_id(data["model"], content_hash(data)) in lines[0], lines[0]
    assert victim.read_text() == "the victim's bytes"
    if occupant == "file":
        assert target.read_bytes() == earlier.read_bytes()
    assert not os.path.exists(tmp_path / "nowhere")
    assert not [p.name for p in target.parent.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_audit_fails_on_anything_under_entries_that_is_not_a_sealed_entry(root, write_results, board_cli):
    accepted = submit(write_results(), root)
    clean = board_cli("leaderboard", "audit", "--root", str(root))  # the negative control
    assert clean.returncode == 0, clean.stdout + clean.stderr
    folder = accepted.path.parent
    strays = {
        folder / "index.html": lambda p: p.write_text("<script>alert(1)</script>"),
        folder / "extra.predictions.parquet": lambda p: p.write_bytes(b"PAR1"),
        folder / "stray.parquet": lambda p: p.write_bytes(b"PAR1"),
        folder / "sub": lambda p: p.mkdir(),
        folder / "passwd.json": lambda p: p.symlink_to("/etc/passwd"),
        folder / "fifo": lambda p: os.mkfifo(p),
        folder / f"{accepted.entry_id}.predictions.parquet": lambda p: p.write_bytes(b"PAR1"),  # unverified entry's
        folder.parent / "notahash": lambda p: p.mkdir(),
        folder.parent.parent / "README.md": lambda p: p.write_text("hello"),
        root / "entries" / "linked-task": lambda p: p.symlink_to(folder.parent),
        folder / "title\x1b]0;owned\x07.json.bak": lambda p: p.write_text("{}"),  # a name that is an escape
    }
    for path, make in strays.items():
        make(path)
    done = board_cli("leaderboard", "audit", "--root", str(root), "--require-verified")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    problem_lines = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM")]
    for path in strays:
        if path.name.endswith(".predictions.parquet") and path.name.startswith(accepted.entry_id):
            assert "predictions beside an unverified entry" in done.stdout
            continue
        named = [line for line in problem_lines if f" {visible(str(path))}: not a sealed entry" in line]
        assert len(named) == 1, (path, done.stdout)
    assert "a symbolic link (to /etc/passwd)" in done.stdout and "root:" not in done.stdout
    assert "\x1b" not in done.stdout and "title\\x1b]0;owned\\x07.json.bak" in done.stdout
    assert "10 stray paths under entries/" in done.stdout, done.stdout


def test_a_config_written_differently_is_still_a_duplicate(root, write_results, make_data):
    base = {"hidden_sizes": [256, 256], "activation": "relu", "dropout": 0.0, "out_features": 1}
    submit(write_results(make_data(model_config=base)), root)
    spellings = {
        "256.0 for 256": {**base, "hidden_sizes": [256.0, 256]},
        "-0.0 for 0": {**base, "dropout": -0.0},
        "full-width letters": {**base, "activation": "\uff52\uff45\uff4c\uff55"},
        "a compatibility character": {**base, "activation": "re\u217cu"},  # U+217C SMALL ROMAN NUMERAL FIFTY
        "keys in another order": dict(reversed(list(base.items()))),
    }
    for name, config in spellings.items():
        with pytest.raises(SubmissionRejected, match="(duplicates|identical to) the accepted entry") as error:
            submit(write_results(make_data(model_config=config)), root)
        assert len(error.value.problems) == 1, (name, error.value.problems)
    with pytest.raises(SubmissionRejected, match="model_config: the key 'out\\\\uff3ffeatures' must be 1-128 ASCII"):
        submit(write_results(make_data(model_config={**base, "out\uff3ffeatures": 2})), root)  # a key is a name
    with pytest.raises(SubmissionRejected, match="U\\+034F"):  # an invisible character is refused outright
        submit(write_results(make_data(model_config={**base, "activation": "re\u034flu"})), root)
    different = submit(write_results(make_data(model_config={**base, "hidden_sizes": [256, 255]})), root)
    assert different.path.exists()  # the negative control: another config is another experiment
    assert len(load_entries(root)) == 2


def test_the_canonical_form():
    from leaderboards.entries import canonical_config

    assert canonical_json(canonical_config({"b": [256.0, -0.0, 0.5], "a": False})) == '{"a":false,"b":[256,0,0.5]}'
    assert canonical_config({"\uff41": "x\u200by"}) == {"a": "xy"}  # NFKC, invisible characters dropped


@pytest.mark.parametrize("name, reason", [
    ("rnlp", "looks like the built-in NFN model 'mlp'"),  # mlp is a built-in too: that line comes first
    ("MLP", "looks like the built-in NFN model 'mlp'"),  # letter case aside (`zoo.validation.names`)
    ("mlp-small", None),  # the negative control: another name
    ("m1p", "looks like the built-in NFN model 'mlp'"),
    ("mIp", "looks like the built-in NFN model 'mlp'"),
    ("mlp\u3164", "U+3164"),
    ("mlp\u2800", "U+2800"),
    ("mlp\ufe0f", "U+FE0F"),
    ("m\u0406p", "must be 1-64 ASCII letters"),  # a Cyrillic I
])
def test_a_name_that_looks_like_another_on_the_board_is_refused(root, write_results, make_data, board_cli,
                                                                name, reason):
    submit(write_results(make_data(model="mlp")), root)
    again = submit(write_results(make_data(model="mlp", seeds=(3, 4, 5))), root)  # the same name again is fine
    assert again.path.exists()
    done = board_cli("leaderboard", "submit", str(write_results(make_data(model=name))), "--root", str(root))
    if reason is None:
        assert done.returncode == 0, done.stderr
        return
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1 and reason in lines[0], done.stderr
    assert "\u3164" not in lines[0] and "\u2800" not in lines[0] and "\ufe0f" not in lines[0]


def test_the_skeleton_table():
    assert skeleton("rnlp") == skeleton("mlp") and skeleton("resnet-l8") == skeleton("resnet-18")
    assert skeleton("gnn_small") == skeleton("gnn-small") and skeleton("vvide") == skeleton("wide")
    assert skeleton("mlp") != skeleton("mip") and skeleton("statnn") != skeleton("stat-nn")  # case and - kept


def test_a_name_that_looks_like_a_non_builtin_one_on_the_board_is_refused(root, write_results, make_data):
    submit(write_results(make_data(model="ResNet-18")), root)
    for name in ("resnet18", "ResNet_l8", "RESNET-I8", "resnet-18"):  # case, separators, look-alikes
        with pytest.raises(SubmissionRejected, match="looks like the board's model name 'ResNet-18'"):
            submit(write_results(make_data(model=name)), root)
    assert submit(write_results(make_data(model="ResNet-18", seeds=(3, 4, 5))), root)  # the same name again
    assert submit(write_results(make_data(model="ResNet-19")), root)  # the negative control: another name


def test_a_dataset_name_outside_the_names_characters_is_refused(root, write_results, make_data, local_dataset,
                                                               hashes, tmp_path):
    data = make_data(dataset_hash=hashes["local"], dataset_path="runs/cnn-local")
    for name in ("cnn\u3164local", "cnn local", "cnn\u202elocal"):
        hostile = local_dataset.with_name(name)
        local_dataset.rename(hostile)
        with pytest.raises(SubmissionRejected, match="dataset name .* must be 1-200 ASCII"):
            submit(write_results(data), root, dataset_dir=hostile)
        hostile.rename(local_dataset)
    assert submit(write_results(data), root, dataset_dir=local_dataset)  # the negative control: a plain name


def _make_old(path: Path) -> Path:
    """Rewrites an entry as an older board wrote it: an id of 8 hex digits (and its predictions' name), sealed."""
    data = json.loads(path.read_text())
    old_id = data["submission"]["id"][: -32] + data["submission"]["content_hash"][:8]
    data["submission"]["id"] = old_id
    old = path.with_name(f"{old_id}.json")
    old.write_text(json.dumps(sealed(data), indent=2))
    path.unlink()
    return old


def test_an_older_boards_entries_are_migrated_and_audit_clean(root, write_results, make_data):
    paths = [submit(write_results(make_data(seeds=seeds)), root).path for seeds in ((0, 1, 2), (3, 4, 5))]
    old = [_make_old(path) for path in paths]
    problems = audit(root)
    assert all(any("expected <model>-<32 hex digits>" in p for p in a.problems) for a in problems), problems
    renamed = migrate(root)
    assert sorted(r.old for r in renamed) == sorted(p.stem for p in old)
    assert sorted(path.name for path in paths) == sorted(r.path.name for r in renamed)
    assert all(a.problems == () for a in audit(root)), audit(root)
    assert migrate(root) == []  # idempotent


def test_a_hand_edited_old_entry_is_not_resealed_by_the_migration(root, write_results, make_data):
    old = _make_old(submit(write_results(make_data()), root).path)
    data = json.loads(old.read_text())
    data["results"]["summary"]["kendall_tau"]["mean"] = 0.99
    old.write_text(json.dumps(data, indent=2))
    with pytest.raises(ValueError, match="not migrated"):
        migrate(root)
    assert old.exists()


def test_the_official_board_has_long_ids_no_canonical_duplicates_and_nothing_stray():
    from leaderboards import OFFICIAL_ROOT
    from leaderboards.audit import stray_audits
    from leaderboards.entries import ENTRY_ID, duplicate_key

    entries = load_entries(OFFICIAL_ROOT)
    assert len(entries) > 100
    assert all(ENTRY_ID.fullmatch(entry.submission.id) and path.stem == entry.submission.id
               for path, entry in entries)
    keys = [duplicate_key(entry.results) for _, entry in entries]
    assert len(set(keys)) == len(keys)
    assert stray_audits(OFFICIAL_ROOT) == []
    models = {entry.results.model for _, entry in entries}
    assert not [(a, b) for a in models for b in models if a < b and look_alike(a, b)]  # no two names look alike
    assert [builtin_model_problem(model) for model in models] == [None] * len(models)


def _dictionary_bomb(path: Path, rows: int = 12, value_bytes: int = 500_000) -> Path:
    """A small Parquet file whose one text column expands through its dictionary to rows x value_bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"model_id": ["x" * value_bytes] * rows, "prediction": [0.5] * rows})
    pq.write_table(table, path, compression="zstd")
    assert path.stat().st_size < 100_000  # a few kilobytes on disk
    return path


def test_stored_predictions_and_pinned_metadata_vouch_for_their_sizes_before_decoding(tmp_path):
    """Board Parquet files (an entry's stored predictions, a pinned table) arrive by pull request: a
    file whose columns expand far past their size on disk is refused before it is decoded."""
    from leaderboards.rescore import read_stored_predictions

    bomb = _dictionary_bomb(tmp_path / "bomb.parquet")
    with pytest.raises(ValueError, match=r"bomb\.parquet: column 'model_id'.*refused before it is read"):
        read_stored_predictions(bomb)
    plain = _dictionary_bomb(tmp_path / "plain.parquet", value_bytes=32)  # the negative control
    assert len(read_stored_predictions(plain)) == 12
