"""The "Why a head attends there" page in AppTest: its split against the same split read from
transformers, on a prompt and a head that are not the page's defaults; what it says of its
default link; and what it does with bad input.

The expected parts come from transformers' SmolLM2 on the same (bfloat16-rounded) weights,
its pieces taken by forward hooks (tests/test_score_sources.py's reference, in float64).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.app_pages import open_model_page
from tests.hf_models import smollm2_or_skip
from tests.plotly_json import chart, frame, plotly_array
from tests.test_score_sources import _hooked, _reference_terms

torch = pytest.importorskip("torch")

PAGE = "pages/why_a_head_attends.py"
HELD_OUT = "Mary gave the book to John. Then Mary gave the pen to"


@pytest.fixture(scope="module")
def reference():
    hf, tokenizer = smollm2_or_skip()
    return hf.requires_grad_(False), tokenizer


def open_page(params: dict[str, str] | None = None):
    return open_model_page(PAGE, params, timeout=600)


def markdown_with(at, has: str) -> str:
    found = [m.value for m in at.markdown if has in m.value]
    assert found, f"no markdown with {has!r}"
    return found[0]


@pytest.mark.slow
def test_the_parts_agree_with_transformers_on_a_held_out_prompt_and_head(reference):
    hf, tokenizer = reference
    ids = tokenizer(HELD_OUT, add_special_tokens=False)["input_ids"]
    layer, head, query = 16, 3, len(ids) - 2  # from 1 on the page: layer 16, head 3
    at = open_page({"prompt": HELD_OUT, "layer": str(layer), "head": str(head),
                    "query": str(query + 1)})  # fmt: skip
    pieces = _hooked("llama", hf, ids)
    names, terms = _reference_terms("llama", hf, pieces, layer - 1, head - 1, query)
    # The key the page chose: the one this query attends most after the first, in
    # transformers' own weights.
    weights = pieces["weights"][layer - 1][head - 1, query].numpy()
    key = 1 + int(np.argmax(weights[1 : query + 1]))
    said = markdown_with(at, f"Layer {layer}, head {head} gives")
    assert f"(token {key + 1}) a weight of **{weights[key]:.3f}**" in said
    # The score and its parts' sum, both the model's.
    score = float(terms[:, :, key].sum())
    line = markdown_with(at, "The model's own score of this key")
    shown = [float(x) for x in re.findall(r"\*\*(-?[\d.]+)\*\*", line)]
    assert shown == pytest.approx([score, score], abs=2e-3)
    # The key side, each source above the visible keys' average, as the chart draws it.
    side = terms.sum(axis=0)[:, : query + 1]
    above = side[:, key] - side.mean(axis=1)
    drawn = chart(at, "attends.key_side")["data"][0]
    for name, value in zip(drawn["y"], plotly_array(drawn["x"]), strict=True):
        if name != "all other sources":
            assert value == pytest.approx(above[names.index(name)], abs=5e-3), name
    assert drawn["y"][-1] == names[int(np.argmax(np.abs(above)))]  # the largest on top
    # The largest terms, as the table lists them.
    table = frame(at, "adds to the score")
    top = np.argsort(-np.abs(terms[:, :, key]), axis=None)[:3]
    for row, flat in enumerate(top):
        a, b = np.unravel_index(flat, terms.shape[:2])
        assert table["written at the query by"][row] == names[a]
        assert table["meets, written at the key by"][row] == names[b]
        assert table["adds to the score"][row] == pytest.approx(terms[a, b, key], abs=5e-3)


@pytest.mark.slow
def test_the_default_link_names_the_previous_token_head_behind_the_induction_head():
    at = open_page()
    said = markdown_with(at, "attends from")
    assert said.startswith("Layer 19, head 7 attends from ‘ the’ to ‘ lazy’ mostly because of "
                           "what layer 17 head 1 wrote at ‘ lazy’")  # fmt: skip
    kind = markdown_with(at, "Over the whole pattern")
    assert "layer 17 head 1, a previous-token head" in kind
    assert "slow-turning pairs" in markdown_with(at, "weight goes where")
    assert at.main.get("plotly_chart")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("typed", "said"),
    [("", "The prompt is empty"), ("Hi", "A head needs at least two tokens to choose between")],
)
def test_a_prompt_too_short_is_said_next_to_it_and_kept(typed, said):
    at = open_page({"prompt": "Dogs bark loudly"})
    at.text_area(key="attends.prompt").set_value(typed).run()
    assert not at.exception
    assert at.text_area(key="attends.prompt").value == typed
    assert [e.value for e in at.error if said in e.value]
    assert not at.main.get("plotly_chart")


@pytest.mark.slow
def test_a_link_past_the_end_of_the_text_is_explained():
    at = open_page({"prompt": "Dogs bark loudly", "query": "40", "key": "30"})
    assert not at.exception
    notices = " ".join(w.value for w in at.warning) + " ".join(m.value for m in at.markdown)
    assert "`query=40` is past the end of this text" in notices
    assert "`key=30` is past the end of this text" in notices


def test_minilm_shows_its_learned_positions_four_terms():
    at = open_page({"model": "minilm", "prompt": "the cat sat on the mat", "layer": "1",
                    "head": "1"})  # fmt: skip
    assert not at.exception
    table = frame(at, "key part")
    assert list(table["query part"]) == ["token", "token", "position", "position"]
    assert markdown_with(at, "attends from").startswith("Layer 1, head 1 attends from ‘[SEP]’")


@pytest.mark.slow
def test_the_editor_link_puts_the_decoder_head_into_the_step_by_step_page(reference):
    """The page's link, followed: the editors hold the head's rotated q and k and its v, and
    the step-by-step page's causal weights are transformers' own for those tokens."""
    from urllib.parse import parse_qs

    from tests.test_page_model_head import editor, follow, step

    hf, tokenizer = reference
    text = "Dogs bark loudly and dogs bark"
    at = open_page({"prompt": text, "layer": "19", "head": "7"})
    (link,) = [x for x in at.get("page_link") if x.proto.page == "scaled-dot-product"]
    params = {name: value for name, (value,) in parse_qs(link.proto.query_string).items()}
    assert params == {"source": "smollm2", "text": text, "layer": "19", "head": "7"}
    follow(at, params)
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = hf(ids, output_attentions=True, use_cache=False).attentions[18][0, 6]
    n = ids.shape[1]
    q, labels = editor(at, "q")
    assert q.shape == (n, 64) and labels == [tokenizer.decode([int(i)]) for i in ids[0]]
    np.testing.assert_allclose(step(at, "weights"), expected.double().numpy(), atol=2e-5)
    assert at.toggle(key="scaled_dot_product.causal").value
    (notice,) = [i.value for i in at.info]
    assert "layer 19, head 7" in notice and "√64" in notice


SMALL_RUN = "2_2_16_16_8_50_0.003_8_1"  # 2 layers of 2 heads, d_model 16, 50 steps: a second


def test_a_learning_page_model_is_split_on_its_held_out_example():
    """The learning page's link: the run (trained here, if no page has) read on its held-out
    example; the weight the page states is the run's own evaluation's, the parts sum to the
    score, and the editor link asks the step-by-step page for the same head."""
    from urllib.parse import parse_qs

    from ui.models import toy

    at = open_model_page(PAGE, {"model": "learning", "run": SMALL_RUN, "layer": "2",
                                "head": "1", "query": "8"}, timeout=300)  # fmt: skip
    assert not at.exception and not at.error
    run = toy.training_run(toy.settings_of(SMALL_RUN))
    assert run.finished
    patterns = run.final.evaluation.patterns  # (layer, head, n, n) on the held-out example
    row = patterns[1, 0, 7]
    key = 1 + int(np.argmax(row[1:8]))
    said = markdown_with(at, "Layer 2, head 1 gives")
    assert f"(token {key + 1}) a weight of **{row[key]:.3f}** from" in said
    line = markdown_with(at, "The model's own score of this key")
    shown = [float(x) for x in re.findall(r"\*\*(-?[\d.]+)\*\*", line)]
    assert shown[0] == pytest.approx(shown[1], abs=1e-4)
    assert "this model has no norm" in line
    (link,) = [x for x in at.get("page_link") if x.proto.page == "scaled-dot-product"]
    params = {name: value for name, (value,) in parse_qs(link.proto.query_string).items()}
    assert params == {"source": "learning", "run": SMALL_RUN, "layer": "1", "head": "0"}


def test_a_learning_link_without_its_run_says_where_to_get_one():
    at = open_model_page(PAGE, {"model": "learning"}, timeout=300)
    assert not at.exception
    assert at.radio(key="attends.model").value != "learning"
