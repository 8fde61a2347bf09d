"""server.lane: one model run at a time in a lane, none waited for by a thread already in a
turn, given back on an error; and the byte caches' computations take their turns in them."""

import threading
import time

import numpy as np
import pytest

from server.blas import blas_threads
from server.lane import LONG_RUNS, QUICK_RUNS, Lane, in_a_turn, wait_until_quiet
from ui.widgets.byte_cache import bounded_by_bytes


def test_a_second_thread_waits_until_the_first_has_finished():
    lane, events = Lane("test"), []
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


def test_a_thread_in_a_turn_waits_for_no_lane_and_so_never_for_itself():
    quick, long = Lane("quick"), Lane("long")
    with long.turn():
        with long.turn(), quick.turn():
            assert in_a_turn() and not quick.busy()
        assert in_a_turn() and long.busy()
    assert not in_a_turn() and not long.busy()


def test_the_two_lanes_run_side_by_side():
    quick, long = Lane("quick"), Lane("long")
    in_long, quick_done = threading.Event(), threading.Event()

    def experiment():
        with long.turn():
            in_long.set()
            quick_done.wait(5)

    thread = threading.Thread(target=experiment)
    thread.start()
    in_long.wait(5)
    with quick.turn():  # a prompt's pass does not wait for the experiment
        quick_done.set()
    thread.join(5)
    assert quick_done.is_set() and not thread.is_alive()


def test_an_error_gives_the_turn_back():
    lane = Lane("test")
    with pytest.raises(ValueError), lane.turn():
        raise ValueError("a run that failed")
    done = []
    thread = threading.Thread(target=lambda: lane.turn().__enter__() or done.append(1))
    thread.start()
    thread.join(timeout=2)
    assert done == [1]


def test_byte_caches_of_one_lane_compute_one_result_at_a_time_across_caches_and_keys():
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
    assert not QUICK_RUNS.busy() and QUICK_RUNS.waiting == 0


def test_a_result_computed_from_another_cache_does_not_wait_for_its_own_turn():
    # A decoder's continuation computes its prompt's pass inside its own turn, and the branches
    # (a long run) grow from decode steps of the quick lane.
    inner = bounded_by_bytes(2**20, name="test.lane.inner")(lambda n: np.arange(n))
    outer = bounded_by_bytes(2**20, name="test.lane.outer", lane=LONG_RUNS)(lambda n: inner(n) * 2)
    result = []
    thread = threading.Thread(target=lambda: result.append(outer(5)))
    thread.start()
    thread.join(timeout=5)
    assert not thread.is_alive()
    np.testing.assert_array_equal(result[0], [0, 2, 4, 6, 8])


def test_turns_go_in_the_order_they_were_asked_for():
    lane, order = Lane("test"), []

    def run(name: str) -> None:
        with lane.turn():
            order.append(name)
            time.sleep(0.02)

    with lane.turn():
        threads = []
        for name in "abcdef":
            threads.append(threading.Thread(target=run, args=(name,)))
            threads[-1].start()
            while lane.waiting < len(threads):  # each in line before the next asks
                time.sleep(0.001)
    for thread in threads:
        thread.join(5)
    assert order == list("abcdef") and lane.waiting == 0 and not lane.busy()


def test_a_session_asking_for_a_key_being_computed_waits_for_that_run_not_for_the_lane():
    # Fifty viewers of one link: the first computes its pass, the others only wait for it,
    # not behind the other viewers' runs queued in the lane meanwhile.
    finished = []

    def slow(key: str) -> np.ndarray:
        time.sleep(0.3)
        finished.append(key)
        return np.zeros(4)

    passes = bounded_by_bytes(2**20, name="test.lane.joined", lane=LONG_RUNS)(slow)

    def viewer(key: str) -> None:
        passes(key)
        finished.append(f"{key} shown")

    first = threading.Thread(target=viewer, args=("link",))
    first.start()
    while not LONG_RUNS.busy():
        time.sleep(0.001)
    other = threading.Thread(target=viewer, args=("another window",))
    other.start()
    while LONG_RUNS.waiting < 1:  # in line behind the first run
        time.sleep(0.001)
    same = threading.Thread(target=viewer, args=("link",))
    same.start()
    for thread in (first, other, same):
        thread.join(5)
    # Both viewers of the link see it before the run queued ahead of the second has finished.
    assert finished == [
        "link",
        "link shown",
        "link shown",
        "another window",
        "another window shown",
    ]


def test_a_thread_in_line_says_where_it_stands_and_leaves_the_line_when_that_raises():
    lane, told, order, errors = Lane("test"), [], [], []

    class MovedOn(Exception):
        """What Streamlit raises at a drawing call once the viewer has moved a widget."""

    def tell(ahead: int) -> None:
        told.append(ahead)
        if len(told) == 2:
            raise MovedOn

    def impatient() -> None:
        try:
            with lane.turn(waiting=tell):
                order.append("impatient")
        except MovedOn as error:
            errors.append(error)

    def patient() -> None:
        with lane.turn():
            order.append("patient")

    with lane.turn():
        first = threading.Thread(target=impatient)
        first.start()
        while lane.waiting < 1:
            time.sleep(0.001)
        second = threading.Thread(target=patient)
        second.start()
        first.join(5)  # told twice, WAIT_CHECK_S apart, while the run ahead still runs
        assert len(errors) == 1 and told == [1, 1] and lane.waiting == 1
    second.join(5)
    assert order == ["patient"] and lane.waiting == 0 and not lane.busy()


def test_two_lanes_running_share_the_cores_and_a_lane_alone_has_them_all():
    cores = blas_threads()
    assert cores is not None, "NumPy's wheel brings OpenBLAS, whose count is read here"
    inside, leave = threading.Event(), threading.Event()

    def long_run() -> None:
        with LONG_RUNS.turn():
            inside.set()
            leave.wait(5)

    with QUICK_RUNS.turn():
        assert blas_threads() == cores
        other = threading.Thread(target=long_run)
        other.start()
        assert inside.wait(5)
        assert blas_threads() == max(1, cores // 2)
        leave.set()
        other.join(5)
        assert blas_threads() == cores  # the quick run, alone again, has every core back
    assert blas_threads() == cores


def test_work_nobody_asked_for_waits_until_both_lanes_have_been_quiet_for_a_while():
    running = threading.Event()
    lane_free_at = []

    def viewer():
        with LONG_RUNS.turn():
            running.set()
            time.sleep(0.4)
            lane_free_at.append(time.monotonic())  # the turn ends after this

    thread = threading.Thread(target=viewer)
    thread.start()
    running.wait()
    assert wait_until_quiet(0.3, lambda: True, poll=0.02)
    quiet_at = time.monotonic()
    thread.join()
    # Not before the viewer's turn ended and the lanes stayed quiet for 0.3 s after it.
    assert quiet_at - lane_free_at[0] >= 0.3

    # A run in line counts as much as a run going: QUICK busy, and LONG with one waiting.
    with QUICK_RUNS.turn():
        started = time.monotonic()
        assert not wait_until_quiet(0.1, lambda: time.monotonic() - started < 0.3, poll=0.02)
    # What the wait was for went away: it ends at once, not after the quiet time.
    started = time.monotonic()
    assert not wait_until_quiet(30.0, lambda: False)
    assert time.monotonic() - started < 1.0
