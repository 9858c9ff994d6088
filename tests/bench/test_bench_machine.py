"""The bench's CPU steal reading (``bench.machine``)."""

from __future__ import annotations

from pathlib import Path

from bench.machine import CpuTimes, cpu_times, steal_label, steal_percent


def stat_file(tmp_path: Path, cpu_line: str) -> Path:
    path = tmp_path / "stat"
    path.write_text(f"{cpu_line}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n")
    return path


def test_it_reads_the_aggregate_cpu_line(tmp_path: Path) -> None:
    path = stat_file(tmp_path, "cpu  100 5 50 800 10 1 4 30 0 0")
    assert cpu_times(path) == CpuTimes(total=1000, steal=30)


def test_steal_is_a_share_of_the_time_between_two_readings(tmp_path: Path) -> None:
    before = CpuTimes(total=1000, steal=30)
    after = CpuTimes(total=1400, steal=130)
    assert steal_percent(before, after) == 25.0
    assert steal_label(before, after) == "steal 25%"


def test_it_says_so_when_it_cannot_tell(tmp_path: Path) -> None:
    assert cpu_times(tmp_path / "missing") is None
    assert cpu_times(stat_file(tmp_path, "intr 1 2 3")) is None
    assert steal_percent(None, CpuTimes(1, 0)) is None
    assert steal_percent(CpuTimes(5, 0), CpuTimes(5, 0)) is None
    assert steal_label(None, None) == "steal n/a"


def test_this_machine_has_a_reading_when_it_is_linux() -> None:
    if Path("/proc/stat").exists():
        times = cpu_times()
        assert times is not None and times.total > 0 and 0 <= times.steal <= times.total
