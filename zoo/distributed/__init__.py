"""Ray: the generation driver, one trial on any node, the Ray connection and its
clean-up, signals held back while files change together, and what a machine is.
"""
