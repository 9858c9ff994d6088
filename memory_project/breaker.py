"""A circuit breaker that counts failures in a sliding time window.

Seed 001 "Backend Circuit Breaker": the circuit opens after ``fail_max`` failures within the
last ``window_seconds``, whatever succeeded in between; while open, calls fail at once; after
``reset_seconds`` it half-opens and lets exactly one trial call through (other callers keep
failing fast until the trial ends): a success closes it, a failure opens it again.

Why not pybreaker: its closed state counts *consecutive* failures (any success resets the
count, so five failures interleaved with successes never open it), and its
``CircuitBreaker.call`` holds the breaker's lock for the whole wrapped call, so all calls
through one breaker would run one at a time in a process. Here the lock guards only the
state transitions, before and after the call.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half-open"


class CircuitOpenError(Exception):
    """The circuit is open (or its one trial call is running): the backend was not called.

    Attributes:
        name: the breaker's name.
        retry_after: seconds until a call may be let through again (float, ≥ 0).
    """

    def __init__(self, name: str, retry_after: float) -> None:
        super().__init__(f"circuit {name} is open; retry in {retry_after:.1f} s")
        self.name = name
        self.retry_after = retry_after


class CircuitBreaker:
    """One backend's breaker; thread-safe, calls through it run concurrently.

    Args:
        name: the backend's name (logs and errors).
        fail_max: failures within ``window_seconds`` that open the circuit.
        window_seconds: length of the sliding failure window, in seconds.
        reset_seconds: how long the circuit stays open before the trial call, in seconds.
        exclude: exception types that do not count as failures: the backend answered (e.g.
            "slow down"), so for the breaker such a call is a success.
        clock: monotonic seconds; ``time.monotonic`` unless a test injects another.
        failure_rate: also open when, within the window and with at least ``min_calls``
            calls, this share of the calls failed (seed 001 MR-H2 "Failure Rate Monitoring":
            5 % in 5 minutes); ``None``: counts only.
        min_calls: the fewest calls in the window for ``failure_rate`` to apply.
    """

    def __init__(self, name: str, *, fail_max: int, window_seconds: float,
                 reset_seconds: float, exclude: tuple[type[BaseException], ...] = (),
                 clock: Callable[[], float] = time.monotonic,
                 failure_rate: float | None = None, min_calls: int = 20) -> None:
        if fail_max < 1 or window_seconds <= 0 or reset_seconds < 0:
            raise ValueError("fail_max ≥ 1, window_seconds > 0 and reset_seconds ≥ 0 needed")
        self.name = name
        self.fail_max = fail_max
        self.window_seconds = window_seconds
        self.reset_seconds = reset_seconds
        self.exclude = exclude
        self._clock = clock
        self._lock = threading.Lock()
        self.failure_rate = failure_rate
        self.min_calls = min_calls
        self._failures: deque[float] = deque()  # times of the failures still in the window
        self._calls: deque[float] = deque()  # times of all calls in the window (rate mode)
        self._opened_at: float | None = None  # set while open or half-open
        self._trial_running = False

    @property
    def current_state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"`` (open, and the reset time has passed)."""
        with self._lock:
            return self._state(self._clock())

    def retry_after(self) -> float:
        """Seconds until a call may go through (0 when closed or half-open and idle)."""
        with self._lock:
            return self._retry_after(self._clock())

    def call(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``func(*args, **kwargs)`` unless the circuit is open; record the outcome.

        Every ``Exception`` ``func`` raises (other than ``exclude``) counts as a failure and
        is re-raised unchanged.

        Raises:
            CircuitOpenError: the circuit is open, or half-open with its trial running.
        """
        with self._recorded():
            return func(*args, **kwargs)

    async def acall(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """:meth:`call` for a coroutine function: awaits ``func(*args, **kwargs)``.

        Raises:
            CircuitOpenError: the circuit is open, or half-open with its trial running.
        """
        with self._recorded():
            return await func(*args, **kwargs)

    @contextmanager
    def _recorded(self) -> Iterator[None]:
        """Admit one call (or raise ``CircuitOpenError``) and record how its block ended."""
        trial = self._before_call()
        try:
            yield
        except self.exclude:
            self._after_call(trial, failed=False)
            raise
        except Exception:
            self._after_call(trial, failed=True)
            raise
        except BaseException:  # interrupted: neither a success nor a failure of the backend
            self._release_trial(trial)
            raise
        self._after_call(trial, failed=False)

    # --- state, always under self._lock -------------------------------------------------

    def _state(self, now: float) -> str:
        if self._opened_at is None:
            return CLOSED
        return HALF_OPEN if now - self._opened_at >= self.reset_seconds else OPEN

    def _retry_after(self, now: float) -> float:
        state = self._state(now)
        if state == OPEN:
            assert self._opened_at is not None
            return self._opened_at + self.reset_seconds - now
        if state == HALF_OPEN and self._trial_running:
            return 1.0  # the trial's outcome decides; ask again soon
        return 0.0

    def _before_call(self) -> bool:
        """Let the call through or raise; ``True`` when the call is the half-open trial."""
        with self._lock:
            now = self._clock()
            state = self._state(now)
            if state == CLOSED:
                return False
            if state == HALF_OPEN and not self._trial_running:
                self._trial_running = True
                logger.warning("circuit %s: half-open, one trial call", self.name)
                return True
            raise CircuitOpenError(self.name, self._retry_after(now))

    def _after_call(self, trial: bool, *, failed: bool) -> None:
        with self._lock:
            now = self._clock()
            if trial:
                self._trial_running = False
                if failed:
                    self._open(now)
                else:
                    self._opened_at = None
                    self._failures.clear()
                    self._calls.clear()
                    logger.warning("circuit %s: closed (trial succeeded)", self.name)
                return
            if self._opened_at is not None:
                return  # an open circuit counts nothing
            if self.failure_rate is not None:
                self._calls.append(now)
                while self._calls and now - self._calls[0] > self.window_seconds:
                    self._calls.popleft()
            if not failed:
                return  # a success never resets the window
            self._failures.append(now)
            while self._failures and now - self._failures[0] > self.window_seconds:
                self._failures.popleft()
            rate_exceeded = (self.failure_rate is not None and len(self._calls) >= self.min_calls
                             and len(self._failures) / len(self._calls) >= self.failure_rate)
            if len(self._failures) >= self.fail_max or rate_exceeded:
                self._open(now)

    def _release_trial(self, trial: bool) -> None:
        if trial:
            with self._lock:
                self._trial_running = False

    def _open(self, now: float) -> None:
        self._opened_at = now
        self._failures.clear()
        self._calls.clear()
        logger.warning("circuit %s: open for %s s", self.name, self.reset_seconds)


def whole_seconds(seconds: float) -> int:
    """``seconds`` rounded up to a whole second, at least 1 (for ``Retry-After``)."""
    return max(1, math.ceil(seconds - 1e-9))
