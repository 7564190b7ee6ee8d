"""Philox-4x32-10, a counter-based random number generator, in integer tensor operations.

This is the Philox construction of Salmon, Moraes, Dror and Shaw 2011,
"Parallel random numbers: as easy as 1, 2, 3" (SC11), section "Philox-NxW-R".
The reference realisation is Random123's `philox.h`.
A counter-based generator is a keyed bijection `f_key(counter)`.
Any draw is computed directly from its coordinates, with no state to advance.
So a population's draws come from a few tensor operations.
A member's draws do not depend on the population, batch shape or device that computed them.

One Philox-4x32 round updates the counter words (c0, c1, c2, c3) under the round key (k0, k1).
Below, mulhilo(a, b) is the high and low 32-bit word of the exact 64-bit product a * b.
With M0 = 0xD2511F53 and M1 = 0xCD9E8D57, a round computes

    hi0, lo0 = mulhilo(M0, c0)
    hi1, lo1 = mulhilo(M1, c2)
    (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0,  lo1,  hi0 ^ c3 ^ k1,  lo0).

Between rounds the key is bumped by the Weyl constants, k0 <- k0 + 0x9E3779B9 and
k1 <- k1 + 0xBB67AE85 (mod 2^32).
These are the golden ratio and sqrt(3) - 1 in 32 bits.
Round r uses key + (r - 1) * W.
Ten rounds is the paper's recommended count, Crush-resistant with margin.

Every word is a torch.int64 tensor holding a value in [0, 2^32).
The product of two such values reaches 2^64 and overflows signed int64.
In the C++ kernels that is undefined behaviour, not merely wraparound.
So `mulhilo` splits the constant multiplier into 16-bit halves.
Each partial product is below 2^48, and shifts and masks recombine them exactly.
Only integer ops are used, so CPU and CUDA give the same bits by construction.

Draws are addressed by (seed, stream, step, member, index).
The 64-bit run seed is the key: low word k0, high word k1.
The counter is (index // 4, member, step, stream).
A draw's 32-bit word is word `index % 4` of that block.
`seed` and `step` may be per member.

On top of the raw words:

`uniform` in float32 is (word >> 8) * 2^-24, in [0, 1 - 2^-24].
These are the 24 high bits, exactly representable.
In float64 it is word * 2^-32, in [0, 1 - 2^-32].

`below(n)` is floor(word * n / 2^32) for 1 <= n <= 2^31, where the product fits int64.
Each value's probability is the floor or ceil of 2^32 / n, over 2^32.
That is off from 1/n by less than 2^-32: a relative bias below n / 2^32 (1.4e-5 for n = 60,000).

`bernoulli(p)` is word < round(p * 2^32).
P(True) is p to within 2^-33, and p = 1 is always True.

`permutation(n)` is a stable argsort of 63-bit keys (w_2i << 31 | w_2i+1 >> 1).
Equal keys keep index order, so the result is one well-defined permutation on every device.
They come with probability below n^2 / 2^64, 2e-10 for n = 60,000.
The result's distance from uniform is at most that collision probability.

`crop_offsets` is `below(2 * padding + 1)` for (dy, dx).

Engines (`ENGINES`) all give the same words.
``torch`` is the integer tensor ops above.
It is the default on CUDA, where it runs as a few kernels for the whole population.
``randomgen`` is the C Philox4x32-10 of randomgen (Kevin Sheppard's bit generators, numpy's upstream).
It makes one call per member.
It is the default on the CPU, where it outruns the tensor ops and a per-member float64 `torch.rand`.
The rates are on docs/performance.md.
``compiled`` (`fused=True`) is the tensor ops as one `torch.compile`d kernel.
On the CPU it beats the eager ops, after a one-off compile.
The tests check every engine against the published known answers and against each other.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
PHILOX_M0 = 0xD2511F53  # multiplier of counter word 0
PHILOX_M1 = 0xCD9E8D57  # multiplier of counter word 2
PHILOX_W0 = 0x9E3779B9  # key bump of word 0: golden ratio
PHILOX_W1 = 0xBB67AE85  # key bump of word 1: sqrt(3) - 1
ROUNDS = 10
CPU_TILE_BLOCKS = 1 << 15  # counter blocks per tile on the CPU: the round's (tile,) int64 temporaries stay in cache

Index = int | torch.Tensor


def mulhilo(a: torch.Tensor, multiplier: int) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32-bit words of a * multiplier, computed exactly.

    `a` is int64 in [0, 2^32), and the constant multiplier is in [0, 2^32).
    The multiplier is split into 16-bit halves, m = m1 * 2^16 + m0.
    """
    upper = a * (multiplier >> 16)  # a * m1 < 2^48
    middle = a * (multiplier & 0xFFFF)  # a * m0 < 2^48
    # a * m = (upper >> 16) * 2^32 + ((upper & 0xFFFF) << 16) + middle; the sum below is < 2^49
    middle += (upper & 0xFFFF).bitwise_left_shift_(16)
    high = upper.bitwise_right_shift_(16).add_(middle >> 32)
    return high, middle.bitwise_and_(MASK32)


def philox4x32(counter: torch.Tensor, key: torch.Tensor, rounds: int = ROUNDS,
               multipliers: tuple[int, int] = (PHILOX_M0, PHILOX_M1),
               weyl: tuple[int, int] = (PHILOX_W0, PHILOX_W1)) -> torch.Tensor:
    """Philox-4x32-R of counters (..., 4) under keys broadcastable to (..., 2); returns (..., 4).

    Words are int64 in [0, 2^32).
    `multipliers` and `weyl` exist for the negative control.
    """
    if counter.dtype != torch.int64 or key.dtype != torch.int64:
        raise TypeError(f"philox4x32 takes int64 words, got counter {counter.dtype} and key {key.dtype}")
    c0, c1, c2, c3 = counter.unbind(-1)
    k0, k1 = key.unbind(-1)
    for round_index in range(rounds):
        if round_index:
            k0, k1 = (k0 + weyl[0]) & MASK32, (k1 + weyl[1]) & MASK32
        hi0, lo0 = mulhilo(c0, multipliers[0])
        hi1, lo1 = mulhilo(c2, multipliers[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return torch.stack(torch.broadcast_tensors(c0, c1, c2, c3), dim=-1)


def _word_tensor(value: Index, name: str, device: torch.device | None, bits: int = 32) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            raise TypeError(f"{name} must be an integer tensor, got {value.dtype}")
        if value.numel() and (int(value.min()) < 0 or (bits == 32 and int(value.max()) > MASK32)):
            raise ValueError(f"{name} must lie in [0, 2^{bits}); got values in "
                             f"[{int(value.min())}, {int(value.max())}]")
        return value.to(device=device if device is not None else value.device, dtype=torch.int64)
    if not 0 <= int(value) < 2 ** bits:
        raise ValueError(f"{name} must lie in [0, 2^{bits}); got {value}")
    if bits == 64:  # a 64-bit seed does not fit int64: keep it as its two words
        return torch.tensor([int(value) & MASK32, int(value) >> 32], dtype=torch.int64, device=device)
    return torch.tensor(int(value), dtype=torch.int64, device=device)


def _seed_key(seed: Index, device: torch.device | None) -> torch.Tensor:
    """Key words (..., 2): low and high 32 bits of each 64-bit seed."""
    if isinstance(seed, torch.Tensor):
        # int64 tensors hold seeds < 2^63; a seed given as a Python int may use all 64 bits.
        words = _word_tensor(seed, "seed", device, bits=63)
        return torch.stack([words & MASK32, words >> 32], dim=-1)
    return _word_tensor(seed, "seed", device, bits=64)


_FUSED: list = []  # the torch.compile'd philox4x32, made on first use


def _fused_philox4x32(counter: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """philox4x32 as one compiled kernel: torch.compile fuses the ten rounds, with no temporaries in memory.

    The integer ops are the same, so the bits are the same.
    The first call compiles, which takes a while (docs/performance.md).
    The first call with another shape compiles once more, shape-generic (torch.compile's default).
    """
    if not _FUSED:
        _FUSED.append(torch.compile(philox4x32))  # a second shape recompiles it shape-generic
    return _FUSED[0](counter, key)


def random_words(seed: Index, stream: int, step: Index, member: Index, count: int,
                 device: torch.device | str | None = None, fused: bool = False,
                 engine: str | None = None) -> torch.Tensor:
    """Words (M, count) in [0, 2^32) as int64.

    Row m is member m's draws 0..count-1 of (seed, stream, step).
    M is the broadcast size of seed, step and member, each an int or a 1-D tensor.
    Word j of a member is word j % 4 of Philox(counter (j // 4, member, step, stream), key seed).
    So it does not depend on the other members or on `count`.
    `engine` (module docstring) defaults to randomgen on the CPU and to the tensor ops elsewhere.
    `fused` is engine ``compiled``.
    Every engine gives the same words.
    """
    _check_count(count)
    device = _device(device, seed, step, member)
    engine, *coordinates = _coordinates(seed, stream, step, member, device, fused, engine)
    return ENGINES[engine](*coordinates, count, device)


def _device(device: torch.device | str | None, *coordinates: Index) -> torch.device:
    """`device`, else that of the first tensor coordinate, else the CPU."""
    if device is not None:
        return torch.device(device)
    return next((v.device for v in coordinates if isinstance(v, torch.Tensor)), torch.device("cpu"))


def _check_count(words: int) -> None:
    if words < 0:
        raise ValueError(f"count must be >= 0, got {words}")
    if (words + 3) // 4 > MASK32 + 1:
        raise ValueError(f"count {words} exceeds the 2^34 words of one (seed, stream, step, member)")


def _coordinates(seed: Index, stream: int, step: Index, member: Index, device: torch.device, fused: bool,
                 engine: str | None) -> tuple:
    """(engine, key (M, 2), stream, step (M,), member (M,)) for M members, checked."""
    engine = engine or ("compiled" if fused else "randomgen" if device.type == "cpu" and HAVE_RANDOMGEN else "torch")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {sorted(ENGINES)}")
    if engine == "randomgen" and device.type != "cpu":
        raise ValueError(f"engine 'randomgen' runs on the CPU, not on {device}")
    key = _seed_key(seed, device)  # (M, 2) or (2,)
    step_word = _word_tensor(step, "step", device)
    member_word = _word_tensor(member, "member", device)
    stream_word = _word_tensor(stream, "stream", device)
    members = torch.broadcast_shapes(key.shape[:-1], step_word.shape, member_word.shape)
    if len(members) > 1:
        raise ValueError(f"seed, step and member must be ints or 1-D tensors, got shape {members}")
    size = members[0] if members else 1
    return engine, key.expand(size, 2), int(stream_word), step_word.expand(size), member_word.expand(size)


def _tensor_words(key: torch.Tensor, stream: int, step: torch.Tensor, member: torch.Tensor, count: int,
                  device: torch.device, core=philox4x32) -> torch.Tensor:
    size, blocks = key.shape[0], (count + 3) // 4
    total = size * blocks
    words = torch.empty(total, 4, dtype=torch.int64, device=device)
    # The (member, block) pairs are cut into flat tiles. On the CPU, tiles of CPU_TILE_BLOCKS
    # keep the round's temporaries in cache (faster than whole-population tensors,
    # docs/performance.md); elsewhere one tile unless compiled. Tiling never changes a word.
    tile = CPU_TILE_BLOCKS if device.type == "cpu" or core is not philox4x32 else max(1, total)
    stream_word = torch.tensor(stream, dtype=torch.int64, device=device)
    for first in range(0, total, tile):
        valid = min(tile, total - first)
        flat = torch.arange(first, first + valid, dtype=torch.int64, device=device)
        row = flat // blocks
        counter = torch.stack([flat - row * blocks, member[row], step[row],
                               stream_word.expand(flat.shape)], dim=-1)  # (tile, 4)
        words[first:first + valid] = core(counter, key[row])[:valid]
    return words.reshape(size, blocks * 4)[:, :count]


def _compiled_words(key, stream, step, member, count, device) -> torch.Tensor:
    return _tensor_words(key, stream, step, member, count, device, core=_fused_philox4x32)


def _randomgen_words(key: torch.Tensor, stream: int, step: torch.Tensor, member: torch.Tensor, count: int,
                     device: torch.device) -> torch.Tensor:
    """randomgen's Philox4x32-10, one member at a time.

    Its 128-bit counter is c0 | c1 << 32 | c2 << 64 | c3 << 96.
    It is incremented before each block, so it starts one below block 0.
    """
    rows = np.empty((key.shape[0], count), dtype=np.uint64)
    for m, generator in enumerate(_randomgen_members(key, stream, step, member)):
        rows[m] = generator.random_raw(count)
    return torch.from_numpy(rows.view(np.int64))


def _randomgen_members(key: torch.Tensor, stream: int, step: torch.Tensor, member: torch.Tensor):
    """One randomgen Philox4x32-10 per member, at word 0 of its (seed, stream, step, member)."""
    from randomgen import Philox  # a pinned dependency; where it is missing the CPU uses the tensor ops

    for k0, k1, member_m, step_m in zip(*key.T.tolist(), member.tolist(), step.tolist()):
        counter = (member_m << 32 | step_m << 64 | stream << 96) - 1
        yield Philox(number=4, width=32, key=k0 | k1 << 32, counter=counter % 2 ** 128)


def _randomgen_below16(key: torch.Tensor, stream: int, step: torch.Tensor, member: torch.Tensor, count: int,
                       thresholds: list[int]) -> torch.Tensor:
    """`bernoulli(bits=16)` on the CPU without int64 temporaries.

    Each member's words come as uint32, read as little-endian uint16 pairs.
    Draw 2i is word i's low half.
    The draws are compared in place.
    """
    out = np.empty((key.shape[0], count), dtype=np.bool_)
    for m, generator in enumerate(_randomgen_members(key, stream, step, member)):
        halves = np.random.Generator(generator).integers(0, 2 ** 32, (count + 1) // 2, dtype=np.uint32)
        threshold = thresholds[m]
        if threshold == 0:
            out[m] = False
        else:  # draw < threshold, as draw <= threshold - 1 in uint16 (threshold is at most 2^16)
            np.less_equal(halves.view(np.uint16)[:count], np.uint16(threshold - 1), out=out[m])
    return torch.from_numpy(out)


ENGINES = {"torch": _tensor_words, "compiled": _compiled_words, "randomgen": _randomgen_words}
HAVE_RANDOMGEN = importlib.util.find_spec("randomgen") is not None


def _per_member_shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for extent in shape:
        total *= extent
    return total


def uniform(seed: Index, stream: int, step: Index, member: Index, shape: int | tuple[int, ...],
            dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
            fused: bool = False) -> torch.Tensor:
    """Floats (M, *shape) in [0, 1): float32 = (word >> 8) * 2^-24; float64 = word * 2^-32."""
    shape = _per_member_shape(shape)
    words = random_words(seed, stream, step, member, _numel(shape), device, fused)
    if dtype == torch.float32:
        values = (words >> 8).to(torch.float32) * 2.0 ** -24
    elif dtype == torch.float64:
        values = words.to(torch.float64) * 2.0 ** -32
    else:
        raise ValueError(f"uniform supports float32 and float64, got {dtype}")
    return values.reshape(-1, *shape)


def below(seed: Index, stream: int, step: Index, member: Index, shape: int | tuple[int, ...],
          n: Index, device: torch.device | str | None = None, fused: bool = False) -> torch.Tensor:
    """Integers (M, *shape) in [0, n): floor(word * n / 2^32); `n` an int or one per member
    (M,), 1 <= n <= 2^31. Bias: each value's probability is within 2^-32 of 1/n."""
    shape = _per_member_shape(shape)
    words = random_words(seed, stream, step, member, _numel(shape), device, fused)
    bound = torch.as_tensor(n, dtype=torch.int64, device=words.device)
    if bound.numel() and (int(bound.min()) < 1 or int(bound.max()) > 2 ** 31):
        raise ValueError(f"n must lie in [1, 2^31], got {n}")
    if bound.dim() == 1:
        bound = bound.unsqueeze(1)
    elif bound.dim() > 1:
        raise ValueError(f"n must be an int or one value per member (1-D), got shape {tuple(bound.shape)}")
    return ((words * bound) >> 32).reshape(-1, *shape)


def bernoulli(seed: Index, stream: int, step: Index, member: Index, shape: int | tuple[int, ...],
              p: float | torch.Tensor, device: torch.device | str | None = None,
              fused: bool = False, bits: int = 32, engine: str | None = None) -> torch.Tensor:
    """Booleans (M, *shape), True with probability p: draw < round(p * 2^bits).

    `p` is a float or one value per member.
    With bits = 32 a draw is a word.
    With bits = 16, word i gives draws 2i (its low half) and 2i + 1 (its high half).
    That halves the Philox work and resolves p to 2^-16.
    A dropout keep-mask is `bernoulli(..., p=1 - rate, bits=16)`: rate 0.05 keeps with 0.949997.
    """
    if bits not in (16, 32):
        raise ValueError(f"bits must be 16 or 32, got {bits}")
    shape = _per_member_shape(shape)
    count = _numel(shape)
    words_needed = count if bits == 32 else (count + 1) // 2
    _check_count(words_needed)
    device = _device(device, seed, step, member)
    probability = torch.as_tensor(p, dtype=torch.float64, device=device)
    if probability.numel() and (float(probability.min()) < 0.0 or float(probability.max()) > 1.0):
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if probability.dim() > 1:
        raise ValueError(f"p must be a float or one value per member (1-D), got shape {tuple(probability.shape)}")
    threshold = torch.round(probability * 2.0 ** bits).to(torch.int64)  # exact: p * 2^bits < 2^53
    engine, *coordinates = _coordinates(seed, stream, step, member, device, fused, engine)
    if bits == 16 and engine == "randomgen":
        thresholds = threshold.expand(coordinates[0].shape[0]).tolist()
        return _randomgen_below16(*coordinates, count, thresholds).reshape(-1, *shape)
    words = ENGINES[engine](*coordinates, words_needed, device)
    if bits == 16:
        words = torch.stack((words & 0xFFFF, words >> 16), dim=-1).flatten(1)[:, :count]
    if threshold.dim() == 1:
        threshold = threshold.unsqueeze(1)
    return (words < threshold).reshape(-1, *shape)


def permutation(seed: Index, stream: int, step: Index, member: Index, n: int,
                device: torch.device | str | None = None, fused: bool = False) -> torch.Tensor:
    """A permutation of range(n) per member, (M, n) int64.

    It is the stable argsort of 63-bit keys, (word 2i << 31 | word 2i+1 >> 1) for element i.
    """
    if not 0 <= n <= 2 ** 31:
        raise ValueError(f"n must lie in [0, 2^31], got {n}")
    words = random_words(seed, stream, step, member, 2 * n, device, fused).reshape(-1, n, 2)
    keys = (words[..., 0] << 31) | (words[..., 1] >> 1)  # < 2^63: non-negative int64
    return torch.sort(keys, dim=1, stable=True).indices


def crop_offsets(seed: Index, stream: int, step: Index, member: Index, batch_size: int,
                 padding: int, device: torch.device | str | None = None, fused: bool = False) -> torch.Tensor:
    """Random-crop offsets (M, batch_size, 2) as (dy, dx), each in [0, 2 * padding].

    They say where each padded image's crop starts.
    """
    if padding < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    return below(seed, stream, step, member, (batch_size, 2), 2 * padding + 1, device, fused)
