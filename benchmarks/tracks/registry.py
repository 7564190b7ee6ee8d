"""The track registry: `register_track(name)` on a `Track` subclass, `list_tracks()`, `create_track(name)`."""

from __future__ import annotations

import abc
import dataclasses
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from benchmarks.run_options import Placement
from zoo.registry import Registry


@dataclasses.dataclass(frozen=True)
class TrackRun:
    """What a track's run starts from, made once by `Track.run`.

    It holds the profile's settings, the seeds, the output folder, the progress printer and where the
    jobs run."""
    profile: str
    settings: Any
    seeds: tuple[int, ...]
    out_dir: Path
    say: Callable[[str], None]
    placement: Placement
    device: str  # the device type the jobs run on (`Placement.job_device`)

    @property
    def on_device(self) -> list[str]:
        """What a job's fingerprint adds for its device: nothing on the CPU, so CPU records keep theirs."""
        return [] if self.device == "cpu" else [self.device]

    def run_jobs(self, jobs: Sequence[Any], describe: Callable[[dict], str] | None = None) -> dict[str, dict]:
        """`benchmarks.jobs.run_jobs` on this run's folder and placement."""
        from benchmarks.jobs import run_jobs

        placement = self.placement
        return run_jobs(jobs, self.out_dir, placement.workers, self.say, describe, address=placement.address,
                        gpus_per_job=placement.gpus_per_job)


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

    def run(self, profile: str, seeds: Sequence[int], out_dir: Path,
            progress: Callable[[str], None] | None = None, workers: int = 1, *,
            address: str | None = None, gpus_per_job: float = 0.0) -> list[Path]:
        """Runs the profile over the seeds as jobs (`benchmarks.jobs.run_jobs`), resuming what `out_dir` holds.

        With `workers == 1` and no `address`, the jobs run in this process. Otherwise they are Ray tasks,
        each with `gpus_per_job` GPUs and on the device they give. Returns the results files written, in
        the harness's format. A job's data is read here and passed to it. A worker node may have none of
        this machine's folders."""
        placement = Placement(None if gpus_per_job else "cpu", workers, address, gpus_per_job)
        return self.execute(TrackRun(profile, self.profile(profile), tuple(seeds), Path(out_dir),
                                     progress or (lambda message: None), placement, placement.job_device()))

    @abc.abstractmethod
    def execute(self, run: TrackRun) -> list[Path]:
        """The track's own work on a prepared run (see `run`)."""


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
