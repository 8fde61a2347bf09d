"""A real head in the step-by-step editor: the real-model page's link, followed to the
step-by-step page, fills the editors with that head's q, k, v and shows the model's weights.

Expected numbers come from the model run here, outside the pages and their caches
(`attention_core.models.run_bert`), from Hugging Face transformers on the same files, and from
one-line NumPy formulas; never from the pages' own helpers.
"""

from __future__ import annotations

import math
from urllib.parse import parse_qs

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import BertModel as HFBertModel

from attention_core.models import MODEL_DIR_ENV_VAR, load_bert, run_bert
from harness.app_pages import ROOT
from tests.test_page_scaled_dot_product import HAND_WEIGHTS, softmax_rows, step, type_into
from ui.widgets.editors import editor_widget_key

SDPA = "pages/sdpa_steps.py"
MODEL_PAGE = "pages/real_model.py"
TIRED = "The animal didn't cross the street because it was too tired."
BANK = "I sat on the bank of the river, then went to the bank to pay in a cheque."


@pytest.fixture(scope="module")
def model():
    return load_bert()


@pytest.fixture(scope="module")
def hf_attentions(model):
    """transformers' attention weights `(layer, head, n, n)` for a text, eager attention."""
    reference = HFBertModel.from_pretrained(
        str(model.location.path), attn_implementation="eager"
    ).eval()

    def run(text: str) -> np.ndarray:
        ids = torch.tensor(model.tokenize(text).input_ids)[None]
        with torch.inference_mode():
            out = reference(ids, output_attentions=True)
        return np.stack([a[0].numpy() for a in out.attentions])

    return run


@pytest.fixture(autouse=True)
def offline_package(monkeypatch):
    monkeypatch.delenv(MODEL_DIR_ENV_VAR, raising=False)


def new_app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()


def follow(at: AppTest, params: dict[str, str]) -> AppTest:
    """Go to the step-by-step page as a link with `params` takes the browser there."""
    at.query_params.clear()
    at.query_params.update(params)
    at.switch_page(SDPA).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def editor_link(at: AppTest) -> dict[str, str]:
    (link,) = [x for x in at.get("page_link") if x.proto.page == "scaled-dot-product"]
    return {name: value for name, (value,) in parse_qs(link.proto.query_string).items()}


def editor(at: AppTest, name: str) -> tuple[np.ndarray, list[str]]:
    """The numbers and token names in the editor of Q, K or V."""
    key = editor_widget_key(at.session_state, f"scaled_dot_product.{name}")
    (frame,) = [f for f in at.dataframe if f.proto.id.endswith(key)]
    table = frame.value
    return table.drop(columns="token").to_numpy(np.float64), table["token"].tolist()


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


def test_the_model_pages_link_puts_the_real_head_into_the_editor(model, hf_attentions):
    at = new_app()
    # A visit first, so the link arrives at a page this session has already bound.
    at.switch_page(SDPA).run()
    assert not at.info
    at.query_params.clear()
    at.query_params.update({"layer": "3", "head": "5"})
    at.switch_page(MODEL_PAGE).run()
    params = editor_link(at)
    assert params == {"source": "bert", "text": TIRED, "layer": "3", "head": "5"}

    follow(at, params)
    reference = run_bert(model, TIRED)
    attention = reference.layers[2].attention  # layer 3, head 5 counted from 1
    tokens = list(reference.tokens)
    assert len(tokens) == 16
    for name in ("q", "k", "v"):
        numbers, labels = editor(at, name)
        expected = getattr(attention, f"{name}_heads")[4]  # (16, 32)
        assert numbers.shape == (16, 32)
        np.testing.assert_array_equal(numbers, expected.astype(np.float64))
        assert labels == tokens
    # The page's weights are the model's own weights of that head, and transformers'.
    shown = step(at, "weights")
    np.testing.assert_allclose(shown, reference.attention_weights[2, 4], atol=1e-6, rtol=0)
    np.testing.assert_allclose(shown, hf_attentions(TIRED)[2, 4], atol=1e-5, rtol=0)
    q, k = attention.q_heads[4].astype(np.float64), attention.k_heads[4].astype(np.float64)
    np.testing.assert_allclose(shown, softmax_rows(q @ k.T / math.sqrt(32)), atol=1e-7)
    (notice,) = [i.value for i in at.info]
    assert "layer 3, head 5" in notice and "√32" in notice and "tired" in notice
    sizes = (at.slider(key=f"scaled_dot_product.{name}").value for name in ("n_q", "d_k"))
    assert tuple(sizes) == (16, 32)
    assert at.toggle(key="scaled_dot_product.scaling").value
    assert not at.toggle(key="scaled_dot_product.causal").value
    assert not warnings(at)
    # The link stays short: the request, not 3 × 16 × 32 numbers.
    assert {at.query_params[n] for n in ("source", "layer", "head")} == {"bert", "3", "5"}
    assert at.query_params["text"] == TIRED and "Q" not in at.query_params

    # One number of BERT's attention changed: only the query "it" (row 10) moves.
    type_into(at, "scaled_dot_product.q", {9: {"d1": float(q[9, 0]) + 3.0}})
    q[9, 0] += 3.0
    moved = step(at, "weights")
    np.testing.assert_allclose(moved, softmax_rows(q @ k.T / math.sqrt(32)), atol=1e-6)
    np.testing.assert_allclose(np.delete(moved, 9, 0), np.delete(shown, 9, 0), atol=1e-7)
    assert np.abs(moved[9] - shown[9]).max() > 1e-3

    # A preset takes the page back, and the link forgets the head.
    at.selectbox(key="scaled_dot_product.preset").set_value("random").run()
    assert not at.info and "source" not in at.query_params and "text" not in at.query_params
    assert at.slider(key="scaled_dot_product.n_q").value == 4


def test_a_long_text_is_cut_to_the_editor_with_a_notice(model):
    at = new_app()
    at.query_params.update({"text": BANK, "layer": "1", "head": "1"})
    at.switch_page(MODEL_PAGE).run()
    params = editor_link(at)
    cut = params["text"]
    assert BANK.startswith(cut) and cut != BANK
    assert any("tables hold 16 tokens" in c.value for c in at.caption)
    cut_tokens = model.tokenize(cut).tokens
    assert len(cut_tokens) == 16 and cut_tokens == (*model.tokenize(BANK).tokens[:15], "[SEP]")

    # A hand-written link with the whole text is cut the same way, and says so.
    follow(at, {**params, "text": BANK})
    (notice,) = [i.value for i in at.info]
    # i sat on the bank of the river , then went to the bank to pay in a che ##que . = 21
    # word pieces, with [CLS] and [SEP] 23.
    assert "The link's text has 23 tokens and these tables hold 16" in notice
    numbers, labels = editor(at, "k")
    reference = run_bert(model, cut)
    assert labels == list(reference.tokens)
    np.testing.assert_array_equal(numbers, reference.layers[0].attention.k_heads[0])
    np.testing.assert_allclose(
        step(at, "weights"), reference.attention_weights[0, 0], atol=1e-6, rtol=0
    )


@pytest.mark.parametrize(
    ("params", "notice"),
    [
        ({"layer": "7"}, "`layer=7` is not a layer of all-MiniLM-L6-v2: it has layers 1 to 6"),
        ({"layer": "0"}, "`layer=0` is not a layer"),
        ({"head": "13"}, "`head=13` is not a head of all-MiniLM-L6-v2: it has heads 1 to 12"),
        ({"head": "two"}, "`head=two` is not a head"),
        ({"text": ""}, "carries no text"),
        ({"text": "   "}, "carries no text"),
        ({"text": "x " * 3000}, "more than a link may carry"),
        ({"source": "gpt"}, "`source=gpt` is not a model this page can read"),
    ],
)
def test_a_bad_link_gives_a_notice_and_the_preset(params, notice):
    at = new_app()
    follow(at, {"source": "bert", "text": "the cat sat", "layer": "2", "head": "3", **params})
    assert notice in warnings(at), warnings(at)
    assert not at.info
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)
    assert not {"source", "text", "layer", "head"} & set(at.query_params)


def test_without_the_model_the_link_says_so_and_keeps_the_example(tmp_path, monkeypatch):
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(tmp_path))  # an empty directory: no model
    at = follow(new_app(), {"source": "bert", "text": "the cat sat", "layer": "2", "head": "3"})
    assert "layer 2, head 3 of all-MiniLM-L6-v2, but the model is not available" in warnings(at)
    assert "config.json" in warnings(at)  # the loader's own reason, naming what is missing
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)
