"""Per-operation bits, to find which kernel makes a generation's bytes depend on the processor:
`python tests/zoo/portable_ops_probe.py` prints {operation: a digest of its output} for fixed inputs
(products, reductions, transcendentals, softmax, layer norm, NumPy's kernels, an Adam step); run it
natively and under `qemu-x86_64 -cpu MODEL` in the portable environment and compare. How torch's sqrt
(MKL's vector math) was found: docs/reproducibility.md, tests/zoo/portable_emulated.py.
"""
import hashlib
import json
import sys
from pathlib import Path
import numpy as np
import torch
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
def h(t):
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else t
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]
x = torch.randn(64, 256, generator=g)
y = torch.randn(256, 128, generator=g)
z = torch.randn(64, 256, generator=g)
s = torch.randn(33, 32, generator=g)
w = torch.randn(32, 32, generator=g)
out = {"cap": torch.backends.cpu.get_cpu_capability(), "randn": h(x)}
out["add_mul"] = h(x * z + z)
out["addcmul"] = h(torch.addcmul(z, x, z, value=0.3))
out["matmul_64x256x128"] = h(x @ y)
out["matmul_33x32x32"] = h(s @ w)
out["mm_small_2x32"] = h(torch.randn(1000, 2, generator=g) @ torch.randn(2, 32, generator=g))
out["linear"] = h(torch.nn.functional.linear(s, w, torch.ones(32)))
out["sum"] = h(x.sum(1))
out["mean"] = h(x.mean())
out["sum_all"] = h(x.sum())
for f in ("sin", "cos", "exp", "tanh", "log1p", "sigmoid", "sqrt", "rsqrt", "reciprocal"):
    v = x.abs() + 0.1 if f in ("sqrt", "rsqrt", "log1p", "reciprocal") else x * 10
    out[f] = h(getattr(torch, f)(v))
out["div"] = h(x / (z.abs() + 0.5))
out["relu"] = h(torch.relu(x))
out["gelu"] = h(torch.nn.functional.gelu(x))
out["softmax"] = h(torch.softmax(x, 1))
out["log_softmax"] = h(torch.log_softmax(x, 1))
out["cross_entropy"] = h(torch.nn.functional.cross_entropy(x[:, :10], torch.arange(64) % 10))
out["layer_norm"] = h(torch.nn.functional.layer_norm(x, (256,)))
out["pow"] = h(x.abs() ** 1.7)
xn = x.numpy() * 10
out["np_sin"] = h(np.sin(xn))
out["np_cos"] = h(np.cos(xn))
out["np_tanh"] = h(np.tanh(xn))
out["np_exp"] = h(np.exp(xn / 10))
out["np_matmul"] = h(x.numpy() @ y.numpy())
out["np_sum"] = h(np.float32(xn.sum()))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
try:
    from zoo.training import simd
    names = [n for n in dir(simd) if not n.startswith("_")]
    out["simd_names"] = ",".join(names)[:80]
except Exception as e:  # noqa: BLE001 (whatever fails is the probe's finding, recorded)
    out["simd"] = str(e)[:80]
# an autograd step of a SIREN-like net and Adam
net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 1))
torch.manual_seed(1)
for p in net.parameters():
    torch.nn.init.normal_(p, 0, 0.3)
opt = torch.optim.Adam(net.parameters(), 1e-3)
c = torch.randn(784, 2, generator=g)
for i in range(3):
    hdn = torch.sin(30 * net[0](c))
    hdn = torch.sin(30 * net[1](hdn))
    o = net[2](hdn)
    loss = ((o - 0.5) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    if i == 0:
        out["grad0"] = h(torch.cat([p.grad.flatten() for p in net.parameters()]))
    opt.step()
out["adam3"] = h(torch.cat([p.detach().flatten() for p in net.parameters()]))
conv = torch.nn.functional.conv2d(torch.randn(8, 1, 28, 28, generator=g), torch.randn(16, 1, 3, 3, generator=g))
out["conv2d"] = h(conv)
print(json.dumps(out))
