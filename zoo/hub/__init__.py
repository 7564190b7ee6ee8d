"""The Hugging Face Hub: resolving a zoo reference (`resolve`) and publishing a zoo (`publish`).

`resolve` turns `ORG/NAME[@REVISION]` into a local snapshot. `publish` sends a zoo as one tagged commit.
"""
