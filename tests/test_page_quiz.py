"""Predict, then reveal, on the pages: answer right and wrong, the score, links and presenters.

Expected answers come from NumPy here: the 3-token example's softmax(QKᵀ/√2), the causal
mask's row, the multi-head page's heads recomputed from its seeded embeddings and weights, and
Σ cos(ω_i k) for the positional page.
"""

from __future__ import annotations

import math

import numpy as np
from streamlit.testing.v1 import AppTest

from attention_core import init_multi_head_params
from attention_core.reference import token_embeddings
from harness.app_pages import ROOT

# The SDPA page's first preset, worked by hand in test_quiz.py: query 3 = (1, 1).
Q3 = np.array([[1.0, 0], [0, 1], [1, 1]])
K3 = np.array([[1.0, 1], [1, 0], [0, 1]])


def np_softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def open_page(page: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def choice(at: AppTest, number: int):
    """The radio or pills of question `number` (their label starts with it)."""
    widgets = [*at.radio, *at.button_group]
    (widget,) = [w for w in widgets if (w.key or "").startswith("quiz.")
                 and w.label.startswith(f"{number}. ")]  # fmt: skip
    return widget


def lock_in(at: AppTest, qid: str, value) -> AppTest:
    widget = [w for w in [*at.radio, *at.button_group] if (w.key or "").startswith(f"quiz.{qid}.")]
    widget[0].set_value(value).run()
    at.button(key=f"quiz.{qid}.lock").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def score(at: AppTest) -> str:
    (line,) = [m.value for m in at.markdown if "Your score this session" in m.value]
    return line.split("Your score this session: ")[1]


def verdicts(at: AppTest) -> list[str]:
    """The right/wrong messages of the locked-in questions, in page order."""
    return [a.value for a in [*at.success, *at.error] if a.value.startswith(("Right", "Not this"))]


def revealed(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_sdpa_right_then_wrong_keeps_the_score_and_shows_the_numbers():
    at = open_page("pages/sdpa_steps.py")
    assert score(at) == "no predictions yet."
    assert choice(at, 1).label.startswith("1. Which key gets the most weight")
    weights = np_softmax(Q3 @ K3.T / math.sqrt(2))[2]
    winner = int(np.argmax(weights))
    lock_in(at, "sdpa.winner", winner)
    assert verdicts(at) == ["Right: 1 · the."]
    assert f"{weights.max():.3f}" in revealed(at)  # 0.503
    assert score(at) == "**1 of 1** predictions right."

    # Wrong on purpose: the weights get sharper without ÷√2, not flatter.
    unscaled = np_softmax(Q3 @ K3.T)[2]
    assert unscaled.max() > weights.max()
    lock_in(at, "sdpa.noscale", 1)
    (error,) = [v for v in verdicts(at) if v.startswith("Not")]
    assert error.startswith("Not this time. You predicted Flatter")
    assert "the answer is Sharper" in error
    assert f"top {unscaled.max():.3f}" in revealed(at)  # 0.576
    assert score(at) == "**1 of 2** predictions right."

    # Predicting the same question again does not count twice.
    at.button(key="quiz.sdpa.noscale.again").click().run()
    lock_in(at, "sdpa.noscale", 0)
    assert score(at) == "**1 of 2** predictions right."

    # New numbers, new question: the causal mask changes the prompt, which opens again.
    at.toggle(key="scaled_dot_product.causal").set_value(True).run()
    assert "causal mask on" in choice(at, 2).label
    assert not choice(at, 2).disabled
    assert at.button(key="quiz.sdpa.noscale.lock").disabled  # until a prediction is chosen


def test_a_quiz_link_opens_the_chosen_questions_and_names_bad_ids():
    at = open_page("pages/sdpa_steps.py", {"quiz": "sdpa.noscale,mask.row2,sdpa.nope"})
    labels = [w.label for w in at.radio if (w.key or "").startswith("quiz.")]
    assert len(labels) == 1 and "divided by √d_k" in labels[0]
    warnings = [w.value for w in at.warning]
    asked_elsewhere = "`mask.row2` is asked on the “Masking lab” page, not here."
    assert f"The link's `quiz`: {asked_elsewhere}" in warnings
    assert any("`sdpa.nope` is not a question" in w for w in warnings)
    assert at.query_params["quiz"] == "sdpa.noscale"
    # The teacher's chooser shows the set, and the link that opens it.
    assert at.multiselect(key="scaled_dot_product.quiz").value == ["sdpa.noscale"]
    assert any(code.value.endswith("?quiz=sdpa.noscale") for code in at.code)

    at.multiselect(key="scaled_dot_product.quiz").set_value(["sdpa.winner", "sdpa.noscale"]).run()
    assert at.query_params["quiz"] == "sdpa.winner,sdpa.noscale"
    assert len([w for w in at.radio if (w.key or "").startswith("quiz.")]) == 2


def test_masking_query_2_under_the_causal_mask():
    at = open_page("pages/masking_lab.py")
    row = np.tril(np.ones((6, 6), bool))[1]  # the default: 6 tokens, causal
    pills = choice(at, 1)
    assert pills.label.startswith("1. Under the mask **Causal**, which keys can query **2 · cat**")
    lock_in(at, "mask.row2", [0])  # key 1 alone: wrong, query 2 also sees itself
    assert verdicts(at)[0].endswith("the answer is 1 · the; 2 · cat.")
    at.button(key="quiz.mask.row2.again").click().run()
    lock_in(at, "mask.row2", np.flatnonzero(row).tolist())
    assert verdicts(at) == ["Right: 1 · the; 2 · cat."]
    assert score(at) == "**0 of 1** predictions right."  # the first prediction is the one scored


def test_presenter_shows_the_question_first_and_reveals_on_a_button():
    at = open_page("pages/masking_lab.py", {"present": "1", "quiz": "mask.row2"})
    assert not [w for w in [*at.radio, *at.button_group] if (w.key or "").startswith("quiz.")]
    text = revealed(at)
    assert "**1.** Under the mask **Causal**, which keys can query **2 · cat**" in text
    assert "- **A.** 1 · the\n- **B.** 2 · cat\n- **C.** 3 · sat" in text
    assert not [s for s in at.success if s.value.startswith("Answer")]
    at.button(key="quiz.mask.row2.reveal").click().run()
    assert [s.value for s in at.success if s.value.startswith("Answer")] == [
        "Answer: A. 1 · the, B. 2 · cat"
    ]
    assert "blocks 3 · sat, 4 · on, 5 · the, 6 · mat" in revealed(at)
    assert not any("Your score" in m.value for m in at.markdown)  # the room is not scored


def test_multi_head_previous_token_head_from_numpy():
    tokens = "the cat sat on the mat".split()
    x = token_embeddings(tokens, 8, 0)
    p = init_multi_head_params(8, 4, 0)
    q = (x @ p.w_q.T + p.b_q).reshape(6, 4, 2).transpose(1, 0, 2)  # (head, pos, d_head)
    k = (x @ p.w_k.T + p.b_k).reshape(6, 4, 2).transpose(1, 0, 2)
    weights = np_softmax(q @ k.transpose(0, 2, 1) / math.sqrt(2))  # (head, q_pos, k_pos)
    previous = np.array([np.diagonal(w, offset=-1).mean() for w in weights])
    best = int(np.argmax(previous))

    at = open_page("pages/multi_head.py")
    wrong = (best + 1) % 4
    lock_in(at, "mha.previous", wrong)
    assert verdicts(at)[0].endswith(f"the answer is head {best + 1}.")
    for h, value in enumerate(previous):
        assert f"head {h + 1}: {value:.3f}" in revealed(at)


def test_positional_questions_follow_the_controls():
    at = open_page("pages/positional_encoding.py")
    lock_in(at, "pe.shuffle", 1)  # "Yes": wrong without positions
    assert "the answer is No: each word gets the same output" in verdicts(at)[0]

    at.slider(key="positional.d_model").set_value(2).run()
    omega = 10000.0 ** (-np.arange(0, 2, 2) / 2)
    dots = np.cos(np.outer(np.arange(1, 9), omega)).sum(axis=1)
    best = int(np.argmax(dots))
    assert best + 1 == 6  # cos k is largest near 2π
    lock_in(at, "pe.nearest", best)
    assert "Right: k = 6." in verdicts(at)
    assert f"k = 6: {dots[best]:.3f}" in revealed(at)

    # With positions added the same reordering changes the outputs: a new question to predict.
    at.button_group(key="positional.family").set_value("sinusoidal").run()
    assert "With **sinusoidal** positions" in choice(at, 1).label
    lock_in(at, "pe.shuffle", 1)
    assert "Right: Yes: words get different outputs." in verdicts(at)
    assert score(at) == "**2 of 3** predictions right."


def test_real_model_previous_token_head_of_the_chosen_layer():
    from attention_core.models import load_bert
    from harness.app_pages import open_model_page

    text = "The animal didn't cross the street because it was too tired."
    weights = load_bert().trace(text).attention_weights.astype(np.float64)  # (layer, head, n, n)
    at = open_model_page("pages/real_model.py", {"layer": "1"}, timeout=180)
    previous = np.array([np.diagonal(w, offset=-1).mean() for w in weights[0]])
    best = int(np.argmax(previous))
    assert choice(at, 1).label.startswith("1. In layer 1: which of the 12 heads")
    lock_in(at, "bert.previous", best)
    assert f"Right: head {best + 1}." in verdicts(at)
    assert f"head {best + 1}: {previous[best]:.3f}" in revealed(at)
    assert previous[best] > 0.5  # a trained previous-token head: most of its weight goes there
