"""server.loaded_once: one load however many sessions ask at once, every one of them given its
value and its progress; a load forgotten while it runs is let go, and a failure reaches the
sessions that wait."""

import threading
import time

import pytest

from server.loaded_once import LoadedOnce


def test_many_sessions_asking_at_once_start_one_load_and_all_get_its_value():
    loads, release = [], threading.Event()

    def load(progress):
        loads.append(1)
        progress(1, 2)
        release.wait(5)
        progress(2, 2)
        return "the model"

    once = LoadedOnce(load)
    seen = []

    def session():
        once.start()
        while not once.wait(0.01):
            pass
        seen.append(once.value())

    threads = [threading.Thread(target=session) for _ in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    assert once.value() is None and once.progress == (1, 2)
    release.set()
    for thread in threads:
        thread.join(timeout=5)
    assert loads == [1] and seen == ["the model"] * 6 and once.progress == (2, 2)


def test_a_load_forgotten_while_it_runs_is_let_go_and_a_failure_reaches_the_waiters():
    release = threading.Event()
    answers = iter(["the first", "the second"])

    def load(progress):
        release.wait(5)
        return next(answers)

    once = LoadedOnce(load)
    once.start()
    once.forget()  # an idle release while the model loads
    release.set()
    time.sleep(0.2)
    assert once.value() is None and not once.wait(0)
    once.start()
    assert once.wait(5) and once.value() == "the second"

    def broken(progress):
        raise RuntimeError("disk gone")

    failing = LoadedOnce(broken)
    failing.start()
    assert failing.wait(5)
    with pytest.raises(RuntimeError, match="disk gone"):
        failing.value()
