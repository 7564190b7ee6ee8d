"""A small timm ViT pretrained here on glyphs, cached by its config, with its checksum recorded.

The prompt-based continual-learning methods assume a pretrained backbone: the paper's ViT-B/16 on
ImageNet-21k. None is reachable offline, so `pretrained_backbone` trains one. It is a timm
`VisionTransformer` (`timm.create_model`, randomly initialised). It classifies the pretraining
letters of `benchmarks.tracks.common.glyphs`, those not held out for continual learning. Each step
draws fresh augmented images. Training uses AdamW and a cosine schedule, seeded, in one torch
thread. So the weights do not depend on the caller's thread count.

The result goes to `<cache>/backbones/<config hash>.safetensors`, with a JSON sidecar. The sidecar
holds the config, the sha256 of the weights, the final training accuracy on a fixed augmented
batch, and the wall time. A later call with the same config loads the file after checking its
sha256. A mismatch is an error naming the file. So the pretraining runs once per machine and
config.

`TimmBackbone` names any other timm ViT (`timm.create_model(name, pretrained=...)`). That is the
paper's ViT-B/16 on ImageNet-21k, wherever timm can fetch its weights. In the tests it is a randomly
initialised tiny ViT. Its inputs are resized to the model's size and normalised per batch
(`prompted_vit.InputTransform`). Its record holds the sha256 of its weights. `load_backbone(spec)`
gives either kind."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from benchmarks.files import read_json
from zoo.storage.atomic import write_bytes_atomic, write_json_atomic
from zoo.validation.inputs import read_capped

MAX_BACKBONE_BYTES = 2 * 2**30  # the track's ViTs are a few megabytes

CACHE_VARIABLE = "NFNZOO_CACHE"


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
    image_size: int = 32
    patch_size: int = 4
    embed_dim: int = 64
    depth: int = 6
    num_heads: int = 4
    letters: tuple[str, ...] = ()  # the pretraining classes
    steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 100
    seed: int = 0

    def key(self) -> str:
        """A stable hash of the config: the cache file's name."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_folder() -> Path:
    root = os.environ.get(CACHE_VARIABLE)
    return (Path(root) if root else Path.home() / ".cache" / "nfnzoo") / "backbones"


def create_vit(config: BackboneConfig, num_classes: int = 0) -> nn.Module:
    import timm

    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=config.image_size,
                             patch_size=config.patch_size, embed_dim=config.embed_dim, depth=config.depth,
                             num_heads=config.num_heads, in_chans=1, num_classes=num_classes)


def _schedule(config: BackboneConfig, step: int) -> float:
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


@contextlib.contextmanager
def _one_thread():
    """One torch thread, so the seeded run gives the same weights every time.

    Multithreaded CPU kernels sum in an order that depends on the thread count. So a pretraining run
    with 2 threads can end elsewhere than one with 1. With one thread, the weights are fixed for a
    given CPU and torch build."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def pretrain(config: BackboneConfig, progress: Callable[[int, float], None] | None = None) -> tuple[nn.Module, float]:
    """Trains the ViT on the pretraining letters, in one torch thread (`_one_thread`).

    Returns it, head removed, and its accuracy on a fixed augmented batch."""
    with _one_thread():
        return _pretrain(config, progress)


def _pretrain(config: BackboneConfig, progress: Callable[[int, float], None] | None) -> tuple[nn.Module, float]:
    from benchmarks.tracks.common.glyphs import GlyphRenders

    if len(config.letters) < 2:
        raise ValueError("the backbone pretrains on at least 2 letters; got "
                         f"{len(config.letters)}")
    renders = GlyphRenders.of(config.letters, config.image_size)
    generator = torch.Generator().manual_seed(config.seed)
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = create_vit(config, num_classes=len(config.letters))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _schedule(config, step))
    per_class = max(1, config.batch_size // len(config.letters))
    model.train()
    for step in range(config.steps):
        images, labels = renders.sample(per_class, generator)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if progress is not None:
            progress(step, float(loss.detach()))
    model.eval()
    images, labels = renders.sample(8, torch.Generator().manual_seed(config.seed + 1))
    with torch.no_grad():
        accuracy = float((model(images).argmax(1) == labels).float().mean())
    model.reset_classifier(0)
    return model, accuracy


def pretrained_backbone(config: BackboneConfig, *, cache: Path | None = None,
                        progress: Callable[[int, float], None] | None = None) -> tuple[nn.Module, dict]:
    """The pretrained ViT (no head) for `config` and its record, from the cache or trained now."""
    from safetensors.torch import load as safetensors_load, save

    folder = cache or cache_folder()
    weights, sidecar = folder / f"{config.key()}.safetensors", folder / f"{config.key()}.json"
    if weights.exists() and sidecar.exists():
        # the cache is a folder of the user's: both files read bounded (regular files, capped sizes)
        record = read_json(sidecar)
        recorded = record.get("sha256") if isinstance(record, dict) else None
        if not isinstance(recorded, str):
            raise ValueError(f"{sidecar}: not a backbone record (no sha256); delete it to pretrain the backbone again")
        data = read_capped(weights, MAX_BACKBONE_BYTES, "backbone weights file")
        actual = hashlib.sha256(data).hexdigest()
        if actual != recorded:
            raise ValueError(f"{weights}: sha256 {actual[:12]}… is not the recorded {ascii(recorded[:12])}…; "
                             "delete it to pretrain the backbone again")
        model = create_vit(config)
        model.load_state_dict(safetensors_load(data))
        return model.eval(), {**record, "cached": True}
    start = time.perf_counter()
    model, accuracy = pretrain(config, progress)
    data = save({name: tensor.contiguous() for name, tensor in model.state_dict().items()})
    record = {"config": dataclasses.asdict(config), "sha256": hashlib.sha256(data).hexdigest(),
              "train_accuracy": accuracy, "wall_time_s": time.perf_counter() - start, "torch_threads": 1,
              "torch": torch.__version__}
    write_bytes_atomic(weights, data)  # the weights first: a sidecar always names a complete file
    write_json_atomic(sidecar, record, sort_keys=True)
    return model, {**record, "cached": False}


@dataclasses.dataclass(frozen=True)
class TimmBackbone:
    model: str = "vit_base_patch16_224.augreg_in21k"  # a timm model name
    pretrained: bool = True
    image_size: int = 224  # inputs are resized to it
    in_chans: int = 3
    mean: tuple[float, ...] | None = None  # input normalisation; None: the model's pretrained_cfg
    std: tuple[float, ...] | None = None
    overrides: tuple[tuple[str, int], ...] = ()  # more timm keyword arguments, e.g. (("depth", 2),)
    seed: int = 0  # the initialisation of whatever is not pretrained


def state_sha256(model: nn.Module) -> str:
    """The sha256 of a model's state (its tensors' bytes by sorted name): its weights' checksum."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def timm_backbone(spec: TimmBackbone) -> tuple[nn.Module, dict]:
    """The timm ViT of `spec` (no head) with its input transform, and its record."""
    import timm

    from benchmarks.tracks.common.prompted_vit import InputTransform, with_input_transform

    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        try:
            model = timm.create_model(spec.model, pretrained=spec.pretrained, img_size=spec.image_size,
                                      in_chans=spec.in_chans, num_classes=0, **dict(spec.overrides))
        except (RuntimeError, OSError, ValueError) as error:  # unknown name, or weights not reachable
            raise ValueError(f"timm cannot create {spec.model!r} (pretrained={spec.pretrained}): {error}") from error
    config = getattr(model, "pretrained_cfg", None) or {}
    mean = spec.mean if spec.mean is not None else tuple(config.get("mean", ())) or None
    std = spec.std if spec.std is not None else tuple(config.get("std", ())) or None
    if mean is not None and len(mean) != spec.in_chans:
        mean = std = None  # the pretrained statistics are for another channel count
    with_input_transform(model, InputTransform(spec.image_size, mean, std))
    record = {"model": spec.model, "pretrained": spec.pretrained, "sha256": state_sha256(model),
              "mean": mean, "std": std, "num_params": sum(p.numel() for p in model.parameters())}
    return model.eval(), record


def load_backbone(spec: BackboneConfig | TimmBackbone, pretrain: bool = True,
                  progress: Callable[[int, float], None] | None = None) -> tuple[nn.Module, dict]:
    """A glyph-pretrained ViT (cached), or a timm ViT.

    Without `pretrain`, the glyph ViT keeps its random initialisation. `progress(step, loss)` follows a
    pretraining that runs now."""
    if isinstance(spec, TimmBackbone):
        return timm_backbone(spec)
    if pretrain:
        return pretrained_backbone(spec, progress=progress)
    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        return create_vit(spec).eval(), {"sha256": None, "random_init": True}
