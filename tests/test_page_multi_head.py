"""The multi-head page: every number shown is checked against attention_core or a formula here."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core import (
    causal_mask,
    head_statistics,
    init_multi_head_params,
    multi_head_attention,
)
from attention_core.reference import token_embeddings
from harness.app_pages import ROOT
from tests.plotly_json import figures, plotly_array
from ui.widgets.editors import editor_widget_key

SENTENCE = "the cat sat on the mat".split()


def open_page(params: dict[str, str] | None = None) -> AppTest:
    """The app, switched to the multi-head page, with `params` in the link it is opened with."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.switch_page("pages/multi_head.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def decode(values) -> np.ndarray:
    return plotly_array(values).astype(np.float64)


def annotations(spec: dict) -> list[str]:
    return [a.get("text", "") for a in spec["layout"].get("annotations", [])]


def title(spec: dict) -> str:
    return (spec["layout"].get("title") or {}).get("text") or ""


def pattern_grid(at: AppTest) -> tuple[list[str], np.ndarray]:
    """Panel titles and the stacked z of the small multiples (heads, then their average): a
    figure per panel, the heads' right before the average's."""
    specs = figures(at)
    titles = [title(s).replace("<b>", "").replace("</b>", "") for s in specs]
    last = titles.index("average of the heads")
    first = last
    while first > 0 and titles[first - 1].startswith("head "):
        first -= 1
    panels = specs[first : last + 1]
    return titles[first : last + 1], np.stack(
        [decode(spec["data"][0]["z"]) for spec in panels]
    ).astype(np.float64)


def flow_picture(at: AppTest) -> ET.Element:
    """The flow diagram: the page's one inline SVG, parsed (so it is well-formed XML)."""
    (region,) = [m.value for m in at.markdown if "<svg" in m.value]
    (svg,) = ET.fromstring(region)  # in a region that scrolls sideways on a narrow screen
    return svg


SVG = "{http://www.w3.org/2000/svg}"


def boxes_and_labels(picture: ET.Element):
    """Each box as ((x0, y0, x1, y1), its lines of text); each arrow label's (x, y, text)."""
    children = list(picture)
    boxes = [
        (
            tuple(float(rect.get(a)) for a in ("x", "y", "width", "height")),
            [t.text for t in following.iter(f"{SVG}tspan")],
        )
        for rect, following in itertools.pairwise(children)
        if rect.tag == f"{SVG}rect"
    ]
    boxes = [((x, y, x + w, y + h), lines) for (x, y, w, h), lines in boxes]
    labels = [
        (float(t.get("x")), float(t.get("y")), t.text)
        for t in children
        if t.tag == f"{SVG}text" and t.get("x") is not None
    ]
    return boxes, labels


def chart_by_key(at: AppTest, key_part: str) -> dict:
    (chart,) = [c for c in at.main.get("plotly_chart") if key_part in c.proto.id]
    return json.loads(chart.proto.spec)


def figure_titled(at: AppTest, start: str) -> dict:
    (spec,) = [s for s in figures(at) if title(s).startswith(start)]
    return spec


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def stats_table(at: AppTest):
    (frame,) = [d.value for d in at.dataframe if "head" in d.value.columns]
    return frame


def expected_steps(
    tokens=SENTENCE, d_model=8, heads=4, seed=0, causal=False, kv_tokens=None, x=None
):
    x_q = token_embeddings(tokens, d_model, seed) if x is None else x
    x_kv = None if kv_tokens is None else token_embeddings(kv_tokens, d_model, seed)
    k_len = len(tokens if kv_tokens is None else kv_tokens)
    mask = causal_mask(len(tokens), k_len) if causal else None
    params = init_multi_head_params(d_model, heads, seed)
    return multi_head_attention(x_q, x_kv, params=params, num_heads=heads, mask=mask)


def test_default_page_shows_the_sizes_and_every_heads_pattern():
    at = open_page()
    assert not at.error
    shown = metrics(at)
    assert shown["d_model"] == "8"
    assert shown["heads"] == "4"
    assert shown["d_head"] == "2"
    # 4·d_model² + 4·d_model with d_model = 8: 256 + 32.
    assert shown["parameters"] == "288"

    titles, z = pattern_grid(at)
    assert titles == ["head 1", "head 2", "head 3", "head 4", "average of the heads"]
    weights = expected_steps().attention.weights
    np.testing.assert_allclose(z[:4], weights, atol=1e-6)
    # The last panel is the plain mean over heads, and still a distribution per query.
    np.testing.assert_allclose(z[4], weights.sum(axis=0) / 4, atol=1e-6)
    np.testing.assert_allclose(z.sum(axis=-1), 1.0, atol=1e-5)


def test_changing_the_number_of_heads_changes_the_grid_and_the_url():
    at = open_page()
    at.select_slider(key="multi_head.heads").set_value(2).run()
    assert not at.exception
    titles, z = pattern_grid(at)
    assert titles == ["head 1", "head 2", "average of the heads"]
    np.testing.assert_allclose(z[:2], expected_steps(heads=2).attention.weights, atol=1e-6)
    assert metrics(at)["d_head"] == "4"
    assert metrics(at)["parameters"] == "288"  # the same parameters, split differently
    assert at.query_params["heads"] == "2"

    at.select_slider(key="multi_head.heads").set_value(8).run()
    titles, z = pattern_grid(at)
    assert len(titles) == 9 and z.shape == (9, 6, 6)
    np.testing.assert_allclose(z[:8], expected_steps(heads=8).attention.weights, atol=1e-6)


def test_only_divisors_of_d_model_are_offered_and_a_stale_head_count_moves_to_the_nearest():
    at = open_page()
    assert list(at.select_slider(key="multi_head.heads").options) == ["1", "2", "4", "8"]
    at.select_slider(key="multi_head.heads").set_value(8).run()
    at.select_slider(key="multi_head.d_model").set_value(12).run()
    assert not at.exception
    assert list(at.select_slider(key="multi_head.heads").options) == ["1", "2", "3", "4", "6", "12"]
    # 8 does not divide 12; the nearest count that does is 6.
    assert at.select_slider(key="multi_head.heads").value == 6
    titles, z = pattern_grid(at)
    assert len(titles) == 7
    np.testing.assert_allclose(
        z[:6], expected_steps(d_model=12, heads=6).attention.weights, atol=1e-6
    )
    assert metrics(at)["parameters"] == str(4 * 12**2 + 4 * 12)


def test_zooming_a_head_shows_that_heads_numbers():
    at = open_page()
    at.selectbox(key="multi_head.head").set_value(3).run()
    assert not at.exception
    assert any("Head 3, step by step" in s.value for s in at.header)
    head = expected_steps().attention
    scores = decode(chart_by_key(at, "multi_head.zoom.h3.scores")["data"][0]["z"])
    weights = decode(chart_by_key(at, "multi_head.zoom.h3.weights")["data"][0]["z"])
    output = decode(chart_by_key(at, "multi_head.zoom.h3.output")["data"][0]["z"])
    np.testing.assert_allclose(scores, head.scores[2], atol=1e-5)
    np.testing.assert_allclose(weights, head.weights[2], atol=1e-6)
    np.testing.assert_allclose(output, head.output[2], atol=1e-5)
    # Head 3's scores are its own q·k, from columns 5..6 of Q and K (d_head = 2).
    steps = expected_steps()
    np.testing.assert_allclose(scores, steps.q[:, 4:6] @ steps.k[:, 4:6].T, atol=1e-5)
    # The grid highlights the zoomed head.
    assert "<b>head 3</b>" in [title(s) for s in figures(at)]
    assert at.query_params["head"] == "3"


def test_causal_toggle_hides_the_future_in_every_head_and_in_the_statistics():
    at = open_page()
    at.toggle(key="multi_head.causal").set_value(True).run()
    assert not at.exception
    _, z = pattern_grid(at)
    future = ~causal_mask(6).astype(bool)
    assert np.all(z[:, future] == 0)
    np.testing.assert_allclose(z[:4], expected_steps(causal=True).attention.weights, atol=1e-6)
    table = stats_table(at)
    # Query 1 can only see key 1, so it has entropy 0 and puts weight 1 on the first token.
    weights = expected_steps(causal=True).attention.weights
    entropy = -np.sum(
        np.where(weights > 0, weights * np.log(np.where(weights > 0, weights, 1)), 0), axis=-1
    )
    assert np.all(entropy[:, 0] == 0)
    np.testing.assert_allclose(table["entropy (nats)"][:4], entropy.mean(axis=-1), atol=1e-9)
    np.testing.assert_allclose(table["→ first token"][:4], weights[..., 0].mean(axis=-1))
    assert at.query_params["causal"] == "1"


def test_statistics_table_matches_formulas_and_the_average_row():
    at = open_page()
    table = stats_table(at)
    weights = expected_steps().attention.weights  # (4, 6, 6)
    assert list(table["head"]) == ["head 1", "head 2", "head 3", "head 4", "average of the heads"]
    entropy = -np.sum(weights * np.log(weights), axis=-1).mean(axis=-1)
    np.testing.assert_allclose(table["entropy (nats)"][:4], entropy, atol=1e-9)
    np.testing.assert_allclose(table["largest weight"][:4], weights.max(axis=-1).mean(axis=-1))
    prev = np.array([[w[i, i - 1] for i in range(1, 6)] for w in weights]).mean(axis=1)
    np.testing.assert_allclose(table["→ previous token"][:4], prev)
    np.testing.assert_allclose(
        table["→ itself"][:4], np.diagonal(weights, axis1=1, axis2=2).mean(axis=1)
    )
    average = weights.mean(axis=0)
    avg_entropy = -np.sum(average * np.log(average), axis=-1).mean()
    assert table["entropy (nats)"].iloc[4] == pytest.approx(avg_entropy, abs=1e-9)
    # Entropy is concave: the average pattern is never sharper than the heads on average.
    assert avg_entropy >= entropy.mean()
    stats = head_statistics(weights)
    np.testing.assert_allclose(table["→ first token"][:4], stats.first_token)
    note = [m.value for m in at.markdown if "Averaging hides" in m.value]
    assert note and f"{avg_entropy:.3f}" in note[0]


def test_cross_attention_with_different_lengths():
    at = open_page()
    at.radio(key="multi_head.attention").set_value("cross").run()
    at.text_input(key="multi_head.kv_sentence").input("a dog slept there").run()
    assert not at.exception
    _, z = pattern_grid(at)
    assert z.shape == (5, 6, 4)  # 4 heads + average, 6 queries, 4 keys
    kv = "a dog slept there".split()
    np.testing.assert_allclose(z[:4], expected_steps(kv_tokens=kv).attention.weights, atol=1e-6)
    # Cross-attention with the causal mask: the triangle starts at the top-left corner.
    at.toggle(key="multi_head.causal").set_value(True).run()
    _, z = pattern_grid(at)
    np.testing.assert_allclose(
        z[:4], expected_steps(kv_tokens=kv, causal=True).attention.weights, atol=1e-6
    )
    assert np.all(z[:, 0, 1:] == 0)
    assert at.query_params["attention"] == "cross"
    # The number-of-tokens mode: 3 queries against 5 key/value tokens.
    at.radio(key="multi_head.source").set_value("count").run()
    at.slider(key="multi_head.n").set_value(3).run()
    at.slider(key="multi_head.n_kv").set_value(5).run()
    assert not at.exception
    _, z = pattern_grid(at)
    expected = expected_steps(
        tokens=["t1", "t2", "t3"], kv_tokens=[f"s{i}" for i in range(1, 6)], causal=True
    )
    np.testing.assert_allclose(z[:4], expected.attention.weights, atol=1e-6)


def torch_differences(causal=False, d_model=8, heads=4) -> tuple[float, float]:
    """Largest |ours − torch| of output and weights, nn.MultiheadAttention run here in float32."""
    import torch

    steps = expected_steps(d_model=d_model, heads=heads, causal=causal)
    p = init_multi_head_params(d_model, heads, 0)
    mha = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([p.w_q, p.w_k, p.w_v])))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([p.b_q, p.b_k, p.b_v])))
        mha.out_proj.weight.copy_(torch.from_numpy(p.w_o))
        mha.out_proj.bias.copy_(torch.from_numpy(p.b_o))
        x = torch.from_numpy(token_embeddings(SENTENCE, d_model, 0)).float()[None]
        n = len(SENTENCE)
        blocked = torch.ones(n, n, dtype=torch.bool).triu(1) if causal else None  # True = blocked
        out, w = mha(x, x, x, attn_mask=blocked, average_attn_weights=False)
    output = np.abs(steps.output - out[0].double().numpy()).max()
    weights = np.abs(steps.attention.weights - w[0].double().numpy()).max()
    return float(output), float(weights)


def test_the_torch_comparison_shows_the_differences_torch_gives_here():
    at = open_page()
    assert "largest |ours − torch|, output" not in metrics(at)  # only when asked
    at.toggle(key="multi_head.torch").set_value(True).run()
    shown = metrics(at)
    output, weights = torch_differences()
    # Ours is float64 and torch float32, so the output differs by float32 rounding (~1e-7),
    # not 0. Which rounding errors torch makes depends on its code path (fused or separate
    # input projections), so the page's figure is checked to be the same size as the one
    # measured here, within a factor 2: a 0, a wrong quantity or a float64-vs-float64 figure
    # (~1e-16) all fail.
    assert 1e-9 < output < 1e-5 and 1e-10 < weights < 1e-5
    assert output / 2 <= float(shown["largest |ours − torch|, output"]) <= 2 * output
    assert weights / 2 <= float(shown["largest |ours − torch|, weights"]) <= 2 * weights
    at.select_slider(key="multi_head.d_model").set_value(64).run()
    at.select_slider(key="multi_head.heads").set_value(16).run()
    at.toggle(key="multi_head.causal").set_value(True).run()
    output, _ = torch_differences(causal=True, d_model=64, heads=16)
    assert 1e-9 < output < 1e-5
    assert output / 2 <= float(metrics(at)["largest |ours − torch|, output"]) <= 2 * output


def test_without_torch_the_page_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    at = open_page()
    assert not at.exception
    assert "largest |ours − torch|, output" not in metrics(at)
    assert any("pip install torch==2.13.0" in i.value for i in at.info)
    assert any(c.value == "pip install torch==2.13.0" for c in at.code)


def test_the_split_picture_and_the_flow_diagram_carry_the_shapes():
    at = open_page()
    # Q and its split into heads: a figure each, side by side on a wide screen.
    (wide,) = [s for s in figures(at) if "Q: (pos, d_model) = (6, 8)" in annotations(s)]
    (split,) = [s for s in figures(at) if any("split_heads(Q)" in a for a in annotations(s))]
    assert annotations(split) == ["split_heads(Q):<br>(head, pos, d_head) = (4, 6, 2)"]
    steps = expected_steps()
    np.testing.assert_allclose(decode(wide["data"][0]["z"]), steps.q, atol=1e-6)
    stacked = decode(split["data"][0]["z"]).astype(np.float64)
    # Head h's block sits at rows 7h..7h+5 (one blank row between heads) = Q[:, 2h:2h+2].
    for h in range(4):
        np.testing.assert_allclose(
            stacked[7 * h : 7 * h + 6], steps.q[:, 2 * h : 2 * h + 2], atol=1e-6
        )
    assert len(wide["layout"]["shapes"]) == len(split["layout"]["shapes"]) == 4  # a frame a head

    at.radio(key="multi_head.split").set_value("V").run()
    (wide,) = [s for s in figures(at) if any(a.startswith("V: (pos") for a in annotations(s))]
    np.testing.assert_allclose(decode(wide["data"][0]["z"]), steps.v, atol=1e-6)

    picture = flow_picture(at)
    boxes, labels = boxes_and_labels(picture)
    assert [lines for _, lines in boxes] == [
        ["X"],
        ["Q = X W_Qᵀ + b_Q"],
        ["K = X W_Kᵀ + b_K"],
        ["V = X W_Vᵀ + b_V"],
        ["split_heads", "(pos, d_model) →", "(head, pos, d_head)"],
        *([f"head {h}", "softmax(q kᵀ/√2) v"] for h in range(1, 5)),
        ["concat", "(4, 6, 2)", "→ (6, 8)"],
        ["output =", "concat W_Oᵀ + b_O"],
    ]
    # X into Q, K, V and those into split: (pos, d_model); into each head q, k, v (pos, d_head);
    # out of each head (pos, d_head); concat into the output (pos, d_model).
    assert sorted(text for _, _, text in labels) == sorted(
        ["(6, 8)"] * 6 + ["q, k, v (6, 2)"] * 4 + ["(6, 2)"] * 4 + ["(6, 8)"]
    )
    assert "X (6, 8) is projected to Q (6, 8)" in picture.get("aria-label")
    assert "4 heads of d_head 2" in picture.get("aria-label")


def test_the_flow_diagram_of_eight_cross_attention_heads_draws_six_and_keeps_apart():
    at = open_page({"heads": "8", "d_model": "16", "attention": "cross", "causal": "1"})
    boxes, labels = boxes_and_labels(flow_picture(at))
    texts = [lines for _, lines in boxes]
    assert texts[:2] == [["X (queries)"], ["X_kv", "(keys, values)"]]
    # Heads 1-5, then the last; the two between are one line of text without a box.
    assert [lines[0] for lines in texts if lines[0].startswith("head")] == [
        "head 1", "head 2", "head 3", "head 4", "head 5", "head 8"
    ]  # fmt: skip
    assert all(lines[1:] == ["softmax(q kᵀ/√2) v", "causal mask"]
               for lines in texts if lines[0].startswith("head"))  # fmt: skip
    assert ["concat", "(8, 6, 2)", "→ (6, 16)"] in texts
    (more,) = [t for t in flow_picture(at).iter(f"{SVG}tspan") if "more" in t.text]
    assert more.text == "… 2 more heads"
    shown = {text for _, _, text in labels}
    assert {"q (6, 2)", "k, v (4, 2)", "(6, 16)", "(4, 16)"} <= shown
    # No two boxes overlap, and no arrow's label sits on a box (its text is 12 px high).
    rects = [rect for rect, _ in boxes]
    for a, b in itertools.combinations(rects, 2):
        assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    for x, y, text in labels:
        for x0, y0, x1, y1 in rects:
            assert not (x0 < x < x1 and y0 < y and y - 12 < y1), (text, x, y)


def test_concat_and_output_are_the_model_steps():
    at = open_page()
    steps = expected_steps()
    np.testing.assert_allclose(
        decode(figure_titled(at, "concat (6, 8)")["data"][0]["z"]), steps.concat, atol=1e-6
    )
    output = decode(figure_titled(at, "output (6, 8)")["data"][0]["z"]).astype(np.float64)
    params = init_multi_head_params(8, 4, 0)
    np.testing.assert_allclose(output, steps.concat @ params.w_o.T + params.b_o, atol=1e-5)
    (w_o,) = [s for s in figures(at) if annotations(s) == ["<b>W_O</b> (8, 8)"]]
    np.testing.assert_allclose(decode(w_o["data"][0]["z"]), params.w_o, atol=1e-6)
    # W_O's columns are framed per head (4 heads of 2 features): x from -0.5 in steps of 2.
    assert [b["x0"] for b in w_o["layout"]["shapes"]] == [-0.5, 1.5, 3.5, 5.5]
    # W_Q, W_K, W_V: a panel each, side by side where the screen is wide.
    start = [annotations(s) for s in figures(at)].index(["<b>W_Q</b> (8, 8)"])
    w_qkv = figures(at)[start : start + 3]
    assert [annotations(s) for s in w_qkv] == [[f"<b>W_{n}</b> (8, 8)"] for n in "QKV"]
    for spec, weight in zip(w_qkv, (params.w_q, params.w_k, params.w_v), strict=True):
        np.testing.assert_allclose(decode(spec["data"][0]["z"]), weight, atol=1e-6)
        # Framed by rows: head h owns output rows 2h, 2h+1.
        assert [b["y0"] for b in spec["layout"]["shapes"]] == [-0.5, 1.5, 3.5, 5.5]


def test_typing_into_x_changes_the_result_and_the_link_keeps_it():
    at = open_page()
    key = editor_widget_key(at.session_state, "multi_head.x")
    at.session_state[key] = {"edited_rows": {1: {"f1": 5.0}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    x = token_embeddings(SENTENCE, 8, 0)
    x[1, 0] = 5.0
    _, z = pattern_grid(at)
    np.testing.assert_allclose(z[:4], expected_steps(x=x).attention.weights, atol=1e-6)
    link = at.query_params["x"]
    assert link.split(";")[1].split(",")[0] == "5"

    # A fresh session opened with that link shows the typed matrix.
    again = open_page({"x": link})
    _, z = pattern_grid(again)
    np.testing.assert_allclose(z[:4], expected_steps(x=x).attention.weights, atol=1e-6)
    assert again.query_params["x"] == link


def test_a_bad_cell_keeps_the_last_valid_x_and_says_so():
    at = open_page()
    key = editor_widget_key(at.session_state, "multi_head.x")
    at.session_state[key] = {"edited_rows": {0: {"f2": None}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert any("X has a cell" in e.value for e in at.error)
    assert any("stale" in w.value for w in at.warning)
    _, z = pattern_grid(at)
    np.testing.assert_allclose(z[:4], expected_steps().attention.weights, atol=1e-6)


def test_a_deep_link_restores_the_whole_view():
    at = open_page(
        {
            "sentence": "one two three four five",
            "d_model": "12",
            "heads": "3",
            "seed": "7",
            "causal": "1",
            "attention": "cross",
            "kv_sentence": "uno dos tres",
            "head": "2",
            "split": "K",
        }
    )
    assert not at.warning, [w.value for w in at.warning]
    assert at.text_input(key="multi_head.sentence").value == "one two three four five"
    assert at.select_slider(key="multi_head.d_model").value == 12
    assert at.select_slider(key="multi_head.heads").value == 3
    assert at.number_input(key="multi_head.seed").value == 7
    assert at.toggle(key="multi_head.causal").value is True
    assert at.radio(key="multi_head.attention").value == "cross"
    assert at.selectbox(key="multi_head.head").value == 2
    assert at.radio(key="multi_head.split").value == "K"
    expected = expected_steps(
        tokens="one two three four five".split(),
        kv_tokens=["uno", "dos", "tres"],
        d_model=12,
        heads=3,
        seed=7,
        causal=True,
    )
    _, z = pattern_grid(at)
    np.testing.assert_allclose(z[:3], expected.attention.weights, atol=1e-6)
    weights = decode(chart_by_key(at, "multi_head.zoom.h2.weights")["data"][0]["z"])
    np.testing.assert_allclose(weights, expected.attention.weights[1], atol=1e-6)
    # The link is written back unchanged (only values that differ from the defaults).
    assert at.query_params["d_model"] == "12"
    assert at.query_params["kv_sentence"] == "uno dos tres"


@pytest.mark.parametrize(
    ("params", "refused"),
    [
        ({"source": "count", "n": "1000000000"}, "n=1000000000"),
        ({"d_model": "abc"}, "d_model=abc"),
        ({"heads": "5"}, "heads=5"),
        ({"seed": "-3"}, "seed=-3"),
        ({"head": "99"}, "head=99"),
        ({"attention": "both"}, "attention=both"),
        ({"sentence": "w " * 5000}, "sentence"),
        ({"x": "1,2;3"}, "x"),
        ({"x": "1,2;3,4"}, "x"),
    ],
)
def test_crafted_links_give_a_notice_and_the_defaults(params, refused):
    at = open_page(params)
    assert not at.exception
    assert any(refused in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.select_slider(key="multi_head.d_model").value == 8
    assert at.select_slider(key="multi_head.heads").value == 4
    tokens = [f"t{i}" for i in range(1, 7)] if params.get("source") == "count" else SENTENCE
    _, z = pattern_grid(at)
    np.testing.assert_allclose(z[:4], expected_steps(tokens=tokens).attention.weights, atol=1e-6)


def test_sentence_problems_are_explained_next_to_the_input():
    at = open_page()
    at.text_input(key="multi_head.sentence").input("   ").run()
    assert not at.exception
    assert any("The sentence is empty" in e.value for e in at.error)
    _, z = pattern_grid(at)
    np.testing.assert_allclose(z[:4], expected_steps().attention.weights, atol=1e-6)

    words = [f"w{i}" for i in range(15)]
    at.text_input(key="multi_head.sentence").input(" ".join(words)).run()
    assert any("has 15 words" in e.value for e in at.error)
    _, z = pattern_grid(at)
    assert z.shape[1:] == (12, 12)
    np.testing.assert_allclose(
        z[:4], expected_steps(tokens=words[:12]).attention.weights, atol=1e-6
    )


def test_large_sizes_render_without_the_editor():
    at = open_page({"d_model": "64", "heads": "64", "source": "count", "n": "12"})
    assert not at.exception
    assert not any("token" in d.value.columns for d in at.dataframe)  # no X editor at 12 × 64
    titles, z = pattern_grid(at)
    assert len(titles) == 65
    np.testing.assert_allclose(
        z[:64],
        expected_steps(
            tokens=[f"t{i}" for i in range(1, 13)], d_model=64, heads=64
        ).attention.weights,
        atol=1e-6,
    )
    assert metrics(at)["d_head"] == "1"
    assert metrics(at)["parameters"] == f"{4 * 64**2 + 4 * 64:,}"
    at.toggle(key="multi_head.torch").set_value(True).run()
    assert math.isclose(float(metrics(at)["largest |ours − torch|, output"]), 0, abs_tol=1e-5)


def test_cross_attention_keys_and_values_can_be_typed_too():
    at = open_page({"attention": "cross"})
    key = editor_widget_key(at.session_state, "multi_head.xkv")
    at.session_state[key] = {"edited_rows": {2: {"f3": -4.5}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    kv = "a dog slept there".split()
    x_kv = token_embeddings(kv, 8, 0)
    x_kv[2, 2] = -4.5
    params = init_multi_head_params(8, 4, 0)
    expected = multi_head_attention(
        token_embeddings(SENTENCE, 8, 0), x_kv, params=params, num_heads=4
    )
    _, z = pattern_grid(at)
    np.testing.assert_allclose(z[:4], expected.attention.weights, atol=1e-6)
    assert at.query_params["xkv"].split(";")[2].split(",")[2] == "-4.5"
    assert "x" not in at.query_params  # X itself was not edited
    at.toggle(key="multi_head.torch").set_value(True).run()
    assert float(metrics(at)["largest |ours − torch|, output"]) < 1e-5


def test_controls_inside_fragments_update_their_pictures_and_the_link():
    at = open_page()
    at.selectbox(key="multi_head.head").set_value(3).run()
    assert any(s.value.endswith("6 · Head 3, step by step") for s in at.header)
    titles = [title(s) for s in figures(at)]
    assert titles[titles.index("head 1") + 2] == "<b>head 3</b>"
    at.radio(key="multi_head.split").set_value("K").run()
    (wide,) = [s for s in figures(at) if any(a.startswith("K: (pos") for a in annotations(s))]
    np.testing.assert_allclose(decode(wide["data"][0]["z"]), expected_steps().k, atol=1e-6)
    assert at.query_params["head"] == "3" and at.query_params["split"] == "K"


def test_a_plain_visit_does_not_import_torch_and_asking_does():
    # A fresh interpreter: this test process may have imported torch for other tests.
    script = (
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        "at = AppTest.from_file('app.py', default_timeout=120).run()\n"
        "at.switch_page('pages/multi_head.py').run()\n"
        "assert not at.exception, at.exception\n"
        "print('visit', 'torch' in sys.modules)\n"
        "at.toggle(key='multi_head.torch').set_value(True).run()\n"
        "print('asked', 'torch' in sys.modules)\n"
        "print('metric', any(m.label.startswith('largest |ours') for m in at.metric))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "visit False" in lines
    assert "asked True" in lines and "metric True" in lines
