"""server.saved_loads: a load saved on disk comes back as the very model it saved, without reading
the checkpoint; a changed checkpoint or a damaged save is read again; saving off, or a folder
that cannot be written, loads as before."""

import dataclasses
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from server.process_load import load_and_keep
from server.saved_loads import SAVED_LOADS_ENV_VAR, saved_load

LOADER = "attention_core.models.llama:load_llama"
KEPT_ARRAYS = "tests.test_kept_process:kept_arrays"


def _load(source: Path, target: str = LOADER, **options):
    """The value loaded from `source`, the progress lines its child sent, and the child (closed
    by the caller)."""
    steps = []
    value, kept = load_and_keep(target, options, lambda *step: steps.append(step), (source,))
    return value, steps, kept


def _saved_soon(path: Path, size: int | None = None) -> bool:
    # The child saves once the server has its answer: the file follows within a second or so.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.is_file() and (size is None or path.stat().st_size == size):
            return True
        time.sleep(0.1)
    return False


def _arrays(value, found=None) -> list[np.ndarray]:
    """Every array a loaded model holds, in a fixed order."""
    found = [] if found is None else found
    if isinstance(value, np.ndarray):
        found.append(value)
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            _arrays(getattr(value, field.name), found)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _arrays(item, found)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _arrays(value[key], found)
    return found


@pytest.fixture
def checkpoint(tmp_path, monkeypatch):
    """A copy of SmolLM2's GGUF (its modification time is the test's to change), saves going to
    a folder of the test's own."""
    from attention_core.models.llama import files as llama_files

    shipped = llama_files.package_gguf_path()
    if shipped is None:
        pytest.skip(llama_files.how_to_get_the_llm())
    monkeypatch.setenv(SAVED_LOADS_ENV_VAR, str(tmp_path / "loads"))
    return Path(shutil.copyfile(shipped, tmp_path / "smollm2.gguf"))


def test_a_saved_load_is_the_model_it_saved_and_reads_nothing_else(checkpoint):
    from attention_core.models.llama import run_llama

    options = {"path": str(checkpoint)}
    saved = saved_load(LOADER, options, [checkpoint])
    assert saved is not None and not saved.exists()
    read, read_steps, read_child = _load(checkpoint, **options)
    assert read_steps[-1] == (272, 272)  # the checkpoint's tensors, unpacked
    assert _saved_soon(saved)

    restored, restored_steps, restored_child = _load(checkpoint, **options)
    try:
        assert restored_steps == []  # nothing read but the save
        read_arrays, restored_arrays = _arrays(read), _arrays(restored)
        assert len(read_arrays) == len(restored_arrays) > 150  # 6 a layer, and the rest
        for a, b in zip(read_arrays, restored_arrays, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
            assert not b.flags.writeable
        prompt = "The capital of France is"
        ids = np.array(restored.encode(prompt))
        assert list(ids) == read.encode(prompt)
        np.testing.assert_array_equal(
            run_llama(restored, ids).next_token_logits, run_llama(read, ids).next_token_logits
        )
        # The child that copied the save back runs the model too.
        there = restored_child.run(run_llama, ids)
        np.testing.assert_allclose(
            there.next_token_logits, run_llama(read, ids).next_token_logits, atol=1e-4
        )
    finally:
        read_child.close()
        restored_child.close()


def test_a_changed_checkpoint_or_a_damaged_save_is_read_again(checkpoint):
    options = {"path": str(checkpoint)}
    saved = saved_load(LOADER, options, [checkpoint])
    _, steps, child = _load(checkpoint, **options)
    child.close()
    assert steps and _saved_soon(saved)
    size = saved.stat().st_size

    with open(saved, "r+b") as damaged:  # cut short, as a full disk would leave it
        damaged.truncate(size // 2)
    model, steps, child = _load(checkpoint, **options)
    child.close()
    assert steps[-1] == (272, 272) and model.encode("a cat") == model.encode("a cat")
    assert _saved_soon(saved, size)  # saved whole again

    later = checkpoint.stat().st_mtime_ns + 10**9
    os.utime(checkpoint, ns=(later, later))
    changed = saved_load(LOADER, options, [checkpoint])
    assert changed is not None and changed != saved
    _, steps, child = _load(checkpoint, **options)
    child.close()
    assert steps[-1] == (272, 272)
    assert _saved_soon(changed)
    assert sorted(changed.parent.iterdir()) == [changed]  # the older save of it went


def test_the_key_is_the_loader_its_options_and_its_files(tmp_path, monkeypatch):
    monkeypatch.setenv(SAVED_LOADS_ENV_VAR, str(tmp_path / "loads"))
    source = tmp_path / "weights.bin"
    source.write_bytes(b"1234")
    key = saved_load(KEPT_ARRAYS, {"size": 4}, [source])
    assert key == saved_load(KEPT_ARRAYS, {"size": 4}, [source])
    assert key != saved_load(KEPT_ARRAYS, {"size": 5}, [source])
    assert key != saved_load(LOADER, {"size": 4}, [source])
    source.write_bytes(b"12345")
    assert key != saved_load(KEPT_ARRAYS, {"size": 4}, [source])
    assert saved_load(KEPT_ARRAYS, {"size": 4}, []) is None  # nothing to key it on
    assert saved_load(KEPT_ARRAYS, {"size": 4}, [tmp_path / "missing.bin"]) is None
    monkeypatch.setenv(SAVED_LOADS_ENV_VAR, "off")
    assert saved_load(KEPT_ARRAYS, {"size": 4}, [source]) is None


def test_a_folder_that_cannot_be_written_loads_as_before(tmp_path, monkeypatch):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_bytes(b"")
    monkeypatch.setenv(SAVED_LOADS_ENV_VAR, str(blocked / "loads"))
    source = tmp_path / "weights.bin"
    source.write_bytes(b"1234")
    saved = saved_load(KEPT_ARRAYS, {"size": 4}, [source])
    for _ in range(2):
        value, steps, child = _load(source, KEPT_ARRAYS, size=4)
        child.close()
        assert steps == [(1, 1)]  # read each time
        np.testing.assert_array_equal(value.row, np.arange(4, dtype=np.float32))
    assert not saved.exists() and blocked.read_bytes() == b""
