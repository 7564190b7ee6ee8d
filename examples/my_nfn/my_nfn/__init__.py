"""An example NFN package outside nfnzoo: one model, declared as an `nfnzoo.models` entry point."""
