"""nfnzoo's zoo package: specs, families, training, storage, the Ray driver, the publisher.

The core imports fast. Torch-free modules (specs, planning, records) load without torch. Ray is imported
only by the distributed driver, the Hub client only by the publisher.
"""

__version__ = "0.1.0"
