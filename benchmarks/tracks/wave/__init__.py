"""The wave-cre track: continual relation extraction (WAVE-CRE and its baselines)."""
