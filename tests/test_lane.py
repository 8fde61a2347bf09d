"""server.lane: one model run at a time, re-entrant for the thread in its turn, given back on
an error; and the byte caches' computations take their turns in it."""

import threading
import time

import numpy as np
import pytest

from server.lane import MODEL_RUNS, Lane
from ui.widgets.byte_cache import bounded_by_bytes


def test_a_second_thread_waits_until_the_first_has_finished():
    lane, events = Lane(), []
    started = threading.Event()

    def first():
        with lane.turn():
            started.set()
            time.sleep(0.2)
            events.append("first done")

    def second():
        started.wait()
        with lane.turn():
            events.append("second runs")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(0.05)
    assert lane.busy() and lane.waiting == 1
    for thread in threads:
        thread.join()
    assert events == ["first done", "second runs"]
    assert not lane.busy() and lane.waiting == 0


def test_the_thread_in_its_turn_takes_it_again_without_waiting_for_itself():
    lane = Lane()
    with lane.turn():
        with lane.turn():
            assert lane.held_here()
        assert lane.held_here() and lane.busy()
    assert not lane.held_here() and not lane.busy()


def test_an_error_gives_the_turn_back():
    lane = Lane()
    with pytest.raises(ValueError), lane.turn():
        raise ValueError("a run that failed")
    done = []
    thread = threading.Thread(target=lambda: lane.turn().__enter__() or done.append(1))
    thread.start()
    thread.join(timeout=2)
    assert done == [1]


def test_byte_caches_compute_one_result_at_a_time_across_caches_and_keys():
    running, most = [0], [0]
    count = threading.Lock()

    def run(value: int) -> np.ndarray:
        with count:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with count:
            running[0] -= 1
        return np.full(4, value)

    prompts = bounded_by_bytes(2**20, name="test.lane.prompts")(lambda key: run(key))
    probes = bounded_by_bytes(2**20, name="test.lane.probes")(lambda key: run(-key))
    results = {}

    def viewer(i: int) -> None:
        results[i] = (prompts if i % 2 else probes)(i)

    threads = [threading.Thread(target=viewer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
    assert all(int(results[i][0]) == (i if i % 2 else -i) for i in range(8))
    assert not MODEL_RUNS.busy() and MODEL_RUNS.waiting == 0


def test_a_result_computed_from_another_cache_does_not_wait_for_its_own_turn():
    # A decoder's continuation computes its prompt's pass inside its own turn.
    inner = bounded_by_bytes(2**20, name="test.lane.inner")(lambda n: np.arange(n))
    outer = bounded_by_bytes(2**20, name="test.lane.outer")(lambda n: inner(n) * 2)
    result = []
    thread = threading.Thread(target=lambda: result.append(outer(5)))
    thread.start()
    thread.join(timeout=5)
    assert not thread.is_alive()
    np.testing.assert_array_equal(result[0], [0, 2, 4, 6, 8])
