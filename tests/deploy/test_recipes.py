"""The cluster recipes in deploy/ are checked as far as this machine can: the `ray up` YAML by Ray's
own validation, the KubeRay RayJob by the fields that matter (no CRD schema ships in a package here),
the Slurm script by `bash -n`, and every `nfnzoo` command in them and in docs/cluster.md by our parser.
Each check has a negative control: a broken copy fails it."""

from __future__ import annotations

import copy
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from zoo.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
LAUNCHER, RAYJOB, SLURM = DEPLOY / "ray-up.yaml", DEPLOY / "kuberay-rayjob.yaml", DEPLOY / "slurm.sbatch"
DOCS = ROOT / "docs" / "cluster.md"
# what the recipes' shell variables stand for when their commands are parsed here
VARIABLES = {"SPEC": "cnn-mnist", "PROFILE": "tiny", "OUT": "/tmp/zoo", "RAY_ADDRESS": "10.0.0.1:6379",
             "HOME": "/home/user", "HEAD": "10.0.0.1"}
SHELL_OPERATORS = {"&&", "||", ";", "|", "&", ">", ">>", "2>&1"}
COMMAND_WORDS = {"nfnzoo", "ray", "srun", "sbatch", "kubectl", "docker"}  # what a line that is a command starts with


# --- the `ray up` launcher YAML: Ray's own validation -------------------------------------------

def ray_validate(config: dict) -> dict:
    """What `ray up` does before it starts anything: fill in the provider's defaults, then validate."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_the_launcher_yaml_passes_rays_validation():
    prepared = ray_validate(yaml.safe_load(LAUNCHER.read_text()))
    node_types = prepared["available_node_types"]
    assert node_types[prepared["head_node_type"]]["resources"] == {"CPU": 0}  # the head trains nothing
    assert {"cpu_workers", "gpu_workers"} <= set(node_types)
    assert any("pip install" in command and "nfnzoo" in command for command in prepared["setup_commands"])


@pytest.mark.parametrize("breakage", [
    lambda c: c["available_node_types"]["gpu_workers"].update(max_worker=4),  # a misspelled key
    lambda c: c.update(head_node_type="header"),  # a head type that is not defined
    lambda c: c["available_node_types"]["cpu_workers"].update(min_workers="two"),
    lambda c: c.pop("provider"),
], ids=["misspelled-key", "unknown-head-type", "count-not-a-number", "no-provider"])
def test_a_broken_launcher_yaml_fails_rays_validation(breakage):
    import jsonschema

    config = yaml.safe_load(LAUNCHER.read_text())
    breakage(config)
    with pytest.raises((jsonschema.ValidationError, ValueError, KeyError)):
        ray_validate(config)


# --- the KubeRay RayJob: the fields that matter --------------------------------------------------

def _containers(template: dict, where: str, problems: list[str]) -> list[dict]:
    containers = (template or {}).get("spec", {}).get("containers")
    if not containers:
        problems.append(f"{where}.template.spec.containers: none")
        return []
    for index, container in enumerate(containers):
        at = f"{where}.containers[{index}]"
        if not isinstance(container.get("image"), str) or not container["image"]:
            problems.append(f"{at}.image: missing")
        resources = container.get("resources", {})
        for kind in ("requests", "limits"):
            if not {"cpu", "memory"} <= set(resources.get(kind, {})):
                problems.append(f"{at}.resources.{kind}: expected cpu and memory")
    return containers


def rayjob_problems(documents: list[dict]) -> list[str]:
    """What is wrong with the RayJob recipe: its kind, entrypoint, groups, images, resources, GPUs and the
    volume its output goes to (a claim defined in the same file, mounted on the head at --out's folder)."""
    jobs = [d for d in documents if d.get("kind") == "RayJob"]
    if len(jobs) != 1 or jobs[0].get("apiVersion") != "ray.io/v1":
        return ["expected one RayJob of apiVersion ray.io/v1"]
    spec, problems = jobs[0].get("spec", {}), []
    entrypoint = spec.get("entrypoint", "")
    if "nfnzoo generate" not in entrypoint:
        problems.append("spec.entrypoint: does not run `nfnzoo generate`")
    cluster = spec.get("rayClusterSpec", {})
    head = cluster.get("headGroupSpec", {})
    head_containers = _containers(head.get("template"), "headGroupSpec", problems)
    groups = cluster.get("workerGroupSpecs") or []
    if not groups:
        problems.append("workerGroupSpecs: none")
    gpu_groups = 0
    for index, group in enumerate(groups):
        at = f"workerGroupSpecs[{index}]"
        if not group.get("groupName"):
            problems.append(f"{at}.groupName: missing")
        counts = [group.get(key) for key in ("minReplicas", "replicas", "maxReplicas")]
        if not all(isinstance(n, int) and n >= 0 for n in counts) or not counts[0] <= counts[1] <= counts[2]:
            problems.append(f"{at}: expected 0 <= minReplicas <= replicas <= maxReplicas")
        containers = _containers(group.get("template"), at, problems)
        gpus = [c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") for c in containers]
        gpu_groups += any(g is not None and int(g) > 0 for g in gpus)
    if not gpu_groups:
        problems.append("workerGroupSpecs: no group with nvidia.com/gpu limits")
    out = re.search(r"nfnzoo generate .*?--out (\S+)", entrypoint)
    claims = {d["metadata"]["name"] for d in documents if d.get("kind") == "PersistentVolumeClaim"}
    volumes = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName")
               for v in head.get("template", {}).get("spec", {}).get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for c in head_containers for m in c.get("volumeMounts", [])}
    if out is None:
        problems.append("spec.entrypoint: `nfnzoo generate` without --out")
    else:
        mounted = [name for path, name in mounts.items() if out.group(1).startswith(path.rstrip("/") + "/")]
        if not mounted or volumes.get(mounted[0]) not in claims:
            problems.append(f"--out {out.group(1)}: not on a head volume backed by a claim defined in this file")
    return problems


def load_rayjob() -> list[dict]:
    return [d for d in yaml.safe_load_all(RAYJOB.read_text()) if d]


def test_the_rayjob_has_the_fields_that_matter():
    assert rayjob_problems(load_rayjob()) == []


def _group(documents, name):
    job = next(d for d in documents if d["kind"] == "RayJob")
    return next(g for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"] if g["groupName"] == name)


def _job(documents):
    return next(d for d in documents if d["kind"] == "RayJob")


@pytest.mark.parametrize("breakage, problem", [
    (lambda d: _job(d).update(apiVersion="ray.io/v1alpha1"), "apiVersion ray.io/v1"),
    (lambda d: _job(d)["spec"].update(entrypoint="python train.py"), "does not run `nfnzoo generate`"),
    (lambda d: _group(d, "gpu")["template"]["spec"]["containers"][0]["resources"]["limits"].pop("nvidia.com/gpu"),
     "no group with nvidia.com/gpu"),
    (lambda d: _group(d, "cpu")["template"]["spec"]["containers"][0].pop("image"), "image: missing"),
    (lambda d: _group(d, "cpu").update(replicas=20), "minReplicas <= replicas <= maxReplicas"),
    (lambda d: _job(d)["spec"].update(entrypoint="nfnzoo generate cnn-mnist --out /tmp/zoo"), "not on a head volume"),
    (lambda d: d.remove(next(x for x in d if x["kind"] == "PersistentVolumeClaim")), "not on a head volume"),
])
def test_a_broken_rayjob_is_caught(breakage, problem):
    documents = load_rayjob()
    breakage(documents)
    assert any(problem in found for found in rayjob_problems(documents))


# --- the Slurm script -------------------------------------------------------------------------

def test_the_slurm_script_is_valid_bash_and_a_broken_copy_is_not(tmp_path):
    assert subprocess.run(["bash", "-n", str(SLURM)], capture_output=True).returncode == 0
    broken = tmp_path / "broken.sbatch"
    broken.write_text(SLURM.read_text().replace("done\n", "", 1))  # a loop left open
    result = subprocess.run(["bash", "-n", str(broken)], capture_output=True, text=True)
    assert result.returncode != 0 and "syntax error" in result.stderr


def test_the_slurm_script_starts_a_head_joins_workers_and_stops_them_by_pid():
    text = SLURM.read_text()
    assert "ray start --head" in text and 'ray start --address="$RAY_ADDRESS"' in text
    assert "trap stop_cluster EXIT" in text and 'kill "${PIDS[@]}"' in text
    assert "ray stop" not in text  # by PID: never another job's Ray on a shared node


# --- every `nfnzoo` command in the recipes and the docs --------------------------------------

def _substitute(line: str) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in VARIABLES:
            raise AssertionError(f"no test value for ${name} in {line!r}: add one to VARIABLES")
        return VARIABLES[name]

    return re.sub(r"\$\{(\w+)[^}]*\}|\$(\w+)", value, line)


def commands_in(text: str) -> list[list[str]]:
    """The argument lists after `nfnzoo` in `text`'s command lines (shell lines, commented commands, YAML
    entrypoints and list items), also inside a quoted argument (`ray exec CONFIG 'nfnzoo ...'`)."""
    found = []
    logical = re.sub(r"\\\n\s*", " ", text)
    for line in logical.splitlines():
        line = line.strip().lstrip("#").strip()
        line = re.sub(r"^(- |entrypoint: )", "", line)
        if "nfnzoo " not in line or line.split()[0] not in COMMAND_WORDS:
            continue  # prose that mentions nfnzoo
        found += _commands(_substitute(line))
    return found


def _commands(line: str) -> list[list[str]]:
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []  # prose, not a command (an apostrophe)
    found = []
    for index, token in enumerate(tokens):
        if token == "nfnzoo" and index + 1 < len(tokens) and re.fullmatch(r"[a-z-]+", tokens[index + 1]):
            arguments = []
            for argument in tokens[index + 1:]:
                if argument in SHELL_OPERATORS:
                    break
                arguments.append(argument)
            found.append(arguments)
        elif "nfnzoo " in token and token != line:
            found += _commands(token)
    return found


def recipe_commands() -> list[tuple[str, list[str]]]:
    sources = [LAUNCHER, RAYJOB, SLURM] + ([DOCS] if DOCS.exists() else [])
    return [(source.name, command) for source in sources for command in commands_in(source.read_text())]


def test_the_recipes_have_generate_commands():
    names = {(source, command[0]) for source, command in recipe_commands()}
    assert {("ray-up.yaml", "generate"), ("kuberay-rayjob.yaml", "generate"), ("slurm.sbatch", "generate")} <= names


@pytest.mark.parametrize("source, command", recipe_commands(), ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_every_nfnzoo_command_in_the_recipes_parses(source, command):
    try:
        build_parser().parse_args(command)
    except SystemExit as error:
        pytest.fail(f"{source}: `nfnzoo {' '.join(command)}` does not parse (exit {error.code})")


def test_a_misspelled_command_does_not_parse(capsys):
    [command] = commands_in('ray exec x.yaml "nfnzoo generate cnn-mnist --outt /tmp/zoo"')
    with pytest.raises(SystemExit):
        build_parser().parse_args(command)
    assert "unrecognized arguments: --outt" in capsys.readouterr().err


def test_the_recipes_generate_a_bundled_spec_and_profile():
    """The spec and profile each recipe's `generate` names exist and validate (what `--dry-run` checks first)."""
    from zoo.planning.spec import load_spec

    for _, command in recipe_commands():
        if command[0] == "generate":
            arguments = build_parser().parse_args(command)
            assert load_spec(arguments.spec, arguments.profile).name == arguments.spec, command
