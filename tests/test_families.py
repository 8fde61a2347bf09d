"""attention_core/models/families.py: any checkpoint of a family we run, opened by where it is.

Each family's tiny checkpoint (tests/tiny_checkpoints.py) is opened by ``open_checkpoint`` and
compared with transformers on the same files; the refusals (a family we do not run, a model
over the cap) come from config.json before any weight is read; a Hub id is read from
huggingface_hub's cache, laid out here without the network, and never downloaded unless asked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_core.models import BertModel, GPT2Model, LlamaModel, run_bert, run_gpt2, run_llama
from attention_core.models.families import (
    FAMILIES,
    checkpoint_kind,
    family_of,
    open_checkpoint,
)
from attention_core.models.loading import ModelFileError, ModelNotFoundError
from attention_core.validation import AttentionInputError
from tests.hub_cache import lay_out_hub_cache
from tests.tiny_checkpoints import write_tiny

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEXT = {"llama": "the cat sat on the mat", "qwen2": "the cat sat on the mat",
        "gpt2": " the dog sat on the mat", "bert": "the cat sat"}  # fmt: skip
MODEL_CLASS = {"llama": LlamaModel, "qwen2": LlamaModel, "gpt2": GPT2Model, "bert": BertModel}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    return {f: write_tiny(f, tmp_path_factory.mktemp(f)) for f in MODEL_CLASS}


def _garbage_weights(folder: Path, tmp_path: Path, config_change: dict) -> Path:
    """A copy of ``folder`` whose config is changed and whose weights are not a safetensors
    file: a refusal that reads them would fail differently."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, **config_change}))
    (copy / "model.safetensors").write_bytes(b"not a safetensors file")
    return copy


@pytest.mark.parametrize("family", list(MODEL_CLASS))
def test_each_family_opens_with_its_own_code_and_matches_transformers(folders, family):
    model = open_checkpoint(str(folders[family]))
    assert type(model) is MODEL_CLASS[family]
    if family == "bert":
        trace = run_bert(model, TEXT[family])
        hf = transformers.BertModel.from_pretrained(folders[family], attn_implementation="eager")
        with torch.no_grad():
            out = hf(torch.tensor(trace.input_ids)[None]).last_hidden_state[0].numpy()
        np.testing.assert_allclose(trace.hidden_states[-1], out, atol=1e-5, rtol=0)
        return
    ids = np.asarray(model.encode(TEXT[family]))
    run = run_gpt2 if family == "gpt2" else run_llama
    logits = run(model, ids, all_logits=True).logits
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        folders[family], dtype=torch.float32, attn_implementation="eager"
    )
    with torch.no_grad():
        expected = hf(torch.tensor(ids)[None]).logits[0].numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", list(MODEL_CLASS))
def test_the_family_is_named_by_the_configs_model_type(folders, family):
    config = json.loads((folders[family] / "config.json").read_text())
    assert family_of(config).model_types == (family,)


def test_an_architecture_we_do_not_run_is_refused_naming_those_we_do(folders, tmp_path):
    t5 = _garbage_weights(folders["gpt2"], tmp_path, {"model_type": "t5",
                                                      "architectures": ["T5Model"]})  # fmt: skip
    with pytest.raises(ModelFileError) as refused:
        open_checkpoint(str(t5))
    message = str(refused.value)
    assert "'T5Model'" in message
    for family in FAMILIES:
        assert family.name in message


@pytest.mark.parametrize("family", list(MODEL_CLASS))
def test_a_model_over_the_cap_is_refused_before_any_weight_is_read(folders, family, tmp_path):
    loaded = open_checkpoint(str(folders[family]))
    count = sum(int(np.size(w)) for w in _arrays(loaded.weights))
    copy = _garbage_weights(folders[family], tmp_path, {})
    with pytest.raises(ModelFileError, match=f"holds {count:,} parameters"):
        open_checkpoint(str(copy), max_parameters=count - 1)


def _arrays(value) -> list[np.ndarray]:
    """Every distinct array a weights object holds (a tied head once)."""
    seen: dict[int, np.ndarray] = {}

    def walk(v) -> None:
        if isinstance(v, np.ndarray):
            base = v if v.base is None else v.base
            seen.setdefault(id(base), v)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)
        elif hasattr(v, "__dataclass_fields__"):
            for name in v.__dataclass_fields__:
                walk(getattr(v, name))

    walk(value)
    return list(seen.values())


def test_a_sharded_checkpoint_reads_as_the_single_file_does(folders, tmp_path):
    hf = transformers.AutoModelForCausalLM.from_pretrained(folders["qwen2"])
    hf.save_pretrained(tmp_path, max_shard_size="40KB")
    shutil.copy(folders["qwen2"] / "tokenizer.json", tmp_path / "tokenizer.json")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    ids = np.arange(10)
    whole = run_llama(open_checkpoint(str(folders["qwen2"]), weights_dtype=np.float32), ids)
    sharded = run_llama(open_checkpoint(str(tmp_path), weights_dtype=np.float32), ids)
    np.testing.assert_array_equal(sharded.logits, whole.logits)


def test_names_say_what_kind_of_checkpoint_they_are(tmp_path):
    assert checkpoint_kind("HuggingFaceTB/SmolLM2-360M") == "hub"
    assert checkpoint_kind(str(tmp_path)) == "folder"
    assert checkpoint_kind("models/SmolLM2.Q8_0.gguf") == "gguf"
    assert checkpoint_kind("../secrets") == "folder"
    assert checkpoint_kind("a/b/c") == "folder"


def test_a_hub_id_is_read_from_the_cache_without_the_network(folders, tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    lay_out_hub_cache(cache, "teacher/tiny-gpt2", folders["gpt2"],
                      ("config.json", "model.safetensors", "tokenizer.json"))  # fmt: skip
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    model = open_checkpoint("teacher/tiny-gpt2")
    ids = np.asarray(model.encode(TEXT["gpt2"]))
    expected = run_gpt2(open_checkpoint(str(folders["gpt2"])), ids).logits
    np.testing.assert_array_equal(run_gpt2(model, ids).logits, expected)


def test_a_hub_id_not_in_the_cache_is_one_sentence_and_no_download(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))

    def no_network(*_args, **_kwargs):
        raise AssertionError("the network was asked")

    monkeypatch.setattr("socket.create_connection", no_network)
    with pytest.raises(ModelNotFoundError, match="cannot be downloaded here"):
        open_checkpoint("teacher/not-here")


def test_agreement_is_the_largest_difference_and_the_share_of_same_top_tokens():
    from attention_core.models.fidelity import agreement

    ours = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.5]])
    theirs = np.array([[0.0, 1.5, 1.75], [3.0, 0.25, 0.5]])  # position 0's top moves to 2
    found = agreement(ours, theirs, "decoder")
    assert found.largest_difference == 0.75
    assert found.same_top_token == 0.5
    assert found.positions == 2
    assert agreement(ours, theirs, "encoder").same_top_token is None
    with pytest.raises(AttentionInputError, match="different tokens"):
        agreement(ours, theirs[:1], "decoder")
