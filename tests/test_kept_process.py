"""server.kept_process: a child that keeps the model shares its memory and runs functions of it,
with the numbers a run here gives, its errors raised here, a run here when it has died, and its
end once the model goes."""

import gc
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from server.kept_process import keep_with, run_where_idle, run_where_kept
from server.process_load import load_and_keep


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
    value, kept = load_and_keep("tests.test_kept_process:kept_arrays", {"size": 2**21})
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


def slow_row(value, seconds):
    time.sleep(seconds)
    return Row(value.row, os.getpid())


def test_a_quick_run_goes_to_the_child_when_it_is_idle_and_is_made_here_when_it_is_busy():
    value, kept = load_and_keep("tests.test_kept_process:kept_arrays", {"size": 8})
    keep_with(value, kept)
    assert run_where_idle(scaled_row, value, 2.0).pid == value.pid  # idle: the child's
    long_run = threading.Thread(target=run_where_kept, args=(slow_row, value, 2.0))
    long_run.start()
    while not kept._lock.locked():  # until the long run holds the child
        time.sleep(0.01)
    answer = run_where_idle(scaled_row, value, 3.0, shift=1.0)
    assert answer.pid == os.getpid()  # made here, not after the long run in the child
    np.testing.assert_array_equal(answer.row, np.arange(8, dtype=np.float32) * 3 + 1)
    long_run.join()
    with pytest.raises(ValueError, match="factor 0 would hide the row"):
        run_where_idle(scaled_row, value, 0)  # raised from the child, as here
    assert run_where_idle(scaled_row, value, 1.0).pid == value.pid  # idle again


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


def test_the_kept_child_ends_when_its_value_goes():
    value, kept = load_and_keep("tests.test_kept_process:kept_arrays", {"size": 4})
    keep_with(value, kept)
    del value
    gc.collect()
    assert kept._child.wait(timeout=10) == 0 and not kept.alive()


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
