"""Hostile and broken inputs, across every subcommand: one line naming the culprit, never a hang.

One table, one test (issue 30, item 6). Each row builds its input files in `tmp_path` with a small
builder, then runs the real CLI in a process of its own (`python -m zoo.cli ...` as a child forked
from a warm server, `tests/forked_cli.py`; Hub offline, a throwaway HF_HOME) under a timeout, so a
read that blocks (a FIFO, /dev/zero) or an allocation that never ends fails the row instead of
hanging the suite. Every row expects:

- its exit code (1 for a user error through the CLI's one error path, 2 for an argument error);
- stderr of exactly one line `nfnzoo CMD: error: ...` (for an argument error: argparse's usage
  lines, then that one line), containing what the row names (the file, the key, the option);
- no traceback, and an answer within the timeout.

A row is (id, builder, expected exit code, expected substrings). A builder takes a `Case` (the
row's `tmp_path` and, lazily, a writable copy of the session's tiny zoo) and returns the argv.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest

TIMEOUT_S = 30  # a CLI start (torch, pyarrow) takes a few seconds on a loaded 2-core machine
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass
class Case:
    tmp: Path
    request: pytest.FixtureRequest

    def zoo(self) -> Path:
        """A writable copy of the session's tiny packed zoo (built once per session)."""
        return self.request.getfixturevalue("tiny_zoo_copy")

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    def fifo(self, name: str) -> Path:
        path = self.tmp / name
        os.mkfifo(path)
        return path


# --- builders: specs (`nfnzoo generate SPEC --dry-run`) -----------------------------------------

def generate(case: Case, spec: Path | str) -> list[str]:
    return ["generate", str(spec), "--dry-run", "--out", str(case.tmp / "out")]


def billion_laughs(case: Case) -> list[str]:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [{','.join([f'*{previous}'] * 9)}]")
    return generate(case, case.write("specs/laughs.yaml", "\n".join(lines) + "\n"))


def recursive_alias(case: Case) -> list[str]:
    return generate(case, case.write("specs/loop.yaml", "name: loop\nfamily: &a [*a]\n"))


def extends_binary(case: Case) -> list[str]:
    case.write("specs/blob.bin", bytes(range(256)) * 16)
    return generate(case, case.write("specs/child.yaml", "extends: blob.bin\nname: child\n"))


def extends_outside(case: Case) -> list[str]:
    bundled = (REPO_ROOT / "zoo" / "specs" / "cnn-mnist.yaml").read_text()
    case.write("elsewhere/base.yaml", bundled.replace("name: cnn-mnist", "name: base"))
    return generate(case, case.write("specs/child.yaml", "extends: ../elsewhere/base.yaml\nname: child\n"))


def extends_cycle(case: Case) -> list[str]:
    case.write("specs/b.yaml", "extends: a.yaml\nname: b\n")
    return generate(case, case.write("specs/a.yaml", "extends: b.yaml\nname: a\n"))


def spec_with(body: str) -> Callable[[Case], list[str]]:
    def build(case: Case) -> list[str]:
        return generate(case, case.write("specs/hostile.yaml", f"extends: cnn-mnist\n{body}"))
    return build


def spec_fifo(case: Case) -> list[str]:
    return generate(case, case.fifo("spec.yaml"))


def spec_folder(case: Case) -> list[str]:
    (case.tmp / "folder.yaml").mkdir()
    return generate(case, case.tmp / "folder.yaml")


# --- builders: packed zoos (`verify`, `info`, `pack`, `bench run`) -------------------------------

def edit_manifest(edit: Callable[[dict], object]) -> Callable[[Case], Path]:
    def build(case: Case) -> Path:
        folder = case.zoo()
        path = folder / "manifest.json"
        manifest = json.loads(path.read_text())
        edit(manifest)
        path.chmod(0o644)
        path.write_text(json.dumps(manifest))
        return folder
    return build


def first_config(manifest: dict) -> dict:
    return next(iter(manifest["configs"].values()))


def deep_manifest(case: Case) -> Path:
    folder = case.zoo()
    (folder / "manifest.json").chmod(0o644)
    (folder / "manifest.json").write_text('{"configs": ' + "[" * 1000 + "]" * 1000 + "}")
    return folder


def set_shard_path(path: str) -> Callable[[dict], None]:
    return lambda manifest: first_config(manifest)["files"][0].update(path=path)


def hostile_weights(kind: str) -> Callable[[Case], Path]:
    """The tiny zoo with row 0 of its first shard holding a hostile safetensors buffer, the
    manifest resealed (sizes, checksums, dataset hash) so only the buffer itself is wrong."""
    def build(case: Case) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from zoo.storage.integrity import dataset_hash_of, file_checksums

        folder = case.zoo()
        manifest = json.loads((folder / "manifest.json").read_text())
        config = first_config(manifest)
        shard = folder / config["files"][0]["path"]
        table = pq.read_table(shard)
        weights = table.column("weights").to_pylist()
        original = weights[0]
        length = int.from_bytes(original[:8], "little")
        header = json.loads(original[8:8 + length])
        if kind == "header":
            weights[0] = (2**30).to_bytes(8, "little") + b'{"a": 1}'
        else:
            name = next(key for key in header if key != "__metadata__")
            header[name] = {"dtype": "F32", "shape": [200000, 200000], "data_offsets": [0, 200000 * 200000 * 4]}
            text = json.dumps(header).encode()
            weights[0] = len(text).to_bytes(8, "little") + text + b"\0" * 64
        index = table.schema.get_field_index("weights")
        table = table.set_column(index, table.schema.field(index),
                                 pa.array(weights, type=table.schema.field(index).type))
        shard.chmod(0o644)
        pq.write_table(table, shard)
        data = shard.read_bytes()
        config["files"][0].update(bytes=len(data), **file_checksums(shard))
        config["dataset_hash"] = dataset_hash_of(config["files"])
        (folder / "manifest.json").chmod(0o644)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        return folder
    return build


def on_zoo(command: list[str], build: Callable[[Case], Path], *after: str) -> Callable[[Case], list[str]]:
    return lambda case: [*command, str(build(case)), *after]


def bench_on(build: Callable[[Case], Path], *extra: str) -> Callable[[Case], list[str]]:
    def argv(case: Case) -> list[str]:
        return ["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(build(case)),
                "--seeds", "0", "--out", str(case.tmp / "r.json"), *extra]
    return argv


def plain_zoo(case: Case) -> Path:
    return case.zoo()


# --- builders: results and the leaderboard -------------------------------------------------------

def results_data(**changes) -> dict:
    """A results file that passes the schema (the submission's later checks refuse it; the rows
    that use it break an earlier rule)."""
    data = {
        "schema_version": 1, "task": "generalization", "model": "mlp", "model_config": {}, "task_config": {},
        "dataset": {"path": "runs/zoo", "config": "cnn-mnist", "dataset_hash": "ab" * 32, "family": "cnn"},
        "seeds": [0], "per_seed": [{"seed": 0, "metrics": {"kendall_tau": 0.5}, "train_time_s": 1.5,
                                     "peak_memory_mb": None}],
        "summary": {"kendall_tau": {"mean": 0.5, "std": 0.0}}, "num_params": 10, "package_version": "0.1.0",
        "created": "2026-01-01T00:00:00+00:00",
        "hardware": {"platform": "linux", "python": "3.11", "torch": "2.5", "device": "cpu"},
        "predictions": None, "examples": None}
    for key, value in changes.items():
        target = data
        *parents, last = key.split(".")
        for parent in parents:
            target = target[parent]
        target[last] = value
    return data


def submit(case: Case, results: Path | str) -> list[str]:
    (case.tmp / "board").mkdir(exist_ok=True)
    return ["leaderboard", "submit", str(results), "--root", str(case.tmp / "board")]


def submit_text(text: str) -> Callable[[Case], list[str]]:
    return lambda case: submit(case, case.write("r.json", text))


def deep_results(case: Case) -> list[str]:
    return submit(case, case.write("r.json", "[" * 1000 + "]" * 1000))


def results_1e999(case: Case) -> list[str]:
    return submit(case, case.write("r.json", json.dumps(results_data()).replace('"train_time_s": 1.5',
                                                                                 '"train_time_s": 1e999')))


def plot_edits_huge_array(case: Case) -> list[str]:
    """An examples .npz whose member declares a 200000 x 200000 float64 array in a few bytes."""
    import io
    import zipfile

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (200000, 200000)})
    with zipfile.ZipFile(case.tmp / "r.examples.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("edited.npy", b"\x93NUMPY\x01\x00" + header.getvalue()[8:] + b"\0" * 64)
    results = case.write("r.json", json.dumps(results_data(examples="r.examples.npz")))
    return ["bench", "plot-edits", str(results), "--out", str(case.tmp / "p.png")]


def scatter_predictions_fifo(case: Case) -> list[str]:
    case.fifo("r.predictions.csv")
    results = case.write("r.json", json.dumps(results_data(predictions="r.predictions.csv")))
    return ["bench", "scatter", str(results), "--out", str(case.tmp / "p.png")]


def suite_with_entry(text: str) -> Callable[[Case], list[str]]:
    """A suite whose only chosen entry's results are already in --out (so nothing runs): `text`."""
    def build(case: Case) -> list[str]:
        case.write("suite/mlp-relu.json", text)
        return ["bench", "suite", "cnn-generalization", "--data", str(case.tmp / "zoo"), "--out",
                str(case.tmp / "suite"), "--only", "mlp-relu"]
    return build


suite_results_nested = suite_with_entry("[" * 1000 + "]" * 1000)
suite_results_schema = suite_with_entry(json.dumps({k: v for k, v in results_data().items() if k != "per_seed"}))


def render_onto_file(case: Case) -> list[str]:
    (case.tmp / "board").mkdir()
    return ["leaderboard", "render", "--root", str(case.tmp / "board"), "--out", str(case.write("site.txt", "x"))]


def bench_plain(*options: str) -> Callable[[Case], list[str]]:
    def argv(case: Case) -> list[str]:
        return ["bench", "run", "--task", "generalization", "--model", "mlp", "--data", str(case.tmp / "zoo"),
                "--out", str(case.tmp / "r.json"), *options]
    return argv


LONG_REPO = "a" * 2500 + "/" + "b" * 2500
USAGE = 2  # argparse's exit code: usage lines, then one error line

# (id, builder, exit code, substrings the error line must contain)
ROWS = [
    # specs
    ("spec-billion-laughs", billion_laughs, 1, ["laughs.yaml"]),
    ("spec-recursive-alias", recursive_alias, 1, ["loop.yaml", "recursive"]),
    ("spec-extends-binary", extends_binary, 1, ["blob.bin"]),
    ("spec-extends-outside", extends_outside, 1, ["child.yaml", "outside"]),
    ("spec-extends-cycle", extends_cycle, 1, ["extends"]),
    ("spec-400-digit-int", spec_with("name: big\nseeds: [" + "9" * 400 + "]\n"), 1, ["hostile.yaml", "seeds"]),
    ("spec-name-dotdot", spec_with("name: ../x\n"), 1, ["hostile.yaml", "name"]),
    ("spec-sampled-count-1e12", spec_with("name: many\nsearch_space:\n  sampled: {count: 1000000000000}\n"), 1,
     ["hostile.yaml", "count"]),
    ("spec-fifo", spec_fifo, 1, ["spec.yaml", "not a regular file"]),
    ("spec-dev-zero", lambda case: generate(case, "/dev/zero"), 1, ["/dev/zero", "not a regular file"]),
    ("spec-folder", spec_folder, 1, ["folder.yaml", "is a folder"]),
    # manifests and shards
    ("verify-manifest-nested", on_zoo(["verify"], deep_manifest), 1, ["manifest.json", "nested"]),
    ("info-manifest-nested", on_zoo(["info"], deep_manifest), 1, ["manifest.json", "nested"]),
    ("verify-config-without-files", on_zoo(["verify"], edit_manifest(lambda m: first_config(m).pop("files"))), 1,
     ["manifest.json", "files"]),
    ("info-config-without-files", on_zoo(["info"], edit_manifest(lambda m: first_config(m).pop("files"))), 1,
     ["manifest.json", "files"]),
    ("info-layer-without-shape", on_zoo(["info"], edit_manifest(
        lambda m: next(iter(first_config(m)["architectures"].values()))["layers"][0].pop("shape"))), 1,
     ["manifest.json", "layers[0]"]),
    ("verify-shard-dotdot", on_zoo(["verify"], edit_manifest(set_shard_path("../outside"))), 1,
     ["manifest.json", "files[0].path"]),
    ("verify-shard-absolute", on_zoo(["verify"], edit_manifest(set_shard_path("/etc/passwd"))), 1,
     ["manifest.json", "files[0].path"]),
    ("bench-shard-dotdot", bench_on(edit_manifest(set_shard_path("../outside"))), 1,
     ["manifest.json", "files[0].path"]),
    ("verify-json-missing-folder", lambda case: ["verify", str(case.zoo()), "--json",
                                                 str(case.tmp / "missing" / "report.json")], 1, ["missing"]),
    ("pack-shard-mb-inf", on_zoo(["pack"], plain_zoo, "--shard-mb", "inf"), USAGE, ["--shard-mb"]),
    ("pack-shard-mb-nan", on_zoo(["pack"], plain_zoo, "--shard-mb", "nan"), USAGE, ["--shard-mb"]),
    ("pack-shard-mb-0", on_zoo(["pack"], plain_zoo, "--shard-mb", "0"), USAGE, ["--shard-mb"]),
    ("verify-weights-1gib-header", on_zoo(["verify"], hostile_weights("header")), 1, ["data/", "row"]),
    ("verify-weights-huge-layer", on_zoo(["verify"], hostile_weights("layer")), 1, ["data/", "row"]),
    ("bench-weights-1gib-header", bench_on(hostile_weights("header")), 1, ["data/", "row"]),
    ("bench-weights-huge-layer", bench_on(hostile_weights("layer")), 1, ["data/", "row"]),
    # the command line and Hub names
    ("bench-seeds-billion", bench_plain("--seeds", "0-1000000000"), 1, ["--seeds", "1,000"]),
    ("bench-seeds-negative", bench_plain("--seeds", "-5"), 1, ["--seeds"]),
    ("bench-seeds-beyond-64-bits", bench_plain("--seeds", "18446744073709551616"), 1, ["--seeds"]),
    ("bench-workers-huge", bench_plain("--workers", "100000"), 1, ["--workers"]),
    ("bench-address-garbage", bench_plain("--address", "no port\u202e"), USAGE, ["--address", "HOST:PORT"]),
    ("bench-address-port-zero", bench_plain("--address", "head:0"), USAGE, ["--address", "HOST:PORT"]),
    ("bench-gpus-nan", bench_plain("--gpus-per-job", "nan"), USAGE, ["--gpus-per-job", "0 to 64"]),
    ("bench-gpus-negative", bench_plain("--gpus-per-job", "-1"), USAGE, ["--gpus-per-job", "0 to 64"]),
    ("bench-gpus-no-cuda-here", bench_plain("--gpus-per-job", "1"), 1, ["no CUDA GPU on this machine"]),
    ("bench-set-1e999", bench_plain("--set", "task.epochs=1e999"), 1, ["--set", "1e999"]),
    ("bench-set-bidi", bench_plain("--set", "model.activation=\"re\u202elu\""), 1, ["--set", "U+202E"]),
    ("bench-data-long-repo", lambda case: ["bench", "run", "--task", "generalization", "--model", "mlp",
                                           "--data", LONG_REPO, "--out", str(case.tmp / "r.json")], 1,
     ["not a Hub dataset repo", "5,001 characters"]),
    ("verify-data-revision-dotdot", lambda case: ["verify", "--data", "org/zoo@../../../etc"], 1,
     ["org/zoo@../../../etc", "REVISION"]),
    ("info-data-revision-control", lambda case: ["info", "--data", "org/zoo@main\x1b[2J"], 1,
     ["org/zoo@main\\x1b", "REVISION"]),
    ("track-seeds-billion", lambda case: ["track", "run", "norga", "--profile", "tiny", "--seeds", "0-1000000000",
                                          "--out", str(case.tmp / "track")], 1, ["--seeds"]),
    ("bench-set-model-too-large", bench_on(plain_zoo, "--set", "model.hidden_sizes=[100000000,100000000]"), 1,
     ["hidden_sizes", "does not fit in memory"]),
    ("bench-set-nested", bench_plain("--set", "model.hidden_sizes=" + "[" * 1000 + "]" * 1000), 1,
     ["--set", "nested"]),
    ("plot-edits-npz-huge-array", plot_edits_huge_array, 1, ["r.examples.npz", "200000"]),
    ("scatter-predictions-fifo", scatter_predictions_fifo, 1, ["r.predictions.csv", "not a regular file"]),
    ("suite-results-nested", suite_results_nested, 1, ["mlp-relu.json", "nested"]),
    ("suite-results-schema", suite_results_schema, 1, ["mlp-relu.json", "per_seed"]),
    ("scatter-results-fifo", lambda case: ["bench", "scatter", str(case.fifo("r.json")), "--out",
                                           str(case.tmp / "p.png")], 1, ["r.json", "not a regular file"]),
    # the leaderboard
    ("submit-results-nested", deep_results, 1, ["r.json", "nested"]),
    ("submit-dev-zero", lambda case: submit(case, "/dev/zero"), 1, ["/dev/zero"]),
    ("submit-fifo", lambda case: submit(case, case.fifo("r.json")), 1, ["r.json"]),
    ("submit-1e999", results_1e999, 1, ["r.json", "1e999"]),
    ("submit-bidi-model", submit_text(json.dumps(results_data(model="ml\u202ep"))), 1, ["r.json", "model"]),
    ("submit-bidi-device", submit_text(json.dumps(results_data(**{"hardware.device": "cpu\u202e"}))), 1,
     ["r.json", "device"]),
    ("render-out-existing-file", render_onto_file, 1, ["site.txt"]),
]


def _environment(tmp: Path) -> dict[str, str]:
    home = tmp / "hf_home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"), "RAY_AUTH_MODE": "disabled", "PYTHONWARNINGS": "ignore",
            "NFNZOO_LEADERBOARD": str(tmp / "default-board")}


@pytest.mark.parametrize(("builder", "exit_code", "expected"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_a_hostile_input_gets_one_line_naming_it(builder, exit_code, expected, tmp_path, request, cli):
    case = Case(tmp_path / "case", request)
    case.tmp.mkdir()
    argv = builder(case)
    working = tmp_path / "cwd"  # empty: a `zoo` folder in the working directory would shadow the package
    working.mkdir()
    try:
        done = cli.run(argv, cwd=working, env=_environment(tmp_path), timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nfnzoo {' '.join(a[:80] for a in argv)} did not answer within {TIMEOUT_S} s "
                    "(blocked or unbounded)")
    stderr = done.stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.splitlines()
    command = argv[0]
    if exit_code == USAGE:
        assert lines and lines[0].startswith("usage: nfnzoo"), stderr[-3000:]
        last = lines[-1]
        assert last.startswith(f"nfnzoo {command}") and ": error: " in last, stderr[-3000:]
    else:
        assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{stderr[-3000:]}"
        last = lines[0]
        assert last.startswith(f"nfnzoo {command}: error: "), last[:500]
    assert len(last) <= 2000, f"the error line is {len(last):,} characters: {last[:300]}…"
    for text in expected:
        assert text in last, f"{text!r} not in: {last[:1000]}"
    assert done.returncode == exit_code, (done.returncode, last[:1000])


def test_the_forked_cli_reports_the_childs_exit_output_and_a_timeout(cli, tmp_path):
    """The control of the runner above: a child's exit code and stderr are its own, a missing folder is
    the CLI's one line, and a run past its timeout raises (a blocked read fails its row)."""
    working = tmp_path / "cwd"
    working.mkdir()
    done = cli.run(["verify", str(tmp_path / "nope")], cwd=working, env=_environment(tmp_path), timeout=TIMEOUT_S)
    assert done.returncode == 1 and done.stderr.startswith("nfnzoo verify: error: ")
    assert str(tmp_path / "nope") in done.stderr
    assert cli.run(["--version"], cwd=working, env=_environment(tmp_path), timeout=TIMEOUT_S).returncode == 0
    with pytest.raises(subprocess.TimeoutExpired):  # the CLI refuses every blocking input, so: a timeout no run meets
        cli.run(["--help"], cwd=working, env=_environment(tmp_path), timeout=0.0001)
    assert cli.run(["--version"], cwd=working, env=_environment(tmp_path),
                   timeout=TIMEOUT_S).returncode == 0  # served on
