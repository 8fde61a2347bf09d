"""Your own model on the real-model pages: checkpoints a server lists in ATTENTION_EXPLORER_MODELS
(tiny ones, built by transformers in the test), opened by a link's ``?model=``.

What the pages' charts and tables hold is compared with transformers on the same files; a link
naming anything the server did not list is refused with a notice, reads no file and opens no
connection; a model the pages cannot run gets a sentence.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

from attention_core.lessons.passages import ALICE
from attention_core.models import loading
from harness.app_pages import open_model_page
from tests.listed_pages import (
    causal_lm,
    check_next_tokens,
    check_patching_lds,
    encode,
    open_heads_page,
    table,
)
from tests.plotly_json import chart, figures, plotly_array
from tests.tiny_checkpoints import write_tiny
from ui.models import chosen

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow
PROMPT = "the cat sat on the mat and the dog"
# Words the tiny vocabulary holds, so that the framed prompt is made of real tokens.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ 'the ' + ('child' if message['role'] == 'user' else 'man') "
    "+ ' read ' + message['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}{{ ' and the dog ran' }}{% endif %}"
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("listed")
    made = {family: write_tiny(family, root / f"tiny-{family}") for family in
            ("llama", "qwen2", "gpt2", "gpt2-other", "bert")}  # fmt: skip
    huge = root / "huge-llama"
    shutil.copytree(made["llama"], huge)
    config = json.loads((huge / "config.json").read_text())
    (huge / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 100_000}))
    t5 = root / "tiny-t5"
    shutil.copytree(made["gpt2"], t5)
    (t5 / "config.json").write_text(json.dumps({"model_type": "t5", "architectures": ["T5Model"]}))
    chat = root / "tiny-chat"
    shutil.copytree(made["llama"], chat)
    (chat / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    made["huge"], made["t5"], made["chat"] = huge, t5, chat
    return made


@pytest.fixture(autouse=True)
def listed(folders, monkeypatch):
    monkeypatch.setenv(chosen.MODELS_ENV_VAR, ",".join(str(p) for p in folders.values()))
    yield
    chosen.HOST.forget()


def test_the_decoder_page_on_a_listed_llama_shows_what_transformers_computes(folders):
    at = open_model_page("pages/decoder_llm.py", {"model": "tiny-llama", "prompt": PROMPT}, 240)
    assert not at.error
    assert any("Llama · 57,072 parameters" in c.value for c in at.caption)
    hf = causal_lm(folders["llama"])
    ids = encode(folders["llama"], PROMPT)
    with torch.no_grad():
        p = torch.softmax(hf(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
    check_next_tokens(at, p)


def test_chat_mode_frames_the_prompt_in_the_listed_models_own_template(folders):
    at = open_model_page(
        "pages/decoder_llm.py", {"model": "tiny-chat", "prompt": "a big red dog", "chat": "1"}, 240
    )
    assert not at.error
    chat = next(t for t in at.toggle if t.label.startswith("Chat mode"))
    assert chat.value and not chat.proto.disabled
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(folders["chat"] / "tokenizer.json")
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    framed = tokenizer.apply_chat_template(
        [{"role": "user", "content": "a big red dog"}], tokenize=True, add_generation_prompt=True
    )
    ids = list(framed["input_ids"] if hasattr(framed, "keys") else framed)
    assert "the child read a big red dog and the dog ran" == tokenizer.decode(ids)
    with torch.no_grad():
        p = torch.softmax(
            causal_lm(folders["chat"])(torch.tensor([ids])).logits[0, -1].double(), -1
        )
    check_next_tokens(at, p.numpy())


def test_a_listed_model_without_a_template_reads_raw_text_and_says_why(folders):
    at = open_model_page(
        "pages/decoder_llm.py", {"model": "tiny-llama", "prompt": PROMPT, "chat": "1"}, 240
    )
    assert not at.error
    chat = next(t for t in at.toggle if t.label.startswith("Chat mode"))
    assert chat.proto.disabled and not chat.value
    assert chat.proto.help == "tiny-llama was saved without a chat template: it reads raw text."


def test_the_heads_page_on_a_listed_qwen2_reads_transformers_lens_and_patterns(folders):
    at, _, out, _, _ = open_heads_page(folders["qwen2"], "tiny-qwen2", PROMPT)
    # The chosen head (its defaults, past a 2-layer 4-head model's end, become layer 2 head 4).
    pattern = plotly_array(chart(at, "heads.pattern")["data"][0]["z"]).astype(np.float64)
    expected = out.attentions[1][0, 3].numpy()
    future = np.triu(np.ones_like(expected, dtype=bool), k=1)  # drawn blank: a decoder's mask
    np.testing.assert_array_equal(np.isnan(pattern), future)
    np.testing.assert_allclose(np.nan_to_num(pattern), expected, atol=1e-5)


def titled(at, start: str) -> np.ndarray:
    """The z of the first figure whose title starts with ``start``, float64 (NaN where blank)."""
    spec = next(s for s in figures(at) if (s["layout"].get("title") or {}).get("text", "")
                .startswith(start))  # fmt: skip
    return plotly_array(spec["data"][0]["z"]).astype(np.float64)


@pytest.mark.parametrize("name", ["gpt2", "gpt2-other"])
def test_the_decoder_page_on_a_listed_gpt2_shows_what_transformers_computes(folders, name):
    """GPT-2 on the decoder page: transformers' next-token probabilities, attention and learned
    position table, and a sentence where RoPE's plot would be (tiny-gpt2-other: a config of
    transformers' own defaults, three layers of three heads, an untied head, no end token)."""
    at = open_model_page("pages/decoder_llm.py", {"model": f"tiny-{name}", "prompt": PROMPT}, 240)
    assert not at.error
    hf = causal_lm(folders[name])
    assert any(f"GPT-2 · {hf.num_parameters():,} parameters" in c.value for c in at.caption)
    ids = encode(folders[name], PROMPT)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    check_next_tokens(at, torch.softmax(out.logits[0, -1].double(), -1).numpy())
    pattern = titled(at, "Layer 1, head 1")
    expected = out.attentions[0][0, 0].numpy()
    future = np.triu(np.ones_like(expected, dtype=bool), k=1)
    np.testing.assert_allclose(np.where(future, 0, pattern), expected, atol=1e-5)
    positions = hf.transformer.wpe.weight[: len(ids)].detach().double().numpy()
    np.testing.assert_allclose(titled(at, "Learned position vectors"), positions @ positions.T,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    headers = [h.value for h in at.header]
    assert not any("RoPE" in h for h in headers)
    assert any("This model has no RoPE" in m.value for m in at.markdown)
    assert any("multi-head attention" in c.value for c in at.caption)


@pytest.mark.parametrize("name", ["gpt2", "gpt2-other"])
def test_the_heads_page_on_a_listed_gpt2_reads_transformers_lens_and_patterns(folders, name):
    at, hf, out, top, lens = open_heads_page(folders[name], f"tiny-{name}", PROMPT)
    # Stage 1, through GPT-2's own ln_f: transformers' head on its norm of hidden_states[1].
    with torch.no_grad():
        stage = torch.softmax(hf.lm_head(hf.transformer.ln_f(out.hidden_states[1][0, -1])), -1)
    assert lens[1] == pytest.approx(float(stage[top]), abs=1e-4)
    layers, heads = len(out.attentions), out.attentions[0].shape[1]
    layer, head = min(24, layers) - 1, min(5, heads) - 1  # the page's defaults, clipped
    pattern = plotly_array(chart(at, "heads.pattern")["data"][0]["z"]).astype(np.float64)
    expected = out.attentions[layer][0, head].numpy()
    future = np.triu(np.ones_like(expected, dtype=bool), k=1)
    np.testing.assert_array_equal(np.isnan(pattern), future)
    np.testing.assert_allclose(np.nan_to_num(pattern), expected, atol=1e-5)
    if name == "gpt2-other":  # 32 positions: the probe's 2 × 20 tokens do not fit
        assert any("the probe is cut to L = 16" in i.value for i in at.info)
    (sentence,) = [c.value for c in at.caption if "scale is frozen" in c.value]
    assert "The final LayerNorm's scale" in sentence and "1/σ" in sentence
    written = re.search(r"the logit itself ([+-]\d\.\d{4})", sentence).group(1)
    assert float(written) == pytest.approx(float(out.logits[0, -1, top]), abs=1e-4)


def test_the_pretrained_page_on_a_listed_bert_draws_transformers_attention(folders):
    at = open_model_page("pages/real_model.py", {"model": "tiny-bert", "text": "the cat sat",
                                                 "layer": "2", "head": "3"}, 240)  # fmt: skip
    assert not at.error
    hf = transformers.BertModel.from_pretrained(folders["bert"], attn_implementation="eager")
    assert any("BERT · 4,688 parameters" in c.value for c in at.caption)
    (spec,) = [s for s in figures(at) if (s["layout"].get("title") or {}).get("text", "")
               .startswith("Layer ")]  # fmt: skip
    zoom = plotly_array(spec["data"][0]["z"]).astype(np.float64)
    tokenizer = transformers.BertTokenizerFast(
        tokenizer_file=str(folders["bert"] / "tokenizer.json")
    )
    ids = torch.tensor([tokenizer("the cat sat")["input_ids"]])
    with torch.no_grad():
        attention = hf(ids, output_attentions=True).attentions[1][0, 2].numpy()
    np.testing.assert_allclose(zoom, attention, atol=1e-5)


@pytest.mark.parametrize(
    "crafted",
    ["not-listed", "/etc/passwd", "../tiny-llama", "openai-community/gpt2", "tiny-llama/../x"],
)
def test_a_link_naming_what_the_server_did_not_list_is_refused_and_reads_nothing(
    crafted, monkeypatch
):
    read, connected = [], []
    real_read = loading.read_config
    monkeypatch.setattr(loading, "read_config", lambda p: read.append(str(p)) or real_read(p))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connected.append(a))
    at = open_model_page("pages/decoder_llm.py", {"model": crafted}, 240)
    notices = [w.value for w in at.warning]
    assert any(f"`model={crafted}` was ignored" in n for n in notices), notices
    assert any("SmolLM2-135M-Instruct from" in c.value for c in at.caption)
    assert not [p for p in read if crafted.strip("./") in p]
    assert connected == []
    assert chosen.HOST.wanted == ""


@pytest.mark.parametrize(
    ("name", "page", "sentence"),
    [
        ("huge-llama", "pages/decoder_llm.py", "more than the 600,000,000 this app runs"),
        ("tiny-t5", "pages/decoder_llm.py", "'T5Model' model, an architecture this app does not"),
    ],
)
def test_a_model_the_page_cannot_run_gets_a_sentence(name, page, sentence):
    at = open_model_page(page, {"model": name}, 240)
    errors = " ".join(e.value for e in at.error)
    assert sentence in errors
    assert "/tiny" not in errors and "/huge" not in errors  # no server path is shown


@pytest.mark.parametrize(("page", "name"), [("pages/decoder_llm.py", "tiny-llama"),
                                            ("pages/decoder_llm.py", "tiny-gpt2"),
                                            ("pages/real_model.py", "tiny-bert")])  # fmt: skip
def test_the_page_checks_its_own_tokens_against_transformers_when_asked(page, name):
    at = open_model_page(page, {"model": name, "against_hf": "1"}, 240)
    (line,) = [c.value for c in at.caption if "Against transformers" in c.value]
    largest = float(re.search(r"is (\d\.\de[-+]\d+)", line).group(1))
    assert largest < 1e-4
    if name != "tiny-bert":
        assert "the same at 100% of them" in line


def test_on_a_local_run_the_sidebar_opens_a_folder_typed_there(folders, monkeypatch):
    monkeypatch.setenv(chosen.MODELS_ENV_VAR, "")
    at = open_model_page("pages/decoder_llm.py", {}, 240)
    # A shared server takes no typed path (the sidebar's one text box joins a talk's room).
    assert [t.key for t in at.sidebar.text_input] == ["room.typed"]
    monkeypatch.setenv(chosen.LOCAL_ENV_VAR, "1")
    at.run()
    at.sidebar.text_input(key="models.typed_source").input(str(folders["qwen2"])).run()
    assert at.sidebar.selectbox[0].value == "tiny-qwen2"
    assert any("Qwen2 · 22,784 parameters" in c.value for c in at.caption)
    assert at.query_params["model"] in ("tiny-qwen2", ["tiny-qwen2"])


def test_the_patching_page_on_a_listed_qwen2_shows_transformers_lds(folders):
    check_patching_lds(folders["qwen2"], "tiny-qwen2")


def test_the_patching_page_on_a_listed_gpt2_shows_transformers_lds(folders):
    check_patching_lds(folders["gpt2"], "tiny-gpt2")


def test_the_long_context_page_on_a_listed_gpt2_shows_transformers_perplexity(folders):
    """The text cut to GPT-2's 64 learned positions, the window to half of it (31 tokens): the
    full pass's perplexity over the tokens predicted from a query at 31 or later."""
    at = open_model_page("pages/long_context.py", {"model": "tiny-gpt2"}, 240)
    assert not at.error
    assert any("the model learned no more positions" in w.value for w in at.warning)
    hf = causal_lm(folders["gpt2"])
    ids = encode(folders["gpt2"], ALICE)[:64]
    with torch.no_grad():
        logits = hf(torch.tensor([ids])).logits[0].double()
    losses = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
    expected = float(torch.exp(losses[31:].mean()))
    (full,) = [m.value for m in at.metric if m.label == "Perplexity, full attention"]
    assert float(full) == pytest.approx(expected, abs=0.006)
    assert any("each with its own keys and values" in m.value for m in at.markdown)
    assert any("Here tiny-gpt2 reads a text three ways" in m.value for m in at.markdown)


def test_the_attends_page_on_a_listed_gpt2_splits_transformers_scores(folders):
    """GPT-2 on "Why a head attends there": the weight the page states is transformers', the
    parts sum to the score, and its learned positions show as four token/position terms."""
    at = open_model_page("pages/why_a_head_attends.py", {"model": "tiny-gpt2-other",
                         "prompt": PROMPT, "layer": "3", "head": "2"}, 240)  # fmt: skip
    assert not at.error and not at.exception
    hf = causal_lm(folders["gpt2-other"])
    ids = encode(folders["gpt2-other"], PROMPT)
    with torch.no_grad():
        row = hf(torch.tensor([ids]), output_attentions=True).attentions[2][0, 1, -1].numpy()
    key = 1 + int(np.argmax(row[1:]))
    (said,) = [m.value for m in at.markdown if m.value.startswith("Layer 3, head 2 gives")]
    assert f"(token {key + 1}) a weight of **{row[key]:.3f}**" in said
    (line,) = [m.value for m in at.markdown if "The model's own score" in m.value]
    score, summed = (float(x) for x in re.findall(r"\*\*(-?[\d.]+)\*\*", line))
    assert summed == pytest.approx(score, abs=1e-4)
    assert "LayerNorm's scale" in line
    assert list(table(at, "key part")["query part"]) == ["token", "token", "position", "position"]
