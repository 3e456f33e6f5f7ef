"""Paired timing, shared by the benchmarks: commands run in turn (A B A B ...), and what is quoted is the median
of each pair's ratio, beside each command's median time. A shared machine that slows down for a while slows
both commands of a pair, so the ratio holds where the times drift; a regression shows as a ratio, not a time.
Each figure is printed with the machine's load average at the time (`os.getloadavg`, as `uptime` says it).
"""

from __future__ import annotations

import os
import stat
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Paired", "evict", "load", "run_paired", "timed"]


def load() -> str:
    """The load averages over 1, 5 and 15 minutes, as `uptime` prints them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def evict(roots: Sequence[str]) -> tuple[int, int]:
    """Drop the regular files under `roots` from the page cache (posix_fadvise DONTNEED: no root needed, and a
    page another process maps stays), so that the next run that reads them reads them from disk, as the first run
    on a machine does; the files and bytes asked for."""
    files = size = 0
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue
                try:
                    info = os.fstat(fd)
                    if stat.S_ISREG(info.st_mode):
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        files, size = files + 1, size + info.st_size
                finally:
                    os.close(fd)
    return files, size


def timed(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> tuple[float, int]:
    """One run's wall seconds, as a whole process, and its exit status."""
    started = time.perf_counter()
    proc = subprocess.run(list(argv), check=False, capture_output=True, text=True, env=env, cwd=cwd)
    return time.perf_counter() - started, proc.returncode


@dataclass
class Paired:
    """The runs of each arm, round by round (every arm once per round, in the order given)."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)
    """The load average when each round ended."""

    def median(self, arm: str) -> float:
        return statistics.median(self.samples[arm])

    def ratios(self, a: str, b: str) -> list[float]:
        """a / b, round by round."""
        return [x / y for x, y in zip(self.samples[a], self.samples[b]) if y > 0]

    def ratio(self, a: str, b: str) -> float:
        """The median of a / b over the rounds."""
        return statistics.median(self.ratios(a, b))

    def lines(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """Each arm's median and runs, then each pair's median ratio with its spread, and the load."""
        out = [f"{arm:28s} median {self.median(arm):6.2f} s   ({', '.join(f'{s:.2f}' for s in runs)})"
               for arm, runs in self.samples.items()]
        for a, b in pairs:
            ratios = self.ratios(a, b)
            out.append(f"paired {a} / {b}: median {statistics.median(ratios):.2f} over {len(ratios)} pairs "
                       f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
        if self.loads:
            out.append(f"machine: {self.loads[0]} at the first round, {self.loads[-1]} at the last")
        return out


def run_paired(arms: Mapping[str, Callable[[], float]], rounds: int, warmup: int = 1,
               on_round: Callable[[int, dict[str, float]], None] | None = None) -> Paired:
    """Run each arm (a callable that runs once and returns its wall seconds) once per round, in turn, after
    `warmup` rounds that are not counted."""
    paired = Paired({name: [] for name in arms})
    for index in range(warmup + rounds):
        figures = {name: arm() for name, arm in arms.items()}
        if index < warmup:
            continue
        for name, seconds in figures.items():
            paired.samples[name].append(seconds)
        paired.loads.append(load())
        if on_round is not None:
            on_round(index - warmup + 1, figures)
    return paired
