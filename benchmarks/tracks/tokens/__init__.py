"""The `token-dynamics` track: tokens as particles moving under one frozen attention head.

`conditions` classifies a head by its parameters. `dynamics` integrates its ODE. `heads` reads
heads out of MiniLM and the Transformer zoo's members. `constrained` trains tiny transformers whose
heads are held in a chosen regime. `track` runs the study (`nfnzoo track run token-dynamics`)."""
