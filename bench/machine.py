"""How much of the machine the bench had: CPU steal time while a figure was taken.

On a virtual machine the hypervisor can run other guests on this one's CPUs; the time a
virtual CPU was ready but not running is "steal", the eighth number of the ``cpu`` line of
``/proc/stat`` (Linux ``proc(5)``). On the 2-core machine this project is benchmarked on,
steal went from 0% to 30–65% between two runs of the same replay, and the REST p95 of the
100k hybrid row with it from 43 ms to 108–258 ms: a latency figure means little without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time counters (clock ticks, all CPUs together)."""

    total: int
    steal: int


def cpu_times(path: Path = PROC_STAT) -> CpuTimes | None:
    """The aggregate ``cpu`` line of ``path``; ``None`` where there is none (not Linux)."""
    try:
        first = path.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu" or len(first) < 9:
        return None
    ticks = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal
    return CpuTimes(total=sum(ticks), steal=ticks[7])


def steal_percent(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """Steal as a percentage of all CPU time between two readings; ``None`` when unknown."""
    if before is None or after is None or after.total <= before.total:
        return None
    return 100.0 * (after.steal - before.steal) / (after.total - before.total)


def steal_label(before: CpuTimes | None, after: CpuTimes | None) -> str:
    """``steal 12%`` (or ``steal n/a``), for a bench line."""
    value = steal_percent(before, after)
    return "steal n/a" if value is None else f"steal {value:.0f}%"
