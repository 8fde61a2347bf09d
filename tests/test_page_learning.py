"""The learning page under AppTest: a run trained on the page, its numbers against the training
run here outside the page (the same settings give the same weights, bit for bit), bad settings
said under their inputs, one run for a room, questions answered when the run ends, heads
removed, a model uploaded, and a head sent to the step-by-step editors.

Small models keep these runs to a second or two; the default link's run (an induction head in
layer 1) is the slow test.
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.training.attn_only import run_attn_only
from attention_core.training.model_file import to_npz
from attention_core.training.run import HELD_OUT_COUNT, TrainingSettings, evaluate, train
from attention_core.training.sequences import held_out
from harness.app_pages import ROOT
from tests.plotly_json import figures, frame, plotly_array
from ui.models import toy

PAGE = "pages/watch_attention_learn.py"
SMALL = {"layers": "2", "heads": "2", "d_model": "16", "vocab": "16", "context": "8",
         "steps": "100", "batch": "8"}  # fmt: skip
SMALL_SETTINGS = TrainingSettings(
    n_layers=2, n_heads=2, d_model=16, d_vocab=16, n_ctx=8, steps=100, batch=8
)


def open_page(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def progress_text(at: AppTest) -> str:
    bars = at.get("progress")
    return bars[0].proto.text if bars else ""


def finish(at: AppTest, timeout: float = 120) -> AppTest:
    """Run the page again (as its fragment does every second) until the run has ended."""
    deadline = time.monotonic() + timeout
    while not progress_text(at).startswith("Trained"):
        assert time.monotonic() < deadline, progress_text(at)
        time.sleep(0.3)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def small_run():
    """The small settings' run, trained here, outside the page."""
    return list(train(SMALL_SETTINGS))


def test_a_run_trains_on_the_page_and_every_number_shown_is_the_runs(small_run):
    at = finish(open_page(SMALL))
    assert progress_text(at) == "Trained: 100 steps"
    final = small_run[-1]
    table = frame(at, "prefix match")
    assert list(table.index) == ["0.0", "0.1", "1.0", "1.1"]
    np.testing.assert_allclose(table["previous"], final.evaluation.previous.ravel().round(2))
    np.testing.assert_allclose(table["prefix match"], final.evaluation.induction.ravel().round(2))
    loss = figures(at)[0]
    assert loss["layout"]["title"]["text"] == "Loss on held-out sequences"
    steps = plotly_array(loss["data"][0]["x"])
    np.testing.assert_array_equal(steps, [0, 25, 50, 75, 100])
    repeated = plotly_array(loss["data"][1]["y"])
    np.testing.assert_allclose(
        repeated, [c.evaluation.loss_repeated for c in small_run], rtol=1e-12
    )
    # The page's model is the run's: the same parameters, bit for bit.
    page_run = toy.training_run(SMALL_SETTINGS)
    assert all(np.array_equal(page_run.final.params[k], final.params[k]) for k in final.params)


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"lr": "0"}, "The learning rate must be greater than 0, got 0"),
        ({"lr": "-0.01"}, "climb the loss instead of descending it"),
        ({"lr": "nan"}, "The learning rate must be a number, got nan"),
        ({"lr": "fast"}, "The learning rate must be a number, got 'fast'"),
        ({"context": "2"}, "The context must be between 4 and 64 here, got 2."),
        ({"steps": "9000"}, "The number of steps must be between 25 and 5,000 here, got 9,000."),
        ({"vocab": "8"}, "A vocabulary of 8 tokens is too small for a context of 32"),
        (
            {
                "layers": "3",
                "heads": "8",
                "d_model": "128",
                "vocab": "256",
                "context": "64",
                "steps": "600",
                "batch": "128",
            },
            "more than one run may take here: at most 157",
        ),
    ],
    ids=["lr-zero", "lr-negative", "lr-nan", "lr-text", "context", "steps", "vocab", "work"],
)
def test_a_setting_the_run_cannot_take_is_said_under_its_input_and_nothing_trains(params, words):
    at = open_page(params)
    errors = [e.value for e in at.error]
    assert any(words in e for e in errors), errors
    assert "Fix the settings marked above and the training starts." in [i.value for i in at.info]
    assert toy.BOARD.holding()[0] == 0
    if "lr" in params:
        assert at.text_input(key="learning.lr").value == params["lr"]  # kept as typed


def test_a_room_opening_one_link_shares_one_run_and_a_latecomer_sees_it_so_far():
    link = {**SMALL, "steps": "2000", "d_model": "32", "context": "16"}
    first = open_page(link)
    time.sleep(1.0)
    late = open_page(link)
    assert toy.BOARD.holding()[0] == 1
    shown = progress_text(late)
    assert shown.startswith("Training: step ") and not shown.startswith("Training: step 0 ")
    assert progress_text(first).startswith(("Training", "In line"))


def test_a_prediction_locked_while_training_is_judged_when_the_run_ends():
    at = open_page(
        {**SMALL, "steps": "400", "d_model": "32", "context": "16", "quiz": "learning.layer"}
    )
    (question,) = [r for r in at.radio if "Which layer will hold the induction head" in r.label]
    question.set_value(1).run()
    at.button(key="quiz.learning.layer.lock").click().run()
    assert any("The answer shows when the training ends" in i.value for i in at.info)
    finish(at)
    run = toy.training_run(
        TrainingSettings(
            n_layers=2, n_heads=2, d_model=32, d_vocab=16, n_ctx=16, steps=400, batch=8
        )
    )
    best = np.unravel_index(np.argmax(run.final.evaluation.induction), (2, 2))
    right = run.final.evaluation.induction.max() >= 0.4 and best[0] == 1
    verdicts = [s.value for s in at.success] + [e.value for e in at.error]
    assert any(v.startswith("Right: Layer 1" if right else "Not this time") for v in verdicts), (
        verdicts
    )


def test_one_layer_says_why_no_induction_head_forms():
    at = finish(open_page({**SMALL, "layers": "1"}))
    said = " ".join(m.value for m in at.markdown)
    assert "With one layer, no head can become an induction head" in said
    at.button(key="learning.other_layers").click().run()
    assert at.select_slider(key="learning.layers").value == 2
    assert "layers" not in at.query_params  # 2, the default, which a link leaves out


def test_removing_heads_gives_the_losses_of_the_model_without_them(small_run):
    at = finish(open_page(SMALL))
    at.multiselect(key="learning.remove").set_value(["1.0", "1.1"]).run()
    mask = np.array([[1.0, 1.0], [0.0, 0.0]])
    probe = held_out(SMALL_SETTINGS.seed, HELD_OUT_COUNT, 8, 16)
    without = evaluate(SMALL_SETTINGS.config, small_run[-1].params, probe, head_mask=mask)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["repeated tokens"] == f"{without.loss_repeated:.3f} nats"
    assert metrics["first-seen tokens"] == f"{without.loss_first:.3f} nats"
    assert at.query_params["remove"] == "1.0,1.1"  # the link reopens it


def test_the_step_and_the_head_come_from_the_link_and_draw_that_checkpoint(small_run):
    at = finish(open_page({**SMALL, "step": "50", "head": "1.1"}))
    assert at.select_slider(key="learning.step").value == 50
    assert at.selectbox(key="learning.head").value == "1.1"
    stripe = [
        f for f in figures(at) if f["layout"]["title"]["text"].startswith("head 1.1 · step 50")
    ]
    at50 = next(c for c in small_run if c.step == 50)
    np.testing.assert_allclose(
        plotly_array(stripe[-1]["data"][0]["z"]), at50.evaluation.patterns[1, 1], atol=1e-6
    )
    # One gradient step's pattern is the head's at the last step, on the held-out example.
    probe = held_out(SMALL_SETTINGS.seed, HELD_OUT_COUNT, 8, 16)
    weights = run_attn_only(SMALL_SETTINGS.config, small_run[-1].params, probe.example).patterns[
        1, 0, 1
    ]
    (gradient,) = [f for f in figures(at) if f["layout"]["title"]["text"] == "head 1.1: weights P"]
    np.testing.assert_allclose(plotly_array(gradient["data"][0]["z"]), weights, atol=1e-6)


def test_an_uploaded_model_is_inspected_or_trained_further_and_a_wrong_file_refused(small_run):
    final = small_run[-1]
    data = to_npz(SMALL_SETTINGS.config, final.params, {"steps": 100})
    at = open_page({"steps": "50", "batch": "8"})  # the sizes come from the file
    at.file_uploader(key="learning.upload").set_value(
        ("mine.npz", data, "application/octet-stream")
    ).run()
    assert any(
        "2 layers of 2 heads, d_model 16, vocabulary 16, context 8, trained 100 steps" in s.value
        for s in at.success
    )
    assert progress_text(at) == "Trained: 100 steps"
    table = frame(at, "prefix match")
    np.testing.assert_allclose(table["prefix match"], final.evaluation.induction.ravel().round(2))

    at.radio(key="learning.upload_mode").set_value("train").run()
    finish(at)
    assert progress_text(at) == "Trained: 50 steps"
    expected = list(
        train(TrainingSettings(**{**vars(SMALL_SETTINGS), "steps": 50}), start=final.params)
    )[-1]
    np.testing.assert_allclose(
        frame(at, "prefix match")["prefix match"], expected.evaluation.induction.ravel().round(2)
    )

    at.file_uploader(key="learning.upload").set_value(
        ("notes.npz", b"a,b\n1,2\n", "application/octet-stream")
    ).run()
    assert any(
        "“notes.npz”: This file is not an attention-only model saved by this page" in e.value
        for e in at.error
    )
    assert not at.exception


def test_a_head_sent_to_the_step_by_step_page_brings_its_q_k_v(small_run):
    at = finish(open_page({**SMALL, "head": "1.0"}))
    (link,) = [x for x in at.get("page_link") if x.proto.page == "scaled-dot-product"]
    params = {name: value for name, (value,) in parse_qs(link.proto.query_string).items()}
    assert params == {
        "source": "learning",
        "run": toy.run_code(SMALL_SETTINGS),
        "layer": "1",
        "head": "0",
    }
    at.query_params.clear()
    at.query_params.update(params)
    at.switch_page("pages/sdpa_steps.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Head 1.0 of the learning page's model" in i.value for i in at.info)
    probe = held_out(SMALL_SETTINGS.seed, HELD_OUT_COUNT, 8, 16)
    block = run_attn_only(SMALL_SETTINGS.config, small_run[-1].params, probe.example).blocks[1]
    from tests.test_page_model_head import editor

    q, tokens = editor(at, "q")
    np.testing.assert_allclose(q, block.q_heads[0, 0], atol=5e-6)
    assert tokens == [str(t) for t in probe.example]
    assert at.toggle(key="scaled_dot_product.causal").value is True


@pytest.mark.slow
def test_the_default_link_forms_an_induction_head_in_layer_one():
    at = finish(open_page({}), timeout=300)
    said = " ".join(m.value for m in at.markdown)
    assert "became an induction head" in said
    table = frame(at, "prefix match")
    best = table["prefix match"].idxmax()
    assert best.startswith("1.") and table["prefix match"].max() > 0.6
    assert table.loc[best, "induction from step"] <= 1000


def test_a_run_that_diverges_stops_says_so_and_keeps_its_last_good_checkpoint():
    # A model file with one token's embedding past float32's reach once squared: no held-out
    # sequence reads that token, so the file is scored; the first batch that draws it overflows.
    settings = TrainingSettings(
        n_layers=2, n_heads=2, d_model=16, d_vocab=256, n_ctx=8, steps=200, batch=8
    )
    probe = held_out(settings.seed, HELD_OUT_COUNT, 8, 256)
    unseen = sorted(set(range(256)) - set(probe.tokens.ravel()) - set(probe.example))[0]
    params = {k: v.copy() for k, v in train_start(settings).items()}
    params["embed.W_E"][unseen] = 1e30
    data = to_npz(settings.config, params, {"steps": 0})
    at = open_page({"steps": "200", "batch": "8"})
    at.file_uploader(key="learning.upload").set_value(
        ("big.npz", data, "application/octet-stream")
    ).run()
    at.radio(key="learning.upload_mode").set_value("train").run()
    finish(at)
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("The loss stopped being a number at step ") for w in warnings), warnings
    assert progress_text(at).endswith("(stopped early)")
    assert not at.exception


def train_start(settings: TrainingSettings):
    from attention_core.training.attn_only import init_params

    return init_params(settings.config, 0)


def test_a_heads_qk_circuit_is_read_over_the_vocabulary_or_the_positions(small_run):
    final = small_run[-1].params
    at = finish(open_page({**SMALL, "head": "0.1"}))
    w_q, w_k = final["blocks.0.attn.W_Q"][1], final["blocks.0.attn.W_K"][1]
    (tokens,) = [f for f in figures(at) if f["layout"]["title"]["text"] == "QK of head 0.1, tokens"]
    w_e = final["embed.W_E"]
    expected = w_e @ w_q @ w_k.T @ w_e.T / np.sqrt(8)  # d_head = 16 / 2
    np.testing.assert_allclose(plotly_array(tokens["data"][0]["z"]), expected, rtol=1e-5, atol=1e-6)
    at.radio(key="learning.qk_over").set_value("positions").run()
    (positions,) = [
        f for f in figures(at) if f["layout"]["title"]["text"] == "QK of head 0.1, positions"
    ]
    w_pos = final["pos_embed.W_pos"]
    expected = w_pos @ w_q @ w_k.T @ w_pos.T / np.sqrt(8)
    np.testing.assert_allclose(
        plotly_array(positions["data"][0]["z"]), expected, rtol=1e-5, atol=1e-6
    )
    assert at.query_params["qk_over"] == "positions"


def test_a_head_sent_to_the_why_page_is_the_same_head_counted_from_1(small_run):
    at = finish(open_page({**SMALL, "head": "1.0"}))
    (link,) = [x for x in at.get("page_link") if x.proto.page == "attends"]
    params = {name: value for name, (value,) in parse_qs(link.proto.query_string).items()}
    assert params == {
        "model": "learning",
        "run": toy.run_code(SMALL_SETTINGS),
        "layer": "2",
        "head": "1",
    }
    at.query_params.clear()
    at.query_params.update(params)
    at.switch_page("pages/why_a_head_attends.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(m.value.startswith("Layer 2, head 1 gives") for m in at.markdown)
