"""server.process_load: a model read in a child process comes back whole (the same numbers as
one read here), with its progress, its errors, and one load however many sessions ask; a child
that keeps the model shares its memory and runs functions of it, with the numbers a run here
gives, its errors raised here, and a run here when it has died."""

import io
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from attention_core.models.loading import ModelNotFoundError
from server.process_load import (
    ChildLoadError,
    LoadedOnce,
    keep_with,
    load_and_keep,
    load_in_a_process,
    read_frame,
    read_result,
    run_where_kept,
    write_frame,
    write_result,
)
from server.resident import child_pids


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
    from attention_core.models.llama import files as llama_files
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


def test_frames_back_to_back_on_one_stream_each_come_back_whole_and_aligned():
    stream = io.BytesIO()
    first = {"odd": np.arange(5, dtype=np.uint8), "rows": np.ones((3, 7), np.float32)}
    write_frame(stream, first)
    write_frame(stream, ("no arrays", 3))
    write_frame(stream, np.arange(10_000, dtype=np.float64))
    stream.seek(0)
    back = read_frame(stream)
    np.testing.assert_array_equal(back["odd"], first["odd"])
    np.testing.assert_array_equal(back["rows"], first["rows"])
    assert (back["rows"].ctypes.data - back["odd"].ctypes.data) % 64 == 0
    assert read_frame(stream) == ("no arrays", 3)
    np.testing.assert_array_equal(read_frame(stream), np.arange(10_000, dtype=np.float64))
    with pytest.raises(EOFError):
        read_frame(stream)


@dataclass(frozen=True)
class Row:
    row: np.ndarray
    pid: int


def kept_arrays(progress, size):
    progress(1, 1)
    return Row(np.arange(size, dtype=np.float32), os.getpid())


def scaled_row(value, factor, *, shift=0.0):
    if factor == 0:
        raise ValueError("factor 0 would hide the row")
    return Row(value.row * factor + shift, os.getpid())


def test_a_kept_child_runs_functions_of_its_value_and_shares_its_memory():
    # 8 MB of arrays: the kept child maps the same pages as this process.
    value, kept = load_and_keep("tests.test_process_load:kept_arrays", {"size": 2**21})
    keep_with(value, kept)
    assert kept is not None and kept.alive() and value.pid != os.getpid()
    assert not value.row.flags.writeable and value.row.flags.aligned
    answer = run_where_kept(scaled_row, value, 3.0, shift=1.0)
    assert answer.pid == value.pid  # computed in the child, not here
    np.testing.assert_array_equal(answer.row, np.arange(2**21, dtype=np.float32) * 3 + 1)
    with pytest.raises(ValueError, match="factor 0 would hide the row"):
        run_where_kept(scaled_row, value, 0)
    assert kept.alive()  # an error is an answer, not the end of the child
    assert float(value.row.sum()) == float(np.arange(2**21, dtype=np.float32).sum())
    # One memory: both processes have the same memfd's pages resident (the same inode; this
    # process may map other models' too).
    there = _mapped(value.pid)
    ((inode, resident),) = there.items()
    assert resident >= 8 * 1024 and _mapped(os.getpid())[inode] >= 8 * 1024

    # A child that has died (killed for memory, say): the run is made here, the same numbers.
    kept._child.kill()
    kept._child.wait()
    answer = run_where_kept(scaled_row, value, 2.0)
    assert answer.pid == os.getpid()
    np.testing.assert_array_equal(answer.row, np.arange(2**21, dtype=np.float32) * 2)


def _mapped(pid):
    """Resident kilobytes of the process's mappings of the shared model, by inode."""
    resident, inode = {}, None
    for line in open(f"/proc/{pid}/smaps"):
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
            inode = fields[4] if "memfd:attention-explorer-model" in line else None
        elif inode is not None and fields[0] == "Rss:":
            resident[inode] = resident.get(inode, 0) + int(fields[1])
    return resident


def test_the_kept_child_ends_when_its_value_goes_and_a_failed_load_leaves_none(tmp_path):
    import gc

    value, kept = load_and_keep("tests.test_process_load:kept_arrays", {"size": 4})
    keep_with(value, kept)
    del value
    gc.collect()
    assert kept._child.wait(timeout=10) == 0 and not kept.alive()

    before = set(child_pids(os.getpid()))
    with pytest.raises(ModelNotFoundError, match="nowhere"):
        load_and_keep("attention_core.models.llama:load_llama", {"path": str(tmp_path / "nowhere")})
    with pytest.raises(ChildLoadError, match=r"exit code 9: out of memory, say"):
        load_and_keep("tests.test_process_load:die_without_an_answer")
    assert set(child_pids(os.getpid())) <= before  # each failed child was reaped


def test_smollm_kept_in_its_child_gives_the_numbers_of_a_run_here():
    from attention_core.models.hiding import decoder_hiding_effects
    from attention_core.models.llama import files as llama_files
    from attention_core.models.llama import run_llama

    llm_path = llama_files.package_gguf_path()
    if llm_path is None:
        pytest.skip(llama_files.how_to_get_the_llm())
    model, kept = load_and_keep("attention_core.models.llama:load_llama", {"path": str(llm_path)})
    keep_with(model, kept)
    ids = np.array(model.encode("The cat sat on the mat because the cat"))
    there = run_where_kept(run_llama, model, ids, keep=("weights",))
    here = run_llama(model, ids, keep=("weights",))
    # The child multiplies on one core, this process on two: float32 sums in another order.
    np.testing.assert_allclose(there.next_token_logits, here.next_token_logits, atol=1e-4)
    np.testing.assert_allclose(there.attention_weights, here.attention_weights, atol=1e-5)
    assert int(there.next_token_logits.argmax()) == int(here.next_token_logits.argmax())
    np.testing.assert_allclose(
        run_where_kept(decoder_hiding_effects, model, ids, 8),
        decoder_hiding_effects(model, ids, 8),
        rtol=1e-4,
        atol=1e-6,
    )
