"""The dates a search names and a memory's two clocks (``memories.retrieval.when``), the
and the ``time_match`` feature they give the reranker (``occurredAt`` through the API:
``test_occurred_at.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from bench.reranker_training import Examples, fit
from memories.models import Memory
from memories.retrieval.rerank import FEATURES, QUERY_CONDITIONAL
from memories.retrieval.when import TimeWindow, falls_in, memory_time, query_windows
from tests.retrieval_helpers import ids, searched


@pytest.mark.parametrize(("query", "windows"), [
    ("What painting did Melanie show on October 13, 2023?", [TimeWindow(2023, 10, 13)]),
    ("What did Gina find on 1 February, 2023?", [TimeWindow(2023, 2, 1)]),
    ("the 3rd of March 2024 meeting", [TimeWindow(2024, 3, 3)]),
    ("notes from Oct. 13th, 2023", [TimeWindow(2023, 10, 13)]),
    ("deploy of 2023-10-13", [TimeWindow(2023, 10, 13)]),
    ("What did the kids paint in July 2023?", [TimeWindow(2023, 7, None)]),
    ("When did Melanie go camping in June?", [TimeWindow(None, 6, None)]),
    ("What happened on June 27?", [TimeWindow(None, 6, 27)]),
    ("How often did she swim in 2023?", [TimeWindow(2023, None, None)]),
    ("Between May 2022 and August 2023", [TimeWindow(2022, 5), TimeWindow(2023, 8)]),
    ("May 14 was her birthday?", [TimeWindow(None, 5, 14)]),
    ("What did she plant in May?", [TimeWindow(None, 5, None)]),
])
def test_the_dates_a_query_names_are_read(query: str, windows: list[TimeWindow]) -> None:
    assert list(query_windows(query)) == windows


@pytest.mark.parametrize("query", [
    "What may Caroline paint next?",     # the verb, not the month
    "May I ask what Caroline painted?",  # nor at the start of the question
    "Where did Jun go on holiday?",      # an abbreviation alone may be a name
    "What did she buy on March 32, 2023?",  # no such day: nothing rather than a wrong date
    "What did she read last week?",      # relative: nothing to resolve it against
    "Which of the 12 songs did he like?",
])
def test_what_is_no_date_gives_no_window(query: str) -> None:
    assert query_windows(query) == ()


def test_a_window_matches_on_the_utc_calendar_date() -> None:
    day = TimeWindow(2023, 10, 13)
    assert day.contains(datetime(2023, 10, 13, 23, 59, tzinfo=UTC))
    assert not day.contains(datetime(2023, 10, 14, 0, 0, tzinfo=UTC))
    # 01:00 on the 14th at UTC+2 is 23:00 on the 13th in UTC
    assert day.contains(datetime(2023, 10, 14, 1, 0, tzinfo=timezone(timedelta(hours=2))))
    assert TimeWindow(None, 6).contains(datetime(2021, 6, 2, tzinfo=UTC))
    assert falls_in((TimeWindow(2020), day), datetime(2023, 10, 13, tzinfo=UTC))
    assert not falls_in((), datetime(2023, 10, 13, tzinfo=UTC))
    assert not falls_in((day,), None)


def test_a_memory_time_is_occurred_at_else_created_at() -> None:
    said, stored = datetime(2023, 5, 8, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    assert memory_time(Memory(occurred_at=said, created_at=stored)) == said
    assert memory_time(Memory(created_at=stored)) == stored


@pytest.mark.django_db
@pytest.mark.real_embedder
def test_a_dated_query_ranks_the_memory_of_that_day_first(tenant_a) -> None:
    """Two records of the same words: the query that names a day puts the one said that day
    first, whichever was stored first; a query without a date leaves them as the other
    features order them (``time_match`` is 0 for both)."""
    early = tenant_a.add("Melanie: I painted a sunset over the lake.",
                         occurred_at=datetime(2023, 8, 14, 15, 0, tzinfo=UTC))
    later = tenant_a.add("Melanie: I painted a sunset over the lake.", scope="again",
                         occurred_at=datetime(2023, 10, 13, 10, 31, tzinfo=UTC))
    for day, first in (("August 14, 2023", early), ("October 13, 2023", later)):
        found = ids(searched(tenant_a, f"What did Melanie paint on {day}?", mode="hybrid",
                             threshold=0.0)["results"])
        assert found[:2] == [str(first.pk), str((later if first is early else early).pk)]
    undated = ids(searched(tenant_a, "What did Melanie paint?", mode="hybrid",
                           threshold=0.0)["results"])
    assert set(undated[:2]) == {str(early.pk), str(later.pk)}


def test_a_query_conditional_feature_is_fitted_after_the_others() -> None:
    """The features every query has get the weights they would get alone; the
    query-conditional one is fitted on top, so it moves nothing where it is 0."""
    rng = np.random.default_rng(11)
    late = [FEATURES.index(name) for name in QUERY_CONDITIONAL]
    x = rng.normal(size=(600, len(FEATURES)))
    x[:, late] = 0.0
    dated = rng.random(600) < 0.1
    y = (x[:, 0] + 0.2 * rng.normal(size=600) > 1.0).astype(float)
    without = fit(Examples(x.copy(), y, 60))
    x[dated, late[0]] = y[dated]  # the feature lights up exactly the evidence it applies to
    together = fit(Examples(x, y, 60))
    others = [i for i in range(len(FEATURES)) if i not in late]
    assert np.allclose(np.array(together.weights)[others], np.array(without.weights)[others])
    assert together.weights[late[0]] > 1.0
    # on a candidate whose feature is 0, the logit moves by the same amount for all
    shift = (np.array(together.weights) @ x[~dated].T + together.intercept) - (
        np.array(without.weights) @ x[~dated].T + without.intercept)
    assert np.ptp(shift) < 1e-6
