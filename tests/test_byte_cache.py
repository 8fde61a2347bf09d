"""ui.widgets.byte_cache: bounded in bytes, least recently used out first, one computation per
key however many sessions ask at once."""

import threading
import time

import numpy as np
import pytest

from attention_core.models.llama import KeptSteps
from ui.widgets.byte_cache import bounded_by_bytes, every_cache, nbytes

KB = 1024


def test_nbytes_counts_each_buffer_once():
    base = np.zeros(1000)  # 8000 bytes
    assert nbytes((base, base[:10], {"view": base.reshape(10, 100)})) == 8000
    assert nbytes([np.ones(3, np.float32), "text", 7]) == 12
    # The steps a pass kept (run_llama(keep=…)) are counted like any dataclass's arrays.
    kept = KeptSteps({"weights": np.zeros((9, 4, 4), np.float32), "k_rot": base[:64]})
    assert nbytes(kept) == 9 * 4 * 4 * 4 + 8000


def test_the_least_recently_used_results_go_once_the_bytes_pass_the_bound():
    calls = []

    @bounded_by_bytes(3 * 8 * KB, name="test.lru")
    def block(seed: int) -> np.ndarray:
        calls.append(seed)
        return np.full(KB, float(seed))  # 8 KiB each

    for seed in (1, 2, 3):
        block(seed)
    assert block.holding() == (3, 3 * 8 * KB)
    block(1)  # 1 is now the most recently used
    block(4)  # a fourth block passes the bound: 2, the least recently used, goes
    assert block.holding() == (3, 3 * 8 * KB)
    block(1), block(3), block(4)
    assert calls == [1, 2, 3, 4]
    block(2)
    assert calls == [1, 2, 3, 4, 2]
    assert every_cache()["test.lru"] == block.holding()
    block.clear()
    assert block.holding() == (0, 0)


def test_a_bound_in_entries_keeps_small_results_to_that_many_and_bytes_still_bind():
    calls = []

    @bounded_by_bytes(10 * 8 * KB, name="test.entries", max_entries=2)
    def block(seed: int, size: int = KB) -> np.ndarray:
        calls.append(seed)
        return np.full(size, float(seed))

    for seed in (1, 2, 3):
        block(seed)
    assert block.holding() == (2, 2 * 8 * KB)  # 1 went though the bytes had room for ten
    block(2)
    assert calls == [1, 2, 3]
    block(1)
    assert calls == [1, 2, 3, 1]
    block(4, size=10 * KB)  # alone over the bytes: it stays, the rest go
    assert block.holding() == (1, 10 * 8 * KB)


def test_one_result_larger_than_the_bound_is_still_kept_alone():
    @bounded_by_bytes(KB, name="test.large")
    def big(n: int) -> np.ndarray:
        return np.zeros(n)

    big(1000)
    big(2000)
    assert big.holding() == (1, 16000)


def test_arguments_named_with_an_underscore_are_not_part_of_the_key():
    calls = []

    @bounded_by_bytes(KB * KB, name="test.key")
    def computed(text: str, model_id: int, _model: object) -> int:
        calls.append((text, model_id))
        return len(text)

    assert computed("abc", 1, object()) == 3
    assert computed("abc", 1, object()) == 3  # another object, the same key
    assert computed("abc", 2, object()) == 3
    assert calls == [("abc", 1), ("abc", 2)]


def test_many_sessions_asking_at_once_wait_for_one_computation():
    calls = []

    @bounded_by_bytes(KB * KB, name="test.flight")
    def slow(key: int) -> np.ndarray:
        calls.append(key)
        time.sleep(0.2)
        return np.arange(10)

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow(7))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [7]
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert slow.computed() == 1  # what the tests count a model page's passes with
    slow(8)
    assert slow.computed() == 2 and calls == [7, 8]


def test_a_failed_computation_is_not_kept():
    attempts = []

    @bounded_by_bytes(KB, name="test.fail")
    def flaky(x: int) -> int:
        attempts.append(x)
        if len(attempts) == 1:
            raise ValueError("first time")
        return x

    try:
        flaky(1)
    except ValueError:
        pass
    assert flaky(1) == 1 and attempts == [1, 1]
    assert flaky.computed() == 1  # the failure kept nothing and counts for nothing


def test_a_buffer_several_results_share_is_counted_once_against_the_bound():
    # A decoder's KV cache after each step is a view of one growing buffer.
    buffer = np.zeros(4 * KB)  # 32 KiB

    @bounded_by_bytes(40 * KB, name="test.shared")
    def prefix(n: int) -> np.ndarray:
        return buffer[:n]

    for n in (10, 20, 30, 40):
        prefix(n)
    assert prefix.holding() == (4, 32 * KB)
    # One result of its own (16 KiB) passes the bound: the oldest views go until it holds,
    # and the shared buffer's bytes leave only with the last view of it.
    fresh = bounded_by_bytes(40 * KB, name="test.shared")(lambda n: np.ones(2 * KB))
    fresh(1)
    assert prefix.holding() == (1, 16 * KB)


def test_clearing_streamlits_caches_clears_these_too():
    import streamlit as st

    @bounded_by_bytes(KB * KB, name="test.menu")
    def block(seed: int) -> np.ndarray:
        return np.full(KB, float(seed))

    block(1), block(2)
    assert block.holding() == (2, 16 * KB)
    st.cache_resource.clear()  # what the menu's "Clear caches" does
    assert block.holding() == (0, 0)
    block(3)
    st.cache_resource.clear()
    assert block.holding() == (0, 0)


def test_cheap_work_without_a_lane_is_computed_once_while_both_lanes_are_taken():
    from server.lane import LANES, in_a_turn

    calls, turns = [], []

    @bounded_by_bytes(KB * KB, name="test.no_lane", lane=None)
    def cheap(key: int) -> np.ndarray:
        calls.append(key)
        turns.append(in_a_turn())
        time.sleep(0.2)  # long enough for every thread to ask while the first computes
        return np.arange(key)

    # Another viewer's long runs hold both lanes for the whole test: work that needed a turn
    # would wait for them and never finish.
    holding, done = threading.Event(), threading.Event()

    def hold(lane) -> None:
        with lane.turn():
            holding.set()
            done.wait(10)

    holders = [threading.Thread(target=hold, args=(lane,)) for lane in LANES]
    for holder in holders:
        holder.start()
        assert holding.wait(5)
        holding.clear()
    results = []
    threads = [threading.Thread(target=lambda: results.append(cheap(7))) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
        assert all(lane.busy() for lane in LANES)
    finally:
        done.set()
        for holder in holders:
            holder.join()
    assert calls == [7] and turns == [False]
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert results[0].tolist() == list(range(7))
    assert cheap.holding() == (1, 7 * 8)


def test_results_holding_no_array_still_count_against_the_bound():
    from ui.widgets.byte_cache import SMALL_ENTRY_BYTES

    calls = []

    @bounded_by_bytes(3 * SMALL_ENTRY_BYTES, name="test.numbers", lane=None)
    def numbers(x: int) -> tuple[float, str]:
        calls.append(x)
        return float(x) / 2, f"{x}"

    for x in range(5):
        assert numbers(x) == (x / 2, str(x))
    assert numbers.holding() == (3, 3 * SMALL_ENTRY_BYTES)
    numbers(4), numbers(3)
    numbers(0)  # let go of, so computed again
    assert calls == [0, 1, 2, 3, 4, 0]


def test_read_only_freezes_every_array_a_result_holds_and_their_buffers():
    from ui.widgets.byte_cache import read_only

    base = np.zeros(6)
    view = base[:3]
    kept = read_only({"pair": (view, np.ones(2))})
    for array in (base, view, kept["pair"][1]):
        assert not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 1.0
    assert base.tolist() == [0.0] * 6
