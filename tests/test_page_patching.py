"""The "What carries the answer" page in AppTest, its charts and tables against transformers.

The page's numbers come from this project's own decoder and its batched, started, cached
patch passes; every expected number here comes from Hugging Face transformers on the same
weights, each patch a plain full pass with a forward hook (tests/test_patching.py's
references), on a pair that is not the page's default.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.models import patching
from harness.app_pages import open_model_page
from tests.hf_models import smollm2_or_skip
from tests.plotly_json import chart, frame, plotly_array
from tests.test_patching import _hf_head_map, _hf_stream_map
from ui.patching import data
from ui.widgets.byte_cache import every_cache

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

PAGE = "pages/carries_the_answer.py"
HELD_OUT = {
    "clean": "When Tom and Anna went to the park, Anna gave a ball to",
    "corrupt": "When Tom and Anna went to the park, Tom gave a ball to",
    "answer": " Tom",
    "wrong": " Anna",
}


@pytest.fixture(scope="module")
def reference():
    return smollm2_or_skip()


def open_page(params: dict[str, str] | None = None) -> AppTest:
    return open_model_page(PAGE, params, timeout=600)


def test_the_default_link_shows_the_indirect_object_pair():
    at = open_page()
    assert not at.error
    pair = frame(at, "LD = ")
    ld_clean, ld_corrupt = pair.iloc[:, 1]
    assert ld_clean > 5 and ld_corrupt < -5  # SmolLM2 gets the default pair right both ways
    assert pair["P(“ Mary”)"][0] > 0.9 and pair["P(“ John”)"][1] > 0.7
    carriers = next(c.value for c in at.caption if "restores the most" in c.value)
    assert "token 10 “ John”→“ Mary”" in carriers and "The last token carries it from" in carriers
    top = frame(at, "restored, every position")
    assert top["head"][0] == "layer 24, head 4"
    assert at.slider(key="patching.layer").value == 24 and at.slider(key="patching.head").value == 4
    assert any("Predict, then reveal" in e.label for e in at.expander)


def test_maps_and_top_head_agree_with_transformers_on_a_held_out_pair(reference):
    at = open_page({**HELD_OUT, "blocks": "1", "kind": "mlp_out"})
    assert not at.error
    hf, tokenizer = reference
    ids = {k: np.asarray(tokenizer(HELD_OUT[k], add_special_tokens=False)["input_ids"])
           for k in ("clean", "corrupt")}  # fmt: skip
    (answer,), (wrong,) = (tokenizer(HELD_OUT[k], add_special_tokens=False)["input_ids"]
                           for k in ("answer", "wrong"))  # fmt: skip
    lds = []
    for which in ("clean", "corrupt"):
        with torch.no_grad():
            logits = hf(torch.from_numpy(ids[which])[None], use_cache=False).logits[0, -1]
        lds.append(float(logits[answer] - logits[wrong]))
    shown = frame(at, "LD = ").iloc[:, 1].to_numpy()
    np.testing.assert_allclose(shown, lds, atol=2e-3)
    # The independent computation needs the runs only for the ids and the two answers.
    runs = patching.PatchRuns(
        ids["clean"], ids["corrupt"], answer, wrong, 9, lds[0], lds[1],
        *[None] * 5, num_layers=30, num_heads=9,
    )  # fmt: skip
    for key, kind in (("patching.resid", "resid"), ("patching.block_map", "mlp_out")):
        expected = patching.restored(_hf_stream_map(hf, runs, kind), runs)
        drawn = plotly_array(chart(at, key)["data"][0]["z"]).astype(np.float64)
        np.testing.assert_allclose(drawn, expected, atol=1e-3)
    every = patching.restored(_hf_head_map(hf, runs, last_only=False), runs)
    drawn = plotly_array(chart(at, "patching.heads_every")["data"][0]["z"]).astype(np.float64)
    np.testing.assert_allclose(drawn, every, atol=1e-3)
    layer, head = divmod(int(np.argmax(every)), 9)
    top = frame(at, "restored, every position")
    assert top["head"][0] == f"layer {layer + 1}, head {head + 1}"
    assert float(top.iloc[0, 1].rstrip("%")) == pytest.approx(100 * every.max(), abs=0.1)


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"corrupt": "When Mary and John went to the big store, Mary gave a drink to"},
         r"The clean prompt has 14 tokens and the corrupted one 15.*Clean: .*Corrupted: "),
        ({"corrupt": "When Mary and John went to the store, John gave a drink to"},
         "LD_clean = LD_corrupt and nothing can be restored"),
        ({"clean": "   "}, "The clean prompt is empty"),
        ({"wrong": " Mary"}, "are the same token"),
    ],
    ids=["lengths", "identical", "empty", "same-answer"],
)  # fmt: skip
def test_bad_input_gets_a_sentence_not_a_traceback(params, says):
    at = open_page(params)
    assert not at.exception
    assert any(re.search(says, e.value) for e in at.error), [e.value for e in at.error]
    assert not at.main.get("plotly_chart")


def test_an_answer_of_several_tokens_uses_its_first_piece_and_says_so():
    at = open_page({"answer": " Maryanne"})
    assert not at.exception
    note = next(i.value for i in at.info if "Maryanne" in i.value)
    assert "its first piece" in note


def test_a_change_of_head_or_kind_is_cached_and_shared():
    at = open_page()
    computed = {c: c.computed() for c in (data._pair_runs, data._patched)}
    at.slider(key="patching.layer").set_value(30).run()
    at.slider(key="patching.head").set_value(2).run()
    assert not at.exception
    assert any("**Layer 30, head 2** restores 26.5%" in m.value for m in at.markdown)
    assert at.query_params["head"] in ("2", ["2"])
    assert {c: c.computed() for c in computed} == computed  # no pass for a head change
    at.toggle(key="patching.blocks").set_value(True).run()
    maps = data._patched.computed()
    assert maps == computed[data._patched] + 1  # the attention map, once
    second = open_page({"blocks": "1", "layer": "30", "head": "2"})  # another viewer
    assert not second.exception
    assert data._patched.computed() == maps  # the second viewer computes nothing
    assert data._pair_runs.computed() == computed[data._pair_runs]
    for cached in (data._pair_runs, data._patched):
        assert cached.holding()[1] <= cached.max_bytes
    assert every_cache()["patching.runs"][0] >= 1


def test_the_default_view_prepared_after_a_load_is_all_the_default_link_needs():
    from ui.models import smollm
    from ui.patching import default_view

    assert default_view.prepare in smollm.HOST.default_views
    default_view.prepare(smollm.load_decoder().model)
    prepared = {c: c.computed() for c in (data._pair_runs, data._patched)}
    at = open_page()
    assert not at.error
    assert {c: c.computed() for c in prepared} == prepared  # its viewer computes nothing
