"""What `nfnzoo verify` checks of a zoo's card (README.md) against its manifest.

The card is what `datasets.load_dataset` reads. Its YAML header's `configs` name each split's shard
files (`zoo.dataset.card.split_paths`); an older pack's card reads a glob per split.

The card must list every config of the manifest. A config whose files differ from the manifest's is a
warning, which `nfnzoo publish` refuses. It means a pack was killed between writing the manifest and the
card. Each names a complete pack, and the next `nfnzoo pack` rewrites the card.

Where the files agree, the card must say "Incomplete" for exactly the configs the manifest marks
incomplete. The card is read with a cap, and its YAML with the alias bound of `zoo.validation.inputs`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


from zoo.dataset.card import CARD, INCOMPLETE_MARK, split_paths
from zoo.validation.inputs import InputError, load_yaml_text, read_capped
from zoo.planning.spec import SPLIT_NAMES

MAX_CARD_BYTES = 16 * 2**20


@dataclasses.dataclass
class CardReport:
    problems: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    globbed: set[str] = dataclasses.field(default_factory=set)  # configs whose card reads a glob (older packs)
    stale: set[str] = dataclasses.field(default_factory=set)  # configs whose card names other shards


def read_card(path: Path) -> tuple[dict, str]:
    """(YAML header, body) of a card; an unreadable one is an `InputError` naming it."""
    text = read_capped(path, MAX_CARD_BYTES, "dataset card").decode("utf-8", errors="replace")
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        raise InputError(f"{path}: no YAML header between --- lines")
    end = text.index("\n---\n", 3)
    header = load_yaml_text(text[4:end], f"{path}: its YAML header")
    if not isinstance(header, dict):
        raise InputError(f"{path}: its YAML header is not a mapping")
    return header, text[end + 5:]


def _section(body: str, name: str) -> str:
    start = body.find(f"\n## `{name}`\n")
    if start < 0:
        return ""
    end = body.find("\n## ", start + 1)
    return body[start:end if end >= 0 else len(body)]


def card_problems(folder: Path, manifest: dict) -> CardReport:
    report = CardReport()
    fix = f"{CARD}: missing or does not list the configs (re-run `nfnzoo pack`)"
    try:
        header, body = read_card(Path(folder) / CARD)
    except InputError as error:
        report.problems.append(fix if "no such" in str(error) else f"{error} (re-run `nfnzoo pack`)")
        return report
    configs = header.get("configs") if isinstance(header.get("configs"), list) else []
    card_files = {c.get("config_name"): c.get("data_files") for c in configs if isinstance(c, dict)}
    for name, entry in sorted(manifest["configs"].items()):
        if name not in card_files:
            report.problems.append(fix)
            return report
        data_files = {d.get("split"): d.get("path") for d in card_files[name] or [] if isinstance(d, dict)}
        if any(isinstance(path, str) and "*" in path for path in data_files.values()):
            report.globbed.add(name)
        else:
            expected = {split: split_paths(entry, split) for split in SPLIT_NAMES if entry["splits"].get(split)}
            if data_files != expected:
                report.stale.add(name)
                report.warnings.append(f"{CARD}: config {name}: the card names other shards than {'manifest.json'} "
                                       "(a pack was interrupted between writing them; `datasets.load_dataset` reads "
                                       "the card's); the next `nfnzoo pack` rewrites it, and `nfnzoo publish` "
                                       "refuses it until then")
                continue
        says_incomplete = INCOMPLETE_MARK in _section(body, name)
        if says_incomplete == entry["complete"]:
            report.problems.append(
                f"{CARD}: config {name}: the card says it is {'incomplete' if says_incomplete else 'complete'}, the "
                f"manifest that it is {'complete' if entry['complete'] else 'incomplete'} (re-run `nfnzoo pack`)")
    return report
