"""Training members: the classification loop, populations as one tensor program, stacked optimizers.

It also holds the device and `worker`, which trains planned runs into staging, resumably.
"""
