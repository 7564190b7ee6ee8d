"""The Hugging Face Hub: resolving `ORG/NAME[@REVISION]` to a local snapshot (`resolve`)
and publishing a zoo as one tagged commit (`publish`).
"""
