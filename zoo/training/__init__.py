"""Training members: the classification loop, populations trained as one tensor program,
stacked optimizers, the device, and `worker` (planned runs into staging, resumably).
"""
