"""`nfnzoo import` and `nfnzoo export`: the published zoos' layouts <-> our dataset format.

Thin wrappers over `zoo.imports`, registered by `zoo.commands.register`. Each format's options are
passed through to its importer, which refuses one it does not take.
"""

from __future__ import annotations

import argparse
import sys
import inspect
from pathlib import Path

from zoo.cli import CommandError


def _import(args: argparse.Namespace) -> int:
    from zoo.imports import get_importer
    from zoo.imports.archive import import_from
    from zoo.registry import UnknownNameError

    try:
        importer = get_importer(args.format)
    except UnknownNameError as error:
        raise CommandError(str(error)) from None
    options = {key: value for key, value in (("config", args.config), ("dataset", args.dataset),
                                             ("nfn_split", args.nfn_split)) if value is not None}
    if args.nfn_final_step is not None:
        options["nfn_final_step"] = args.nfn_final_step
    if args.prefix is not None:
        options["prefix"] = args.prefix
    if args.augmentations is not None:
        options["augmentations"] = args.augmentations
    if args.cut_off is not None:
        options["cut_off"] = args.cut_off
    if args.splits is not None:
        options["splits"] = args.splits
    options["max_shard_bytes"] = int(args.shard_mb * 2**20)
    try:  # an option this format does not take; checked on the signature, so no TypeError of the import is caught
        inspect.signature(importer).bind(args.source, args.out, **options)
    except TypeError as error:
        raise CommandError(f"import {args.format}: {error}") from None
    manifest = import_from(importer, args.source, args.out, **options)  # errors: InputError/OSError, one line
    for name, entry in sorted(manifest["configs"].items()):
        if entry.get("imported", {}).get("format") != args.format:
            continue
        counts = ", ".join(f"{split} {rows:,}" for split, rows in entry["splits"].items())
        sets = ", ".join(f"{s} ({', '.join(f'{k} {v:,}' for k, v in e['rows'].items())})"
                         for s, e in entry.get("split_sets", {}).items())
        print(f"imported {name}: {counts} ({len(entry['files'])} shards) -> {Path(args.out) / 'data' / name}")
        if sets:
            print(f"  split sets: {sets}")
        for note in entry.get("imported", {}).get("skipped", []):  # what the source holds that was not imported
            print(f"warning: {name}: {note}", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    from zoo.imports import get_exporter
    from zoo.registry import UnknownNameError

    try:
        exporter = get_exporter(args.format)
    except UnknownNameError as error:
        raise CommandError(str(error)) from None
    try:
        written = exporter(args.folder, args.out, config=args.config)
    except (FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    print(f"exported {args.folder} as {args.format} -> {written}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("import", help="read a zoo a paper published (its own layout) into our dataset format")
    p.add_argument("format", help="the published layout, e.g. small-cnn-zoo, nfn-sirens, dwsnets-inrs")
    p.add_argument("source", help="the published zoo as downloaded: its folder, or a .zip / .tar(.gz|.xz) of it "
                                  "(unpacked beside --out, checked member by member, removed after)")
    p.add_argument("--out", required=True, help="the zoo folder to write (other configs already there are kept)")
    p.add_argument("--config", default=None, help="the config name (default: <format>-<data set>)")
    p.add_argument("--dataset", default=None, help="the data set, where the source does not say (e.g. mnist)")
    p.add_argument("--nfn-split", default=None, metavar="CSV",
                   help="small-cnn-zoo: the NFN split file (AllanYangZhou/nfn experiments/predict_gen_data_splits/"
                        "<data set>_split.csv) to record the papers' split sets: 'nfn', and on the data sets they used "
                        "ScaleGMN's and Monomial-NFN's activation subsets (default: nfn_split.csv in SOURCE, if any)")
    p.add_argument("--nfn-final-step", type=int, default=None,
                   help="small-cnn-zoo: the step the NFN split keeps (default: 86, the reference's)")
    p.add_argument("--prefix", default=None,
                   help="nfn-sirens: the fits' folder prefix, <prefix>_<label>s (default: randinit_smaller)")
    p.add_argument("--augmentations", type=int, default=None, metavar="N",
                   help="nfn-sirens: also import the extra fits <prefix>_aug0 .. aug<N-1> (default: none; the "
                        "'nfn-aug' split set is then recorded too)")
    p.add_argument("--cut-off", type=float, default=None,
                   help="small-transformer-zoo: the accuracy below which the transformer-nfn split drops a "
                        "checkpoint (default: 0, as the reference README's commands; main.py's own default is 0.1)")
    p.add_argument("--splits", default=None, metavar="JSON",
                   help="dwsnets-inrs: the papers' splits file, recorded as the 'dwsnets' split set (default: "
                        "mnist_splits.json or splits.json in SOURCE, if there)")
    p.add_argument("--shard-mb", type=float, default=64, help="target shard size in MiB")
    p.set_defaults(handler=_import)

    p = subparsers.add_parser("export", help="write one of our zoos in a published zoo's layout")
    p.add_argument("format", help="the published layout, e.g. small-cnn-zoo, nfn-sirens")
    p.add_argument("folder", help="a packed zoo folder")
    p.add_argument("--out", required=True, help="the folder to write the layout into")
    p.add_argument("--config", default=None, help="the config to export (default: the zoo's only one)")
    p.set_defaults(handler=_export)
