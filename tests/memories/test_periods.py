"""Durations in the seed's form ("7d", "12h"): session retention periods."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memories.services.lifecycle import parse_period
from memory_project.errors import InvalidInput


@pytest.mark.parametrize(("value", "expected"), [
    ("7d", timedelta(days=7)), ("12h", timedelta(hours=12)), ("30m", timedelta(minutes=30)),
    ("2w", timedelta(weeks=2)), ("45s", timedelta(seconds=45)),
])
def test_parse_period_accepts_the_seed_form(value, expected) -> None:
    assert parse_period(value) == expected


@pytest.mark.parametrize("value", ["7 days", "", "7", "d", "-1d", "1.5h", "7y", None])
def test_parse_period_refuses_other_forms(value) -> None:
    with pytest.raises(InvalidInput):
        parse_period(value)
