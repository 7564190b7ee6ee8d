"""The track registry: `register_track(name)` on a `Track` subclass, `list_tracks()`, `create_track(name)`."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from zoo.registry import Registry


class Track(abc.ABC):
    """A rerunnable study: named profiles (frozen dataclasses of every setting) and `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    PROFILES: ClassVar[dict[str, Any]]  # profile name -> its settings
    DEFAULT_SEEDS: ClassVar[tuple[int, ...]]

    def profile(self, name: str) -> Any:
        if name not in self.PROFILES:
            raise ValueError(f"track {self.name!r} has no profile {name!r}; its profiles: {sorted(self.PROFILES)}")
        return self.PROFILES[name]

    @abc.abstractmethod
    def run(self, profile: str, seeds: Sequence[int], out_dir: Path,
            progress: Callable[[str], None] | None = None, workers: int = 1, *,
            address: str | None = None, gpus_per_job: float = 0.0) -> list[Path]:
        """Runs the profile over the seeds as jobs (`benchmarks.jobs.run_jobs`: in this process with
        `workers == 1` and no `address`, else Ray tasks, each with `gpus_per_job` GPUs and on the
        device they give), resuming what `out_dir` holds; returns the results files written (the
        harness's format). A job's data is read here and passed to it: a worker node may have
        none of this machine's folders."""


# the tracks, imported by name on the registry's first read (`zoo.registry`): they import this
# module to register, and this module imports none of them
TRACKS: Registry[type[Track]] = Registry("track", modules=(
    "benchmarks.tracks.norga.theory", "benchmarks.tracks.norga.track", "benchmarks.tracks.tokens.track",
    "benchmarks.tracks.wave.track"))


def register_track(name: str) -> Callable[[type[Track]], type[Track]]:
    def decorator(cls: type[Track]) -> type[Track]:
        cls.name = name
        return TRACKS.register(name)(cls)

    return decorator


def list_tracks() -> list[str]:
    return TRACKS.names()


def create_track(name: str) -> Track:
    return TRACKS.get(name)()
