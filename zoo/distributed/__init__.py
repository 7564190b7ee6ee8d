"""Ray: the generation driver, one trial on any node, and the Ray connection and its clean-up.

It also holds back signals while files change together, and describes what a machine is.
"""
