"""The scaled dot-product page in AppTest: edits, toggles, presets, links, uploads, checks.

Expected numbers come from the hand-worked 3-token example (derivation in test_examples.py)
or from one-line NumPy formulas written here, never from the page's own code.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.lessons.presets import PRESETS, random_example
from attention_core.lessons.scaling import scaling_experiment
from tests.app_fragments import run_fragment
from tests.fragment_reruns import torch_after_a_plain_visit
from tests.plotly_json import plotly_array, tick_labels
from ui.widgets.editors import editor_widget_key
from ui.widgets.formats import example_to_json

ROOT = Path(__file__).resolve().parents[1]
PAGE = "pages/sdpa_steps.py"
STEPS = ("scores", "scaled", "masked", "weights", "output")

# The 3-token example by hand (see test_examples.py): row 1 weights [a, a, b], row 2 [a, b, a],
# row 3 [c, d, d], with e = e^(1/√2).
E = math.exp(1 / math.sqrt(2))
A, B = E / (2 * E + 1), 1 / (2 * E + 1)
C = math.exp(math.sqrt(2)) / (math.exp(math.sqrt(2)) + 2 * E)
D = E / (math.exp(math.sqrt(2)) + 2 * E)
HAND_WEIGHTS = np.array([[A, A, B], [A, B, A], [C, D, D]])
HAND_OUTPUT = np.array([[5, 5], [15 * A, 10 * B + 5 * A], [10 * C + 5 * D, 15 * D]])


def open_page(**params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figure(at: AppTest, key: str) -> dict:
    """The plotly figure drawn with widget key `key` (e.g. "scaled_dot_product.sqrt_dk.entropy")."""
    for chart in at.main.get("plotly_chart"):
        if chart.proto.id.endswith(key):
            return json.loads(chart.proto.spec)
    raise AssertionError(f"no chart {key}")


def cell_text(spec: dict) -> list[list[str]]:
    """The numbers written in a heatmap's cells (its "values" text layer), row by row."""
    layer = next(t for t in spec["data"] if t.get("name") == "values")
    cols = max(layer["x"]) + 1
    return [layer["text"][i : i + cols] for i in range(0, len(layer["text"]), cols)]


def z_values(spec: dict, trace: int = 0) -> np.ndarray:
    return array(spec["data"][trace]["z"])


def step_chart(at: AppTest, name: str) -> dict:
    """The pipeline's figure of step `name` ("scores", ..., "output")."""
    return figure(at, f"scaled_dot_product.pipeline.{name}.chart")


def step(at: AppTest, name: str) -> np.ndarray:
    return z_values(step_chart(at, name))


def sizes(at: AppTest) -> list[int]:
    """The four size sliders: [n_q, n_k, d_k, d_v]."""
    return [at.slider(key=f"scaled_dot_product.{n}").value for n in ("n_q", "n_k", "d_k", "d_v")]


def pipeline_count(at: AppTest) -> int:
    return sum(".pipeline." in chart.proto.id for chart in at.main.get("plotly_chart"))


def marks(at: AppTest, editor: str) -> list[str]:
    """The first row of the marked table drawn right after the answer table `editor`."""
    frames = list(at.dataframe)
    index = next(i for i, f in enumerate(frames) if f.proto.id.endswith(editor))
    return frames[index + 1].value.iloc[0].tolist()


def array(value) -> np.ndarray:
    return plotly_array(value).astype(np.float64)


def latex_text(at: AppTest) -> str:
    return "\n".join(element.value for element in at.latex)


def type_into(at: AppTest, editor: str, edits: dict) -> None:
    key = editor_widget_key(at.session_state, editor)
    at.session_state[key] = {"edited_rows": edits, "added_rows": [], "deleted_rows": []}
    at.run()


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_default_page_shows_the_hand_worked_example():
    at = open_page()
    np.testing.assert_allclose(step(at, "scores"), [[1, 1, 0], [1, 0, 1], [2, 1, 1]])
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)  # float32 in JSON
    np.testing.assert_allclose(step(at, "output"), HAND_OUTPUT, rtol=1e-6)
    cells = cell_text(step_chart(at, "weights"))
    assert cells[2] == ["0.5035", "0.2483", "0.2483"]
    hover = step_chart(at, "scores")["data"][0]["hovertext"]
    assert hover[0][1].endswith("q₁·k₂ = 1×1 + 0×0 = 1")
    assert any(c.value == "Row sums: the 1.0000, cat 1.0000, sat 1.0000" for c in at.caption)
    # "Explain one row" starts at query 1: e^(1/√2) = 2.0281, Z = 2·2.0281 + 1 = 5.0562.
    assert r"w_{1,1} &= \frac{2.0281}{5.0562} = 0.4011" in latex_text(at)
    assert r"&= [5,\ 5]" in latex_text(at)
    assert not at.error and not at.warning


def test_editing_a_q_cell_changes_the_weights():
    at = open_page()
    type_into(at, "scaled_dot_product.q", {0: {"d1": 5.0}})
    # q₁ = [5, 0]: scores [5, 5, 0], scaled 5/√2 = 3.5355 for k₁ and k₂ and 0 for k₃, so
    # weights e^3.5355/(2e^3.5355 + 1) = 0.49279 (twice) and 1/(2e^3.5355 + 1) = 0.01441.
    big = math.exp(5 / math.sqrt(2))
    expected = HAND_WEIGHTS.copy()
    expected[0] = [big / (2 * big + 1), big / (2 * big + 1), 1 / (2 * big + 1)]
    np.testing.assert_allclose(step(at, "weights"), expected, rtol=1e-6)
    assert cell_text(step_chart(at, "weights"))[0] == [
        "0.4928", "0.4928", "0.0144",
    ]  # fmt: skip
    # The hand-edited numbers go into the link, and the link brings them back.
    assert at.query_params["Q"] == "5,0;0,1;1,1"
    assert at.query_params["V"] == "10,0;0,10;5,5"
    again = open_page(**{name: at.query_params[name] for name in ("Q", "K", "V")})
    np.testing.assert_allclose(step(again, "weights"), expected, rtol=1e-6)
    assert not again.warning
    # The link held no token names, so the preset's name the rows.
    ticks = tick_labels(step_chart(again, "weights")["layout"]["yaxis"])
    assert ticks == ["the", "cat", "sat"]


def test_renamed_tokens_travel_in_the_link():
    at = open_page()
    type_into(at, "scaled_dot_product.k", {1: {"token": "dog"}})
    assert at.query_params["tk"] == "the,dog,sat"
    assert "tq" not in at.query_params  # only what was renamed
    assert at.query_params["K"] == "1,1;1,0;0,1"  # the numbers go with the names
    params = {name: at.query_params[name] for name in ("Q", "K", "V", "tk")}
    again = open_page(**params)
    layout = step_chart(again, "weights")["layout"]
    assert tick_labels(layout["xaxis"]) == ["the", "dog", "sat"]
    assert tick_labels(layout["yaxis"]) == ["the", "cat", "sat"]
    np.testing.assert_allclose(step(again, "weights"), HAND_WEIGHTS, rtol=1e-6)
    wrong_count = open_page(**{**params, "tk": "a,b"})
    assert any("`tk` does not name one token per row" in w.value for w in wrong_count.warning)


def test_causal_toggle_zeroes_the_upper_triangle():
    at = open_page()
    at.toggle(key="scaled_dot_product.causal").set_value(True).run()
    weights = step(at, "weights")
    assert (weights[np.triu_indices(3, 1)] == 0).all()
    # Row 2 sees k₁, k₂ with scaled scores 1/√2 and 0: e/(e + 1) and 1/(e + 1).
    np.testing.assert_allclose(weights[1, :2], [E / (E + 1), 1 / (E + 1)], rtol=1e-6)
    masked = step_chart(at, "masked")
    assert masked["data"][1]["name"] == "masked"  # the grey layer under the masked cells
    assert cell_text(masked)[0][1:] == ["−∞", "−∞"]
    np.testing.assert_allclose(step(at, "output")[0], [10, 0], rtol=1e-6)
    assert at.query_params["causal"] == "1"


def test_a_bad_cell_shows_a_message_keeps_the_last_result_and_no_traceback():
    at = open_page()
    # The table's number column turns typed text into an empty cell, as in the browser.
    type_into(at, "scaled_dot_product.q", {1: {"d2": "abc"}})
    assert not at.exception
    message = "Q has a cell that needs fixing: row 2 (“cat”), column d2 is empty"
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert any("stale" in w.value for w in at.warning)
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)
    type_into(at, "scaled_dot_product.k", {0: {"d1": None}})
    assert any("K has a cell that needs fixing" in e.value and "is empty" in e.value
               for e in at.error)  # fmt: skip


def test_check_my_work_marks_a_right_and_a_wrong_entry():
    at = open_page(check="1")
    assert at.session_state["scaled_dot_product.check"] is True
    at.session_state["scaled_dot_product.check.weights.3x3"] = {
        "edited_rows": {0: {"c1": 0.40, "c2": 0.43}}, "added_rows": [], "deleted_rows": [],
    }  # fmt: skip
    at.run()
    # The right weights are 0.4011 and 0.4011: 0.40 is within ±0.005, 0.43 is not.
    weights = "scaled_dot_product.check.weights.3x3"
    assert marks(at, weights) == ["✓ 0.4", "✗ 0.43", ""]
    assert any("1 of 2" in m.value for m in at.markdown)
    at.toggle(key="scaled_dot_product.check.reveal").set_value(True).run()
    assert marks(at, weights) == ["✓ 0.4", "✗ 0.43 → 0.4011", "0.1978"]
    at.select_slider(key="scaled_dot_product.check.decimals").set_value(1).run()
    assert marks(at, weights)[:2] == ["✓ 0.4", "✓ 0.43"]  # ±0.05 now


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_renders(preset):
    at = open_page()
    at.selectbox(key="scaled_dot_product.preset").set_value(preset).run()
    assert not at.exception and not at.error
    assert pipeline_count(at) == 5
    n_q, n_k, d_k, d_v = PRESETS[preset]
    assert sizes(at) == [n_q, n_k, d_k, d_v]
    np.testing.assert_allclose(step(at, "weights").sum(axis=1), 1, rtol=1e-6)
    assert step(at, "output").shape == (n_q, d_v)


def test_sentence_preset_uses_the_words_and_sharp_flat_shows_saturation():
    at = open_page(preset="sentence", sentence="a dog barked")
    assert at.slider(key="scaled_dot_product.n_q").value == 3
    ticks = tick_labels(step_chart(at, "weights")["layout"]["xaxis"])
    assert ticks == ["a", "dog", "barked"]
    nine_words = "one two three four five six seven eight nine"
    at.text_input(key="scaled_dot_product.sentence").set_value(nine_words)
    at.run()
    assert not at.exception
    assert any("The sentence has 9 words" in e.value for e in at.error)

    at = open_page()
    at.selectbox(key="scaled_dot_product.preset").set_value("sharp_flat").run()
    metrics = {m.label: m.value for m in at.metric}
    # Worked in test_examples.py: every flat row's largest weight is 0.34253, sharp 0.97166.
    assert metrics["Flat: mean largest weight"] == "0.3425"
    assert metrics["Sharp: mean largest weight"] == "0.9717"
    np.testing.assert_allclose(step(at, "weights").max(axis=1), 0.97166, atol=1e-5)


def test_deep_link_restores_the_view_and_its_numbers():
    at = open_page(preset="random", seed="5", n_q="2", n_k="3", d_k="4", d_v="1", causal="1",
                   scoring="cosine", tau="0.5", row="2")  # fmt: skip
    assert at.selectbox(key="scaled_dot_product.preset").value == "random"
    assert at.number_input(key="scaled_dot_product.seed").value == 5
    assert at.selectbox(key="scaled_dot_product.scoring").value == "cosine"
    assert at.slider(key="scaled_dot_product.tau").value == 0.5
    assert at.selectbox(key="scaled_dot_product.row").value == 2
    e = random_example(2, 3, 4, 1, seed=5)
    cos = (e.q / np.linalg.norm(e.q, axis=1, keepdims=True)) @ (
        e.k / np.linalg.norm(e.k, axis=1, keepdims=True)
    ).T
    scaled = np.where(np.tril(np.ones((2, 3), bool)), cos / 0.5, -np.inf)
    np.testing.assert_allclose(step(at, "weights"), softmax_rows(scaled), rtol=1e-5, atol=1e-7)
    assert not at.warning
    assert at.query_params["seed"] == "5" and "Q" not in at.query_params  # an untouched preset


def test_a_control_change_updates_the_link():
    at = open_page()
    assert dict(at.query_params) == {}
    at.slider(key="scaled_dot_product.d_k").set_value(3).run()
    assert at.query_params["d_k"] == "3"
    at.toggle(key="scaled_dot_product.scaling").set_value(False).run()
    assert at.query_params["scaling"] == "0"
    at.selectbox(key="scaled_dot_product.row").set_value(3).run()
    assert at.query_params["row"] == "3"


@pytest.mark.parametrize(
    ("params", "widget", "default"),
    [
        ({"n_q": "1000000000"}, ("slider", "scaled_dot_product.n_q"), 3),
        ({"d_k": "abc"}, ("slider", "scaled_dot_product.d_k"), 2),
        ({"preset": "evil"}, ("selectbox", "scaled_dot_product.preset"), "three_token"),
        ({"tau": "nan"}, ("slider", "scaled_dot_product.tau"), 1.0),
        ({"scoring": "x" * 5000}, ("selectbox", "scaled_dot_product.scoring"), "dot_product"),
    ],
)
def test_crafted_links_give_a_notice_and_the_defaults(params, widget, default):
    at = open_page(**params)
    assert getattr(at, widget[0])(key=widget[1]).value == default
    assert at.warning, "a refused link part must be explained"
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)


@pytest.mark.parametrize(
    ("params", "notice"),
    [
        ({"Q": "1,2;x,4", "K": "1,1", "V": "1"}, "`Q` was ignored"),
        ({"Q": "1,2", "K": "1,2,3", "V": "1"}, "K has 3 columns but Q has 2"),
        ({"Q": "1;" * 20 + "1", "K": "1", "V": "1"}, "larger than 16×64"),
        ({"Q": "1,2"}, "only some of Q, K and V"),
        ({"Q": "9" * 3000, "K": "1", "V": "1"}, "too long"),
    ],
)
def test_crafted_matrices_in_a_link_are_refused_with_a_notice(params, notice):
    at = open_page(**params)
    assert any(notice in w.value for w in at.warning), [w.value for w in at.warning]
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)


def test_presenter_mode_steps_through_the_pipeline():
    at = open_page(present="1", upto="2")
    assert at.select_slider(key="scaled_dot_product.upto").value == 2
    assert pipeline_count(at) == 2
    at.button(key="scaled_dot_product.step_next").click().run()
    assert pipeline_count(at) == 3 and at.query_params["upto"] == "3"
    at.button(key="scaled_dot_product.step_back").click().run()
    at.button(key="scaled_dot_product.step_back").click().run()
    at.button(key="scaled_dot_product.step_back").click().run()  # stops at the first step
    assert at.select_slider(key="scaled_dot_product.upto").value == 1 and pipeline_count(at) == 1
    assert pipeline_count(open_page(upto="2")) == 5  # stepping is for presenters only


def test_uploading_a_json_export_restores_the_example_and_its_settings():
    e = random_example(2, 2, 3, 2, seed=9)
    exported = example_to_json(e, settings={"causal": True, "scoring": "dot_product"}).encode()
    at = open_page()
    uploader = at.file_uploader(key="scaled_dot_product.upload")
    uploader.upload("example.json", exported, "application/json")
    at.run()
    assert not at.exception and not at.error
    assert at.toggle(key="scaled_dot_product.causal").value is True
    assert sizes(at) == [2, 2, 3, 2]
    scaled = np.where(np.tril(np.ones((2, 2), bool)), e.q @ e.k.T / math.sqrt(3), -np.inf)
    np.testing.assert_allclose(step(at, "weights"), softmax_rows(scaled), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(step(at, "output"), softmax_rows(scaled) @ e.v, rtol=1e-5)
    assert at.query_params["Q"]  # uploaded numbers are hand-made: the link carries them


def test_uploading_a_bad_csv_says_what_to_fix():
    at = open_page()
    at.file_uploader(key="scaled_dot_product.upload").upload("q.csv", b"1,2,3\n4,5,6\n", "text/csv")
    at.run()
    assert not at.exception
    assert any("K has 2 columns but Q has 3" in e.value for e in at.error)
    np.testing.assert_allclose(step(at, "weights"), HAND_WEIGHTS, rtol=1e-6)


def test_uploading_one_csv_replaces_that_matrix():
    at = open_page()
    uploader = at.file_uploader(key="scaled_dot_product.upload")
    uploader.upload("sdpa-V.csv", b"1,2\n3,4\n5,6\n", "text/csv")
    at.run()
    np.testing.assert_allclose(step(at, "output"), HAND_WEIGHTS @ [[1, 2], [3, 4], [5, 6]],
                               rtol=1e-6)  # fmt: skip


def test_cross_attention_is_named():
    at = open_page(n_q="2", n_k="4")
    assert any("cross-attention" in i.value for i in at.info)
    assert step(at, "weights").shape == (2, 4)


def test_why_sqrt_dk_shows_variance_growing_like_d_k():
    at = open_page(why="1")
    spec = figure(at, "scaled_dot_product.sqrt_dk.variance")
    by_name = {trace["name"]: trace for trace in spec["data"]}
    d_k = array(by_name["y = d_k"]["x"])
    measured = array(by_name["measured Var(q·k)"]["y"])
    scaled = array(by_name["measured Var(q·k / √d_k)"]["y"])
    # Theory: Var(q·k) = d_k for unit-variance entries; 32 000 samples per point.
    np.testing.assert_allclose(measured / d_k, 1, atol=0.1)
    np.testing.assert_allclose(scaled, 1, atol=0.1)
    reference = scaling_experiment(tuple(d_k.astype(int)), num_samples=2000, num_keys=16)
    np.testing.assert_allclose(measured, reference.dot_variance)
    max_weight_chart = figure(at, "scaled_dot_product.sqrt_dk.max_weight")
    max_weight = {t["name"]: array(t["y"]) for t in max_weight_chart["data"]}
    assert max_weight["without scaling"][-1] > 0.9 > 0.5 > max_weight["with 1/√d_k"][-1]


def test_explain_row_follows_the_chosen_query_and_the_scoring_function():
    at = open_page()
    at.selectbox(key="scaled_dot_product.row").set_value(3).run()
    assert r"w_{3,1} &= \frac{4.1133}{8.1695} = 0.5035" in latex_text(at)
    at.toggle(key="scaled_dot_product.scaling").set_value(False).run()
    # Unscaled row 3: scores [2, 1, 1], e² = 7.3891, e = 2.7183, Z = 12.8256, w₃₁ = 0.5761.
    assert r"w_{3,1} &= \frac{7.3891}{12.8256} = 0.5761" in latex_text(at)
    assert not at.exception


def test_a_setting_reruns_only_the_steps_and_still_updates_the_link():
    at = open_page()
    at.toggle(key="scaled_dot_product.causal").set_value(True)
    run_fragment(at, "scaled_dot_product.steps")
    assert not at.exception, [e.value for e in at.exception]
    # Row 2 sees k₁, k₂ with scaled scores 1/√2 and 0: e/(e + 1) and 1/(e + 1).
    weights = step(at, "weights")
    assert (weights[np.triu_indices(3, 1)] == 0).all()
    np.testing.assert_allclose(weights[1, :2], [E / (E + 1), 1 / (E + 1)], rtol=1e-6)
    assert at.query_params["causal"] == "1"
    # Only the fragment ran: the editors and the page's intro were not drawn again.
    assert not at.title and not at.dataframe


def test_choosing_a_query_reruns_only_its_explanation_and_updates_the_link():
    at = open_page()
    at.selectbox(key="scaled_dot_product.row").set_value(3)
    run_fragment(at, "scaled_dot_product.row")
    assert not at.exception, [e.value for e in at.exception]
    # Row 3 by hand: e^(2/√2) = 4.1133 and Z = 4.1133 + 2·2.0281 = 8.1695.
    assert r"w_{3,1} &= \frac{4.1133}{8.1695} = 0.5035" in latex_text(at)
    assert at.query_params["row"] == "3"
    assert pipeline_count(at) == 0  # the steps above were not redrawn


def test_a_presenter_step_reruns_only_the_pipeline_and_updates_the_link():
    at = open_page(present="1", upto="2")
    at.button(key="scaled_dot_product.step_next").click()
    run_fragment(at, "scaled_dot_product.pipeline")
    assert pipeline_count(at) == 3 and at.query_params["upto"] == "3"
    assert at.query_params["present"] == "1"
    np.testing.assert_allclose(step(at, "scaled"), [[1, 1, 0], [1, 0, 1], [2, 1, 1]] / np.sqrt(2),
                               rtol=1e-6)  # fmt: skip


def test_opening_the_page_does_not_import_torch():
    then = "at.toggle(key='scaled_dot_product.causal').set_value(True).run()"
    assert torch_after_a_plain_visit(PAGE, then=then) is False


def test_matrices_too_large_for_a_link_leave_all_three_out():
    # d_v = 32 makes V 3 × 32 = 96 numbers, more than a link carries (64): Q and K, which
    # would fit, stay out too, since a link with only some of them would open the preset.
    at = open_page(d_v="32")
    type_into(at, "scaled_dot_product.q", {0: {"d1": 5.0}})
    type_into(at, "scaled_dot_product.k", {1: {"token": "dog"}})
    assert not {"Q", "K", "V", "tq", "tk"} & set(at.query_params)
    assert at.query_params["d_v"] == "32"
    big = math.exp(5 / math.sqrt(2))  # q₁ = [5, 0], as in test_editing_a_q_cell_...
    np.testing.assert_allclose(
        step(at, "weights")[0], np.array([big, big, 1]) / (2 * big + 1), rtol=1e-6
    )
