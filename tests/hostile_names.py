"""The hostile spellings of a name a received file supplies: each must be refused wherever such a name
enters (a manifest's keys, a spec's name, a results file's names), in one line (docs/security.md)."""

HOSTILE = {
    "dot-dot": "..",
    "parent": "../x",
    "escape": "x/../../../victims/pwned",
    "absolute": "/tmp/victims/pwned",
    "empty": "",
    "nul": "a\x00b",
    "escape-sequence": "a\x1b[2Jb",
    "newline": "a\nb",
    "long": "a" * 10_000,
    "look-alike": "сnn-mnist",  # a Cyrillic es
    "bidi": "a\u202eb",
    "trailing-dot": "x.",
    "trailing-space": "x ",
}
