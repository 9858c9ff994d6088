"""The exact reference and recall@k of the vector backends' bench (``bench.vectors``)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.vectors import Figures, Neighbours, exact_neighbours, recall_at_k, table, unit_rows

#: Five vectors in the plane, ``v<deg>`` at that many degrees from the x axis, of different
#: lengths (cosine ignores length): from the x axis, v0 is nearest, then v10, v30, v60, v90.
IDS = ["v60", "v0", "v90", "v30", "v10"]
DEGREES = [60, 0, 90, 30, 10]
LENGTHS = [1.0, 3.0, 0.5, 2.0, 1.5]
VECTORS = np.array([[r * np.cos(np.radians(d)), r * np.sin(np.radians(d))]
                    for d, r in zip(DEGREES, LENGTHS, strict=True)])


def test_rows_are_scaled_to_length_one_and_zero_rows_stay_zero() -> None:
    units = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]]))
    assert units.tolist() == [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]]


def test_exact_neighbours_rank_by_cosine_whatever_the_lengths() -> None:
    queries = np.array([[5.0, 0.0], [0.0, 0.1]])
    along_x, along_y = exact_neighbours(IDS, VECTORS, queries, k=3)
    assert along_x == Neighbours(top=("v0", "v10", "v30"),
                                 accepted=frozenset({"v0", "v10", "v30"}))
    assert along_y.top == ("v90", "v60", "v30")


def test_queries_in_several_chunks_give_what_one_chunk_gives() -> None:
    queries = np.random.default_rng(7).normal(size=(9, 2))
    assert exact_neighbours(IDS, VECTORS, queries, k=2, chunk=4) == exact_neighbours(
        IDS, VECTORS, queries, k=2, chunk=100)


def test_a_vector_tied_with_the_kth_is_accepted_too() -> None:
    ids = ["a", "b", "b-reversed", "c"]
    vectors = np.array([[1.0, 0.0], [1.0, 1.0], [2.0, 2.0], [0.0, 1.0]])
    (neighbours,) = exact_neighbours(ids, vectors, np.array([[1.0, 0.2]]), k=2)
    assert neighbours.top == ("a", "b")  # equal similarities: in the order of the ids
    assert neighbours.accepted == {"a", "b", "b-reversed"}
    assert recall_at_k(["a", "b-reversed"], neighbours, k=2) == 1.0
    assert recall_at_k(["a", "c"], neighbours, k=2) == 0.5


def test_recall_is_one_for_the_exact_answer_and_less_for_a_wrong_ranking() -> None:
    (exact,) = exact_neighbours(IDS, VECTORS, np.array([[1.0, 0.0]]), k=3)
    assert recall_at_k(["v0", "v10", "v30"], exact, k=3) == 1.0
    assert recall_at_k(["v30", "v0", "v10"], exact, k=3) == 1.0  # order within the top k
    assert recall_at_k(["v0", "v60", "v10"], exact, k=3) == pytest.approx(2 / 3)
    assert recall_at_k(["v90", "v60"], exact, k=3) == 0.0
    # only the first k of a longer answer count
    assert recall_at_k(["v90", "v60", "v0", "v10", "v30"], exact, k=3) == pytest.approx(1 / 3)


def test_k_must_fit_the_vectors() -> None:
    with pytest.raises(ValueError):
        exact_neighbours(IDS, VECTORS, np.array([[1.0, 0.0]]), k=6)


def test_the_table_has_a_row_per_backend() -> None:
    lines = table([Figures("pgvector", 12.34, 56.78, 0.9615, "HNSW"),
                   Figures("qdrant", 3.0, 4.0, 1.0, "brute force")])
    assert lines[0].split()[:4] == ["backend", "p50", "ms", "p95"]
    assert lines[1].split() == ["pgvector", "12.3", "56.8", "0.962", "HNSW"]
    assert lines[2].split() == ["qdrant", "3.0", "4.0", "1.000", "brute", "force"]
