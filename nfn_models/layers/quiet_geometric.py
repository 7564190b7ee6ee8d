"""`torch_geometric`, imported without the warning its import raises under our torch.

While it imports, `torch_geometric` 2.8.1 calls `torch.jit.script` on two of its classes. Under torch 2.14
each call raises a FutureWarning (`torch.jit.script` is deprecated) that we cannot act on. It filled every
graph model's log and the suite's warning summary. Importing this module first imports `torch_geometric`
with that one warning ignored; any other warning still shows. The modules that use the library import it
before their own `torch_geometric` imports.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
    import torch_geometric  # noqa: F401 (imported once, its warning silenced; later imports reuse it)
