"""server.process_load: a model read in a child process comes back whole (the same numbers as
one read here), with its progress and its errors; what a library prints is not progress; a child
that would have stayed, had its load not failed, is reaped."""

import os

import numpy as np
import pytest

from attention_core.models.loading import ModelNotFoundError
from server.child import ChildLoadError
from server.process_load import load_and_keep, load_in_a_process
from server.resident import child_pids


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


def test_a_failed_load_that_would_keep_its_child_leaves_none(tmp_path):
    before = set(child_pids(os.getpid()))
    with pytest.raises(ModelNotFoundError, match="nowhere"):
        load_and_keep("attention_core.models.llama:load_llama", {"path": str(tmp_path / "nowhere")})
    with pytest.raises(ChildLoadError, match=r"exit code 9: out of memory, say"):
        load_and_keep("tests.test_process_load:die_without_an_answer")
    assert set(child_pids(os.getpid())) <= before  # each failed child was reaped
