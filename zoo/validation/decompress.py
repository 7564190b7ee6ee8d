"""Decompressed bytes counted while they are decompressed: a gzip, xz or bzip2 stream within a bound.

A compressed file's size says nothing about what it inflates to: 10 MB of gzip can be 10 GB of text. So
a cap on the file is no cap on what a reader holds.

`bounded(stream, limit, where)` wraps any readable binary stream, such as a `gzip.GzipFile`, an
`lzma.LZMAFile` or a plain file. The wrapper counts the bytes it hands out. It raises `InputError`
naming `where` as soon as one more than `limit` would be handed out.

A single read never asks the stream for more than the bytes left, plus one. So nothing the consumer
requests at once is allocated past the bound, be it a tar header declaring gigabytes or a large
`read(n)`.

`decompressing(raw, kind)` is the stream of one of the formats below, from an opened raw file.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from typing import BinaryIO

from zoo.validation.inputs import InputError

# kind -> the stream decompressing it (kinds are named by the file's suffix: `compression_of`)
DECOMPRESSORS = {"gzip": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
                 "xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),
                 "bzip2": lambda raw: bz2.BZ2File(raw, mode="rb"),
                 "none": lambda raw: raw}
SUFFIXES = {".gz": "gzip", ".tgz": "gzip", ".xz": "xz", ".txz": "xz", ".bz2": "bzip2"}


def compression_of(name: str) -> str:
    """The compression a file's name says it has ("none" without a known suffix)."""
    for suffix, kind in SUFFIXES.items():
        if name.endswith(suffix):
            return kind
    return "none"


def decompressing(raw: BinaryIO, kind: str) -> BinaryIO:
    """A binary stream of `raw`'s decompressed bytes (`kind` one of `DECOMPRESSORS`)."""
    return DECOMPRESSORS[kind](raw)


class BoundedReader(io.RawIOBase):
    """A readable stream that hands out at most `limit` bytes of `inner`; one more is an `InputError`."""

    def __init__(self, inner: BinaryIO, limit: int, where: str, what: str = "decompressed bytes"):
        super().__init__()
        self.inner, self.limit, self.where, self.what = inner, limit, where, what
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self.limit - self.count + 1)  # never more than the bound allows, plus one
        data = self.inner.read(wanted)
        if not data:
            return 0
        self.count += len(data)
        if self.count > self.limit:
            raise InputError(f"{self.where}: more than {self.limit:,} {self.what}, the most accepted "
                             "(zoo.validation.bounds); a compression bomb?")
        view[:len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


def bounded(inner: BinaryIO, limit: int, where: str, what: str = "decompressed bytes") -> io.BufferedReader:
    """`inner` read through a `BoundedReader` (buffered, so `readline` and small reads are cheap)."""
    return io.BufferedReader(BoundedReader(inner, limit, where, what), buffer_size=2**16)
