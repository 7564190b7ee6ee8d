"""Shared fixtures: one tiny real zoo per run, trained on MNIST without Ray, packed, built once for all workers.

Torch runs on one intra-op thread in every test, as each Ray trial does
(`zoo.training.worker.configure_threads`): float reductions, hence trained weights, depend on the
thread count, and on 2-core machines extra threads only contend.

`api` and `repo` stand in for the Hub (unreachable here): an autospec of the client backed by
`SimulatedRepo`, for the zoo and the leaderboard publishers.

`tiny_zoo` is the packed folder (specs/, staging/, data/, manifest.json, README.md). Its
files are made read-only so a test that mutates it by mistake fails loudly; a test that
needs to change a zoo takes `tiny_zoo_copy`, a writable copy in its own `tmp_path`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
import types
from pathlib import Path
from unittest import mock

import huggingface_hub
import pytest
from huggingface_hub import CommitInfo, CommitOperationAdd, CommitOperationDelete

from zoo.planning.spec import ZooSpec, load_spec, spec_from_data


STARTED = pytest.StashKey[float]()


def pytest_configure(config) -> None:
    """`NFNZOO_RECORD_DURATIONS=PATH` records each test's seconds there (`make test-durations`)."""
    from schedule import Recorder

    target = os.environ.get("NFNZOO_RECORD_DURATIONS")
    if target and not hasattr(config, "workerinput"):  # the controller sees every worker's reports
        config.pluginmanager.register(Recorder(Path(target)), "nfnzoo-durations")


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects by the marks this adds
def pytest_collection_modifyitems(config, items) -> None:
    from schedule import recorded, schedule

    schedule(items, recorded())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from schedule import scheduler

    return scheduler(config, log)


def pytest_sessionstart(session) -> None:
    session.config.stash[STARTED] = time.monotonic()


def pytest_terminal_summary(terminalreporter) -> None:
    """The processor the suite ran on and its wall time, last in its output (also under -q): the portable
    mode's recorded bytes (tests/zoo/test_portable_mode.py) are claimed for every processor a passing run
    names here."""
    from zoo.distributed.machine import describe_machine

    machine = describe_machine()
    started = terminalreporter.config.stash.get(STARTED, None)
    wall = "" if started is None else f"; wall time {time.monotonic() - started:.0f} s"
    workers = getattr(terminalreporter.config.option, "numprocesses", None)
    terminalreporter.write_line(f"ran on cpu: {machine['cpu_model']} (ATen {machine['aten_isa']}, oneDNN "
                                f"{machine['onednn_isa']}){wall}" + (f", {workers} workers" if workers else ""))


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    import torch

    from zoo.training.worker import configure_threads

    previous = torch.get_num_threads()
    configure_threads(1)
    yield
    torch.set_num_threads(previous)


def shared_folder(tmp_path_factory, name: str, build) -> Path:
    """A session fixture's folder, built once for the whole run: the first pytest-xdist worker to ask
    builds it (`build(folder)`) under a file lock, the others wait and reuse it. Such a folder must be
    read-only to tests; one that is changed must be copied first (`tiny_zoo_copy`)."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's folder, above each worker's
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def _read_only(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def shared_zoo(tmp_path_factory, name: str, spec: ZooSpec, checkpoints: int) -> Path:
    """A packed zoo of `spec` (read-only), trained without Ray, built once per run (`shared_folder`)."""
    from zoo.storage.folder import STAGING_FOLDER, save_spec
    from zoo.dataset.pack import pack
    from zoo.planning.plan import plan_runs
    from zoo.storage.staging import Staging
    from zoo.training.worker import train_runs

    def build(folder: Path) -> None:
        save_spec(spec, folder)
        written = train_runs(spec, plan_runs(spec), Staging(folder / STAGING_FOLDER))
        assert written == checkpoints, written
        pack(folder)
        _read_only(folder)

    return shared_folder(tmp_path_factory, name, build)


def make_tiny_spec() -> ZooSpec:
    """The bundled `cnn-mnist` spec, `tiny` profile, shrunk further to train in seconds.

    6 sampled runs x checkpoints at epochs 0, 1, 2 = 18 checkpoints; 1,000 training images.
    Built through `spec_from_data`, so the shrunk spec is validated like any other.
    """
    data = load_spec("cnn-mnist", "tiny").to_data()
    data["dataset"].update(train_size=1000, validation_size=500, test_size=500, eval_train_size=500)
    data["search_space"]["sampled"]["count"] = 6
    return spec_from_data(data, "tests/conftest.py:make_tiny_spec")


@pytest.fixture(scope="session")
def tiny_zoo_spec() -> ZooSpec:
    return make_tiny_spec()


@pytest.fixture(scope="session")
def tiny_zoo(tmp_path_factory, tiny_zoo_spec: ZooSpec) -> Path:
    """A packed tiny zoo (read-only). Staged with `zoo.training.worker.train_runs`, no Ray."""
    return shared_zoo(tmp_path_factory, "tiny_zoo", tiny_zoo_spec, 18)


@pytest.fixture(scope="session")
def tiny_transformer_zoo(tmp_path_factory) -> Path:
    """A packed tiny `transformer-mnist` zoo (read-only): 16 runs (4 configurations x 4 seeds) of
    4 epochs on 800 images, checkpoints at epochs 2, 3, 4 and the best; no Ray."""
    data = load_spec("transformer-mnist", "tiny").to_data()
    data["dataset"].update(train_size=800, validation_size=200, test_size=200, eval_train_size=200)
    data["seeds"] = [0, 1, 2, 3]
    data["training"].update(epochs=4, checkpoint_epochs=[2, 3, 4])
    data["splits"]["fractions"] = {"train": 0.5, "validation": 0.25, "test": 0.25}
    spec = spec_from_data(data, "tests/conftest.py:tiny_transformer_zoo")
    return shared_zoo(tmp_path_factory, "tiny_transformer_zoo", spec, 16 * 4)


@pytest.fixture(scope="session")
def tiny_inr_zoo_folder(tmp_path_factory) -> Path:
    """The packed `inr-mnist` `tiny` profile (read-only): 28 SIRENs (every 2,500th MNIST image, so all
    three splits: 18 / 2 / 8 runs), checkpoints at steps 100 and 200; no Ray."""
    return shared_zoo(tmp_path_factory, "inr_zoo", load_spec("inr-mnist", "tiny"), 28 * 2)


CLUSTER = pytest.StashKey["OnDemandCluster"]()


def _start_cluster(base: Path):
    """The head node (1 CPU, with the job server at `.dashboard`) sees what the driver sees; the worker
    node (1 CPU) runs in a mount namespace of its own with empty folders over the tests' temporary
    folders (every `--out`) and over the shared data folder, as a second machine without NFS would."""
    from zoo.data.images import PROJECT_ROOT

    from cluster import LocalCluster

    hidden = [base]
    data = PROJECT_ROOT.parent / "shared" / "data"
    if data.is_dir():
        hidden.append(data)
    if os.environ.get("NFNZOO_DATA"):
        hidden.append(Path(os.environ["NFNZOO_DATA"]))
    cluster = LocalCluster(Path("/tmp") / f"nfnzoo-cluster-logs-{os.getpid()}-{time.monotonic_ns()}",
                           hidden=tuple(hidden))
    cluster.logs.mkdir()
    try:
        cluster.start_head(num_cpus=1)
        cluster.worker = cluster.add_node("worker-1", num_cpus=1)
    except BaseException:
        cluster.stop()
        raise
    return cluster


class OnDemandCluster:
    """The session's two-node cluster, started by the first test that asks for it and stopped after the
    last test of the modules that use it (`pytest_runtest_protocol` below): an idle cluster's daemons
    would otherwise take CPU from the rest of the run. A later test that asks starts it again."""

    def __init__(self, base: Path):
        self.base, self.cluster = base, None

    def get(self):
        if self.cluster is None:
            from cluster import private_mounts_work

            reason = private_mounts_work()
            if reason:
                pytest.skip(f"no private-folder cluster here: {reason}")
            self.cluster = _start_cluster(self.base)
        return self.cluster

    def stop(self) -> None:
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.stop()
            shutil.rmtree(cluster.logs, ignore_errors=True)


@pytest.fixture(scope="session")
def on_demand_cluster(tmp_path_factory, pytestconfig):
    base = tmp_path_factory.getbasetemp()
    holder = OnDemandCluster(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)  # shared folders too
    pytestconfig.stash[CLUSTER] = holder
    try:
        yield holder
    finally:
        holder.stop()


@pytest.fixture
def ray_cluster(on_demand_cluster):
    """One real two-node Ray cluster, shared by the tests of a run (`tests/cluster.py`, `_start_cluster`).

    Tests that kill a node add their own (`ray_cluster.add_node`) and leave these two running.
    """
    return on_demand_cluster.get()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Stops the cluster once the next test (in this worker) is not in a module that uses it."""
    yield
    holder = item.config.stash.get(CLUSTER, None)
    if holder is not None and holder.cluster is not None:
        from schedule import uses_cluster

        if nextitem is None or not uses_cluster(str(nextitem.path)):
            holder.stop()


@pytest.fixture(scope="session")
def cli(tmp_path_factory):
    """The real CLI in a fresh process per call, forked from one warm server per session
    (`tests/forked_cli.py`): each call's isolation, timeout and (with `run_limited`) memory cgroup,
    without a Python and torch start each (~2 s a call). A module may wrap it in its own `cli`."""
    from forked_cli import ForkedCLI

    forked = ForkedCLI(tmp_path_factory.mktemp("cli_server"))
    yield forked
    forked.close()


@pytest.fixture
def tiny_zoo_copy(tiny_zoo: Path, tmp_path: Path) -> Path:
    """A writable copy of the tiny zoo (same bytes, same relative layout)."""
    return Path(shutil.copytree(tiny_zoo, tmp_path / "zoo", copy_function=shutil.copyfile))


@pytest.fixture
def offline_hf(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """Hub access off and a throwaway HF_HOME, here and in the returned subprocess env."""
    home = tmp_path / "hf_home"
    home.mkdir()
    settings = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home)}
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **settings}


def cache_dataset_repo(cache: Path, repo_id: str, folder: Path, refs: tuple[str, ...] = ("main",)) -> str:
    """Lays a packed zoo out as huggingface_hub's cache holds a dataset repo downloaded at `refs`.

    The documented layout (huggingface_hub `file_download.py`, `_snapshot_download.py`):
    `<cache>/datasets--ORG--NAME/blobs/<etag>` (sha256 for LFS files, here the shards; the git
    blob sha1 otherwise), `snapshots/<commit>/<path>` a relative symlink to the blob,
    `refs/<ref>` the commit sha (no newline: it is read verbatim), and `trees/<commit>.json` the
    tree listing an offline `snapshot_download` checks the snapshot's completeness against.
    Files are the card, the manifest and the manifest's shards. Returns the commit sha.
    """
    import hashlib
    import json
    import os

    from zoo.storage.folder import read_manifest

    manifest = read_manifest(folder)
    paths = sorted(["README.md", "manifest.json",
                    *(f["path"] for entry in manifest["configs"].values() for f in entry["files"])])
    storage = cache / f"datasets--{repo_id.replace('/', '--')}"
    contents = {path: (folder / path).read_bytes() for path in paths}
    commit = hashlib.sha1(json.dumps({p: hashlib.sha256(b).hexdigest() for p, b in contents.items()},
                                     sort_keys=True).encode()).hexdigest()
    tree = {}
    for path, data in contents.items():
        blob_id = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        lfs = path.endswith(".parquet")
        etag = hashlib.sha256(data).hexdigest() if lfs else blob_id
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = storage / "snapshots" / commit / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
        tree[path] = {"size": len(data), "blob_id": blob_id,
                      **({"lfs_sha256": etag, "lfs_size": len(data)} if lfs else {})}
    (storage / "trees").mkdir(exist_ok=True)
    (storage / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": tree}))
    for ref in refs:
        (storage / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(commit)
    return commit


@pytest.fixture
def hub_cache(offline_hf, monkeypatch) -> Path:
    """The offline Hub cache of `offline_hf`, for this process too: huggingface_hub reads
    HF_HUB_CACHE and HF_HUB_OFFLINE when it is imported, so its constants are set here as well."""
    from huggingface_hub import constants

    cache = Path(offline_hf["HF_HOME"]) / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    offline_hf["HF_HUB_CACHE"] = str(cache)  # the subprocess environment of this test, too
    return cache


@pytest.fixture(name="cache_dataset_repo")
def cache_dataset_repo_fixture():
    """cache_dataset_repo(cache, repo_id, folder, refs) -> commit sha (see the function)."""
    return cache_dataset_repo


ENDPOINT = "https://huggingface.co"


class SimulatedRepo:
    """A dataset repo on the Hub: its files at the head commit (a folder), its commits and tags.

    Wires the spec'd client's read and write methods to this state, so a test sees what a
    sequence of publishes leaves in the repo.
    """

    def __init__(self, root: Path, api) -> None:
        self.root, self.download_dir = root / "files", root / "downloads"
        self.root.mkdir(parents=True)
        (self.root / ".gitattributes").write_text("*.parquet filter=lfs diff=lfs merge=lfs -text\n")
        self.head, self.commits, self.tags = "0" * 40, [], {}
        api.repo_info.side_effect = lambda repo_id, **_: types.SimpleNamespace(sha=self.head)
        api.list_repo_files.side_effect = self.list_files
        api.hf_hub_download.side_effect = self.download
        api.create_commit.side_effect = self.commit
        api.list_repo_refs.side_effect = lambda repo_id, **_: types.SimpleNamespace(
            branches=[], converts=[],
            tags=[types.SimpleNamespace(name=n, target_commit=c) for n, c in self.tags.items()])
        api.create_tag.side_effect = self.tag

    def files(self) -> set[str]:
        return {p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()}

    def list_files(self, repo_id, *, revision=None, **_):
        assert revision == self.head, "the repo is read at the head commit it will be committed onto"
        return sorted(self.files())

    def download(self, repo_id, filename, *, revision=None, **_):
        assert revision == self.head
        target = self.download_dir / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.root / filename, target)
        return str(target)

    def commit(self, repo_id, operations, *, commit_message, parent_commit=None, **_):
        if parent_commit is not None and parent_commit != self.head:
            raise AssertionError("the Hub refuses a commit whose parent is not the head (HTTP 412)")
        operations = list(operations)
        for op in operations:
            assert isinstance(op, (CommitOperationAdd, CommitOperationDelete)), op
            if isinstance(op, CommitOperationDelete):
                assert (self.root / op.path_in_repo).is_file(), f"the Hub refuses deleting missing {op.path_in_repo}"
                (self.root / op.path_in_repo).unlink()
        for op in operations:
            if isinstance(op, CommitOperationAdd):
                target = self.root / op.path_in_repo
                target.parent.mkdir(parents=True, exist_ok=True)
                source = op.path_or_fileobj
                target.write_bytes(source if isinstance(source, bytes) else Path(source).read_bytes())
        self.head = hashlib.sha1(f"{self.head}{sorted(self.files())}{len(self.commits)}".encode()).hexdigest()
        self.commits.append((self.head, operations))
        return CommitInfo(commit_url=f"{ENDPOINT}/datasets/{repo_id}/commit/{self.head}", commit_message=commit_message,
                          commit_description="", oid=self.head, _endpoint=ENDPOINT)

    def tag(self, repo_id, *, tag, revision=None, **_):
        assert tag not in self.tags, "the Hub refuses an existing tag (HTTP 409)"
        self.tags[tag] = revision


@pytest.fixture
def api():
    """The Hub client as an autospec of `huggingface_hub.HfApi` (the one stand-in: the Hub is unreachable)."""
    return mock.create_autospec(huggingface_hub.HfApi, instance=True)


@pytest.fixture
def repo(api, tmp_path) -> SimulatedRepo:
    return SimulatedRepo(tmp_path / "hub", api)
