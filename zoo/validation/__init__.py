"""Reading what users and the outside hand us, checked and bounded.

`inputs` reads untrusted files with strict, bounded reads. `schema` checks typed data against
dataclasses. `domains` holds the value domains that specs and hyperparameters declare.
"""
