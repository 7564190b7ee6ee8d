"""Reading what users and the outside hand us: bounded, strict reads of untrusted files
(`inputs`), typed data checked against dataclasses (`schema`), and the value domains
that specs and hyperparameters declare (`domains`).
"""
