"""server.process_load: a model read in a child process comes back whole (the same numbers as
one read here), with its progress, its errors, and one load however many sessions ask."""

import os
import threading
import time

import numpy as np
import pytest

from attention_core.models.loading import ModelNotFoundError
from server.process_load import (
    ChildLoadError,
    LoadedOnce,
    load_in_a_process,
    read_result,
    write_result,
)


def test_arrays_come_back_equal_read_only_and_aligned(tmp_path):
    sent = {
        "embed": np.arange(7 * 3, dtype=np.uint16).reshape(7, 3),  # bfloat16 bits, odd bytes
        "norm": np.linspace(-1, 1, 5, dtype=np.float32),
        "rows": [np.full((2, 2), 7.5), np.zeros(0, dtype=np.int64)],
        "text": "kept in the pickle",
    }
    write_result(tmp_path / "result", sent)
    back = read_result(tmp_path / "result")
    for name in ("embed", "norm"):
        np.testing.assert_array_equal(back[name], sent[name])
        assert back[name].dtype == sent[name].dtype
        assert not back[name].flags.writeable and back[name].flags.aligned
        # Each array on a cache line of one buffer, as far from the first as a multiple of 64.
        assert (back[name].ctypes.data - back["embed"].ctypes.data) % 64 == 0
    np.testing.assert_array_equal(back["rows"][0], sent["rows"][0])
    assert back["rows"][1].shape == (0,) and back["text"] == "kept in the pickle"


def test_smollm_read_in_a_child_gives_the_same_next_token_logits_as_one_read_here():
    from attention_core.models import llama_files
    from attention_core.models.llama import load_llama, run_llama

    llm_path = llama_files.package_gguf_path()
    if llm_path is None:
        pytest.skip(llama_files.how_to_get_the_llm())

    steps = []
    model = load_in_a_process(
        "attention_core.models.llama:load_llama",
        {"path": str(llm_path)},
        progress=lambda *s: steps.append(s),
    )
    here = load_llama(llm_path)
    ids = np.array(here.encode("The capital of France is"))
    np.testing.assert_array_equal(
        run_llama(model, ids).next_token_logits, run_llama(here, ids).next_token_logits
    )
    assert model.encode("The capital of France is") == here.encode("The capital of France is")
    assert not model.weights.embed.flags.writeable
    # Progress: the file's tensors, counted up to all of them, a line every 2 % or so.
    done = [d for d, _ in steps]
    assert done == sorted(done) and steps[-1] == (272, 272) and 20 <= len(steps) <= 60


def test_what_the_child_raises_is_raised_here_with_its_message(tmp_path):
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(ModelNotFoundError) as raised:
        load_in_a_process("attention_core.models.llama:load_llama", {"path": str(missing)})
    assert "nowhere" in str(raised.value)


def die_without_an_answer(progress, **options):
    progress(1, 4)
    print("out of memory, say", file=__import__("sys").stderr, flush=True)
    os._exit(9)


def test_a_child_that_dies_says_how_it_ended():
    seen = []
    with pytest.raises(ChildLoadError, match=r"exit code 9: out of memory, say"):
        load_in_a_process(
            "tests.test_process_load:die_without_an_answer", progress=lambda *s: seen.append(s)
        )
    assert seen == [(1, 4)]


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


def chatty_load(progress):
    print("a library's notice on standard output")
    progress(1, 2)
    print("7 9")  # would read as a step, were it on the steps' stream
    progress(2, 2)
    return np.arange(3)


def test_what_a_library_prints_is_not_taken_for_progress():
    seen = []
    value = load_in_a_process(
        "tests.test_process_load:chatty_load", progress=lambda *s: seen.append(s)
    )
    np.testing.assert_array_equal(value, [0, 1, 2])
    assert seen == [(1, 2), (2, 2)]


def test_a_result_file_cut_short_is_an_error_not_zeros(tmp_path):
    write_result(tmp_path / "result", {"weights": np.ones(1000, dtype=np.float32)})
    whole = (tmp_path / "result").read_bytes()
    (tmp_path / "result").write_bytes(whole[:-100])
    with pytest.raises(EOFError, match="ended before its arrays did"):
        read_result(tmp_path / "result")
