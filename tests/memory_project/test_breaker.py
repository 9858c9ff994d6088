"""The circuit breaker itself (``memory_project.breaker``), on an injected clock: five
failures within the last 60 s open it whatever succeeded in between, older failures do not
count, after 30 s exactly one trial goes through, and calls through it are not serialized."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest

from memory_project.breaker import CircuitBreaker, CircuitOpenError, whole_seconds


class Clock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """Counts calls; fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.failing = False

    def __call__(self) -> str:
        self.calls += 1
        if self.failing:
            raise ConnectionError("backend down")
        return "ok"


class SlowDown(Exception):
    pass


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker("test", fail_max=5, window_seconds=60, reset_seconds=30,
                          exclude=(SlowDown,), clock=clock)


def fail(cb: CircuitBreaker, backend: Backend) -> None:
    backend.failing = True
    with pytest.raises(ConnectionError):
        cb.call(backend)
    backend.failing = False


def open_circuit(cb: CircuitBreaker, backend: Backend) -> None:
    for _ in range(5):
        fail(cb, backend)
    assert cb.current_state == "open"


def test_it_opens_on_the_fifth_failure_within_the_window_despite_successes(
        clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    for _ in range(4):
        fail(cb, backend)
        clock.now += 10
        assert cb.call(backend) == "ok"
        assert cb.current_state == "closed"
    fail(cb, backend)  # 40 s after the first failure
    assert cb.current_state == "open"
    calls = backend.calls
    with pytest.raises(CircuitOpenError) as raised:
        cb.call(backend)
    assert backend.calls == calls, "an open circuit must not call the backend"
    assert raised.value.retry_after == pytest.approx(30)


def test_failures_older_than_the_window_do_not_count(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    for _ in range(4):
        fail(cb, backend)
    clock.now += 60.5
    for _ in range(4):
        fail(cb, backend)
    assert cb.current_state == "closed", "the first four are older than 60 s"
    clock.now += 59
    fail(cb, backend)  # five within the last 60 s
    assert cb.current_state == "open"


def test_a_failure_exactly_at_the_window_edge_still_counts(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    for _ in range(4):
        fail(cb, backend)
    clock.now += 60
    fail(cb, backend)
    assert cb.current_state == "open"


def test_excluded_exceptions_are_not_failures(clock: Clock) -> None:
    cb = make(clock)

    def slow_down() -> None:
        raise SlowDown()

    for _ in range(10):
        with pytest.raises(SlowDown):
            cb.call(slow_down)
    assert cb.current_state == "closed"


def test_it_half_opens_after_thirty_seconds(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    open_circuit(cb, backend)
    clock.now += 29.5
    assert cb.current_state == "open"
    assert cb.retry_after() == pytest.approx(0.5)
    with pytest.raises(CircuitOpenError):
        cb.call(backend)
    clock.now += 0.5
    assert cb.current_state == "half-open"
    assert cb.retry_after() == 0


def test_half_open_lets_exactly_one_trial_through(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    open_circuit(cb, backend)
    clock.now += 30
    entered, release = threading.Event(), threading.Event()
    results: list[Any] = []

    def trial() -> str:
        entered.set()
        assert release.wait(10)
        return backend()

    thread = threading.Thread(target=lambda: results.append(cb.call(trial)))
    thread.start()
    try:
        assert entered.wait(10)
        calls = backend.calls
        for _ in range(3):  # while the trial runs, everyone else fails fast
            with pytest.raises(CircuitOpenError) as raised:
                cb.call(backend)
            assert raised.value.retry_after > 0
        assert backend.calls == calls
    finally:
        release.set()
        thread.join(10)
    assert results == ["ok"]
    assert cb.current_state == "closed"
    assert cb.call(backend) == "ok"


def test_a_failed_trial_opens_it_for_another_thirty_seconds(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    open_circuit(cb, backend)
    clock.now += 31
    fail(cb, backend)
    assert cb.current_state == "open"
    assert cb.retry_after() == pytest.approx(30)
    clock.now += 30
    assert cb.call(backend) == "ok"
    assert cb.current_state == "closed"


def test_after_closing_it_needs_five_new_failures(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    open_circuit(cb, backend)
    clock.now += 30
    cb.call(backend)
    for _ in range(4):
        fail(cb, backend)
    assert cb.current_state == "closed"
    fail(cb, backend)
    assert cb.current_state == "open"


def test_an_interrupted_trial_frees_the_trial_slot(clock: Clock) -> None:
    cb, backend = make(clock), Backend()
    open_circuit(cb, backend)
    clock.now += 30

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cb.call(interrupted)
    assert cb.current_state == "half-open"
    assert cb.call(backend) == "ok"
    assert cb.current_state == "closed"


def run_in_threads(count: int, target: Callable[[], Any]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return errors


def test_concurrent_calls_are_not_serialized(clock: Clock) -> None:
    """Two threads in a slow call meet inside it: if the breaker ran calls one at a time,
    the first would wait at the barrier for a second that cannot enter, and time out."""
    cb = make(clock)
    inside = threading.Barrier(2, timeout=5)
    errors = run_in_threads(2, lambda: cb.call(inside.wait))
    assert errors == []
    assert cb.current_state == "closed"


def test_concurrent_failures_are_all_counted(clock: Clock) -> None:
    cb = CircuitBreaker("test", fail_max=40, window_seconds=60, reset_seconds=30, clock=clock)

    def boom() -> None:
        raise ConnectionError

    errors = run_in_threads(8, lambda: [_swallow(cb, boom) for _ in range(5)])
    assert errors == []
    assert cb.current_state == "open", "8 × 5 failures must reach fail_max = 40"


def _swallow(cb: CircuitBreaker, func: Callable[[], Any]) -> None:
    with contextlib.suppress(ConnectionError):
        cb.call(func)


@pytest.mark.parametrize(("seconds", "whole"), [(0, 1), (0.2, 1), (1.0, 1), (1.01, 2),
                                                (29.4, 30), (30, 30)])
def test_retry_after_is_rounded_up_to_whole_seconds(seconds: float, whole: int) -> None:
    assert whole_seconds(seconds) == whole


def test_it_refuses_nonsense_settings(clock: Clock) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker("x", fail_max=0, window_seconds=60, reset_seconds=30, clock=clock)
