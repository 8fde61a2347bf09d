""" "Compare two views" on every page that shows a pattern, driven through AppTest.

Each test opens the comparison (from a link, `cmp=1`, as a teacher's link would), reads the
three heatmaps it drew (A, B and B − A) and checks them against the two patterns computed
independently: one-line NumPy formulas, or the model's own forward pass.
"""

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT, open_model_page
from tests.plotly_json import plotly_array

A, B, DIFFERENCE = "A: ", "B: ", "B − A"


def open_page(page: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def compared(at: AppTest) -> dict[str, np.ndarray]:
    """The comparison's three maps by title prefix ("A: ", "B: ", "B − A"), as drawn."""
    out = {}
    for chart in at.main.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        title = spec["layout"].get("title", {}).get("text", "")
        for prefix in (A, B, DIFFERENCE):
            if title.startswith(prefix):
                trace = spec["data"][0]
                z = plotly_array(trace["z"]).astype(np.float64)
                out[prefix] = z.reshape(len(plotly_array(trace["y"])), -1)
                out[prefix + "title"] = title
    return out


def sentence(at: AppTest) -> str:
    """The comparison's sentence as a reader sees it (Markdown escapes removed)."""
    shown = next(m.value for m in at.markdown if "What differs most" in m.value)
    return shown.replace("\\", "")


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row softmax with −∞ for blocked keys (no fully blocked rows in these tests)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def assert_drawn(shown: dict, a: np.ndarray, b: np.ndarray, atol: float = 2e-7) -> None:
    """A, B and B − A on the page equal the independently computed patterns (float32 drawn)."""
    np.testing.assert_allclose(shown[A], a, atol=atol)
    np.testing.assert_allclose(shown[B], b, atol=atol)
    np.testing.assert_allclose(shown[DIFFERENCE], b - a, atol=2 * atol)


def largest_cell(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    return np.unravel_index(np.abs(b - a).argmax(), a.shape)


# -- masking: causal off and on -------------------------------------------------------------------

MASK_PAGE = "pages/masking_lab.py"
SENTENCE = ("the", "cat", "sat", "on", "the", "mat", "and", "slept")


def test_masking_compares_causal_off_and_on():
    at = open_page(MASK_PAGE)
    assert not compared(at), "the comparison is opt-in: closed, it draws nothing"
    at.session_state["masking.cmp"] = True
    at.run()
    n = 6
    q, k, _ = np.random.default_rng(0).standard_normal((3, n, 4))
    scores = q @ k.T / 2.0  # √d_k = √4
    off = softmax_rows(scores)
    on = softmax_rows(np.where(np.tril(np.ones((n, n), bool)), scores, -np.inf))
    shown = compared(at)
    assert_drawn(shown, off, on)
    i, j = largest_cell(off, on)
    assert f"query {i + 1} “{SENTENCE[i]}” → key {j + 1} “{SENTENCE[j]}”" in sentence(at)
    assert at.query_params["cmp"] == "1"  # the link reopens it


def test_masking_compare_keeps_the_other_kinds_in_both():
    # Padding at position 2 in both A and B; causal only in B.
    at = open_page(MASK_PAGE, {"kinds": "padding", "pad": "2", "n": "4", "cmp": "1"})
    n = 4
    q, k, _ = np.random.default_rng(0).standard_normal((3, n, 4))
    scores = q @ k.T / 2.0
    keep = np.ones((n, n), bool)
    keep[:, 1] = False
    off = softmax_rows(np.where(keep, scores, -np.inf))
    on = softmax_rows(np.where(keep & np.tril(np.ones((n, n), bool)), scores, -np.inf))
    assert_drawn(compared(at), off, on)


# -- multi-head: two heads ------------------------------------------------------------------------

MHA_PAGE = "pages/multi_head.py"


def head_weights(tokens: list[str], d_model: int, heads: int, seed: int) -> np.ndarray:
    """Every head's weights `(head, q_pos, k_pos)` in NumPy: Q = X W_Qᵀ + b_Q, cut into heads."""
    from attention_core import init_multi_head_params
    from attention_core.reference import token_embeddings

    x = token_embeddings(tokens, d_model, seed)
    p = init_multi_head_params(d_model, heads, seed)
    d_head = d_model // heads
    q = (x @ p.w_q.T + p.b_q).reshape(len(tokens), heads, d_head).transpose(1, 0, 2)
    k = (x @ p.w_k.T + p.b_k).reshape(len(tokens), heads, d_head).transpose(1, 0, 2)
    return softmax_rows(q @ k.transpose(0, 2, 1) / np.sqrt(d_head))


def test_multi_head_compares_two_heads_and_keeps_them_in_the_link():
    tokens = "the cat sat on the mat".split()
    at = open_page(MHA_PAGE, {"cmp": "1"})
    weights = head_weights(tokens, 8, 4, 0)
    assert_drawn(compared(at), weights[0], weights[1], atol=1e-6)  # heads 1 and 2 by default
    at.selectbox(key="multi_head.cmp_a").set_value(4).run()
    at.selectbox(key="multi_head.cmp_b").set_value(3).run()
    shown = compared(at)
    assert shown[A + "title"] == "A: head 4" and shown[B + "title"] == "B: head 3"
    assert_drawn(shown, weights[3], weights[2], atol=1e-6)
    i, j = largest_cell(weights[3], weights[2])
    assert f"query {i + 1} “{tokens[i]}” → key {j + 1} “{tokens[j]}”" in sentence(at)
    link = {name: at.query_params[name] for name in ("cmp", "cmp_a", "cmp_b")}
    assert link == {"cmp": "1", "cmp_a": "4", "cmp_b": "3"}
    # The link reopens the same comparison in a fresh session.
    assert_drawn(compared(open_page(MHA_PAGE, link)), weights[3], weights[2], atol=1e-6)


# -- positional encoding: two encodings of the same sentence --------------------------------------

PE_PAGE = "pages/positional_encoding.py"


def sentence_weights(tokens: list[str], d_model: int, seed: int, sinusoidal: bool) -> np.ndarray:
    """One self-attention head on embeddings (+ PE_{p,2i} = sin(p/10000^(2i/d)), PE_{p,2i+1} =
    cos(...)), in NumPy."""
    from attention_core import init_multi_head_params
    from attention_core.reference import token_embeddings

    x = token_embeddings(tokens, d_model, seed)
    if sinusoidal:
        p = np.arange(len(tokens))[:, None]
        angle = p / 10000 ** (np.arange(0, d_model, 2) / d_model)  # (pos, d_model / 2)
        x = x + np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(len(tokens), d_model)
    w = init_multi_head_params(d_model, 1, seed)
    q, k = x @ w.w_q.T + w.b_q, x @ w.w_k.T + w.b_k
    return softmax_rows(q @ k.T / np.sqrt(d_model))


def test_positional_compares_no_positions_with_sinusoidal():
    tokens = ["I", "love", "AI"]
    at = open_page(PE_PAGE, {"cmp": "1"})
    none, sinusoidal = (sentence_weights(tokens, 4, 0, flag) for flag in (False, True))
    shown = compared(at)
    assert shown[A + "title"] == "A: none positions"
    assert_drawn(shown, none, sinusoidal, atol=1e-6)
    # The same encoding twice: nothing differs, and the sentence says so.
    at.selectbox(key="positional.cmp_b").set_value("none").run()
    np.testing.assert_array_equal(compared(at)[DIFFERENCE], 0)
    assert "the same pattern" in sentence(at)
    assert at.query_params["cmp_b"] == "none"


# -- scaled dot-product: divided by √d_k or not ---------------------------------------------------

SDPA_PAGE = "pages/sdpa_steps.py"
# The hand-worked preset: Q·Kᵀ = [[1, 1, 0], [1, 0, 1], [2, 1, 1]], d_k = 2.
THREE_TOKEN_SCORES = np.array([[1.0, 1, 0], [1, 0, 1], [2, 1, 1]])


def test_sdpa_compares_scaled_and_unscaled():
    at = open_page(SDPA_PAGE, {"cmp": "1"})
    scaled, unscaled = (
        softmax_rows(THREE_TOKEN_SCORES / np.sqrt(2)),
        softmax_rows(THREE_TOKEN_SCORES),
    )
    shown = compared(at)
    assert shown[A + "title"] == "A: divided by √2" and shown[B + "title"] == "B: not scaled"
    assert_drawn(shown, scaled, unscaled)
    # Query 3 "sat" scores 2 on "the" and 1 on the others: e²/(e² + 2e) = 0.5761 unscaled,
    # e^√2/(e^√2 + 2e^(1/√2)) = 0.5035 scaled, the largest of the nine changes.
    assert "query 3 “sat” → key 1 “the”: 0.503 in divided by √2, 0.576 in not scaled" in (
        sentence(at)
    )
    # With the causal mask both sides are masked: row 1 sees only itself, in A and in B.
    at.toggle(key="scaled_dot_product.causal").set_value(True).run()
    causal = np.where(np.tril(np.ones((3, 3), bool)), THREE_TOKEN_SCORES, -np.inf)
    assert_drawn(compared(at), softmax_rows(causal / np.sqrt(2)), softmax_rows(causal))


def test_sdpa_compare_needs_the_dot_product():
    at = open_page(SDPA_PAGE, {"cmp": "1", "scoring": "cosine"})
    assert not compared(at)
    assert any("Only the dot product is divided by √d_k" in info.value for info in at.info)
    assert not at.exception


# -- the real model: two heads, two layers --------------------------------------------------------

TIRED = "The animal didn't cross the street because it was too tired."


def test_real_model_compares_two_heads_of_two_layers():
    from attention_core.models import load_bert

    trace = load_bert().trace(TIRED)  # the model's own forward pass, outside the page's caches
    weights = trace.attention_weights.astype(np.float64)  # (layer, head, n, n)
    at = open_model_page("pages/real_model.py", {"cmp": "1"}, timeout=180)
    shown = compared(at)
    # A: the page's head (layer 4, head 2); B: layer 1, head 1 by default.
    assert shown[A + "title"] == "A: layer 4 head 2"
    assert_drawn(shown, weights[3, 1], weights[0, 0], atol=1e-6)
    at.select_slider(key="pretrained.cmp_layer").set_value(6).run()
    at.select_slider(key="pretrained.cmp_head").set_value(12).run()
    a, b = weights[3, 1], weights[5, 11]
    assert_drawn(compared(at), a, b, atol=1e-6)
    i, j = largest_cell(a, b)
    tokens = trace.tokens
    assert f"query {i + 1} “{tokens[i]}” → key {j + 1} “{tokens[j]}”" in sentence(at)
    tv = 0.5 * np.abs(b - a).sum(axis=1)
    assert f"total variation distance of {tv.max():.3f}" in sentence(at)
    assert {n: at.query_params[n] for n in ("cmp_layer", "cmp_head")} == {
        "cmp_layer": "6",
        "cmp_head": "12",
    }


# -- what every comparison shares -----------------------------------------------------------------


def test_the_maps_are_described_and_the_difference_names_what_differs_most():
    at = open_page(MHA_PAGE, {"cmp": "1"})
    drawn = {}  # title: (figure JSON, text alternative)
    for chart in at.main.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        drawn[(spec["layout"].get("title") or {}).get("text", "")] = (spec, chart.proto.alt)
    assert drawn["A: head 1"][1].startswith("A: head 1, 6 queries × 6 keys")
    # The difference map is read aloud with the range and the page's sentence.
    spec, alt = drawn[DIFFERENCE]
    assert alt.startswith("B − A, 6 queries × 6 keys: values run from")
    assert alt.endswith(sentence(at).split("What differs most.** ")[1])
    # Diverging, symmetric around 0: zmin = −zmax = the largest |B − A|; A and B fixed 0..1.
    heat = spec["data"][0]
    reach = np.abs(compared(at)[DIFFERENCE]).max()
    assert heat["zmax"] == pytest.approx(reach, rel=1e-6) and heat["zmin"] == -heat["zmax"]
    assert heat["colorscale"][0][1] == "#b35806"  # the orange end: weight lost
    for name in ("A: head 1", "B: head 2"):
        assert (drawn[name][0]["data"][0]["zmin"], drawn[name][0]["data"][0]["zmax"]) == (0, 1)


def _compare_mismatched_shapes():
    import numpy as np

    from ui.widgets import compare

    compare.show(np.eye(2), np.ones((2, 3)) / 3, names=("head 1", "head 2"),
                 query_labels=["a", "b"], key_labels=["x", "y"], filename="bad")  # fmt: skip


def test_patterns_that_do_not_match_give_a_clear_message_not_a_traceback():
    at = AppTest.from_function(_compare_mismatched_shapes).run()
    assert not at.exception
    (error,) = at.error
    assert "head 1 has shape (2, 2) (queries × keys) but head 2 has (2, 3)" in error.value
    assert not at.main.get("plotly_chart")


def test_a_bad_link_value_is_explained_and_the_comparison_stays_closed():
    at = open_page(MASK_PAGE, {"cmp": "maybe"})
    assert not compared(at)
    assert any("`cmp=maybe` was ignored" in w.value for w in at.warning)


def test_a_choice_in_the_comparison_reruns_only_its_fragment_and_the_link_follows():
    from tests.fragment_reruns import change_in_fragment

    full, moved, fragment_id = change_in_fragment(
        "multi-head", "cmp=1", "Head B", ("string_value", "head 3")
    )
    assert fragment_id  # the choice lives in a fragment...
    assert moved.elements < full.elements / 4  # ...so only the comparison was sent again
    assert moved.query_string == "cmp=1&cmp_b=3"
    assert "chart: B: head 3" in moved.texts and "chart: A: head 1" in moved.texts
