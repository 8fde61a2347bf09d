"""ui.widgets.step_text: the "how it was computed" text of each step, the written-out row, and
the step figures (ui.widgets.steps) that carry them.

Numbers are those of the 3-token example worked by hand in tests/test_examples.py:
Q = [[1,0],[0,1],[1,1]], K = [[1,1],[1,0],[0,1]], V = [[10,0],[0,10],[5,5]], d_k = 2.
"""

import math

import numpy as np

from attention_core import scaled_dot_product_attention
from attention_core.lessons.presets import attention_for, sharp_flat_pair, three_token_example
from tests.plotly_json import tick_labels
from ui.widgets import render
from ui.widgets.step_text import (
    STEP_NAMES,
    cell_hover,
    fixed,
    num,
    row_latex,
    scale_text,
    step_caption,
)
from ui.widgets.steps import step_figure

EX = three_token_example()
STEPS = attention_for(EX.q, EX.k, EX.v)
CAUSAL = attention_for(EX.q, EX.k, EX.v, causal=True)


def test_number_formats():
    assert num(1.0) == "1" and num(0.70710678) == "0.7071" and num(-2.5) == "−2.5"
    assert num(-0.00001) == "0" and num(-np.inf) == "−∞"
    assert fixed(0.5) == "0.5000" and fixed(-0.00001) == "0.0000" and fixed(-0.25) == "−0.2500"
    assert scale_text(1 / math.sqrt(2), 2) == "1/√2" and scale_text(0.25, 2) == "0.25"


def test_score_hover_writes_the_dot_product_out():
    hover = cell_hover(STEPS, "scores", q=EX.q, k=EX.k, v=EX.v)
    # The example from the issue: q₁ = [1, 0], k₂ = [1, 0].
    assert hover[0][1] == "q₁·k₂ = 1×1 + 0×0 = 1"
    assert hover[2][0] == "q₃·k₁ = 1×1 + 1×1 = 2"
    negative = attention_for([[-1.5, 2]], [[2, -3]], [[1]])
    assert cell_hover(negative, "scores", q=[[-1.5, 2]], k=[[2, -3]], v=[[1]])[0][0] == (
        "q₁·k₁ = (−1.5)×2 + 2×(−3) = −9"
    )


def test_hover_of_the_other_steps_by_hand():
    scaled = cell_hover(STEPS, "scaled", q=EX.q, k=EX.k, v=EX.v)
    assert scaled[2][0] == "score × scale = 2 × 1/√2 = 1.4142"
    weights = cell_hover(STEPS, "weights", q=EX.q, k=EX.k, v=EX.v)
    # Row 3: e^√2 = 4.1133, Z = e^√2 + 2e^(1/√2) = 8.1695, weight 0.5035.
    assert weights[2][0] == "e^(1.4142) / Σ = 4.1133 / 8.1695 = 0.5035"
    output = cell_hover(STEPS, "output", q=EX.q, k=EX.k, v=EX.v)
    assert len(output[0]) == 2  # one entry per output dimension
    assert output[2][1] == "Σⱼ w₃ⱼ·vⱼ[2] = 0.5035×0 + 0.2483×10 + 0.2483×5 = 3.7238"
    masked = cell_hover(CAUSAL, "masked", q=EX.q, k=EX.k, v=EX.v)
    assert masked[0][2] == "the mask blocks k₃ for q₁: −∞, so its weight will be 0"
    assert masked[1][0] == "k₁ is visible to q₂: unchanged, 0.7071"
    causal_weights = cell_hover(CAUSAL, "weights", q=EX.q, k=EX.k, v=EX.v)
    assert causal_weights[0][1] == "masked: e^(−∞) = 0, so the weight is 0"
    # Row 2 under the mask: e^(1/√2) / (e^(1/√2) + 1) = 2.0281 / 3.0281 = 0.6698.
    assert causal_weights[1][0] == "e^(0.7071) / Σ = 2.0281 / 3.0281 = 0.6698"
    causal_out = cell_hover(CAUSAL, "output", q=EX.q, k=EX.k, v=EX.v)
    assert causal_out[0][0] == "Σⱼ w₁ⱼ·vⱼ[1] = 1.0000×10 = 10"


def test_hover_for_cosine_and_additive_scores():
    steps = attention_for(EX.q, EX.k, EX.v, scoring="cosine", temperature=0.5)
    hover = cell_hover(steps, "scores", q=EX.q, k=EX.k, v=EX.v, scoring="cosine")
    # q₁ = [1,0], k₁ = [1,1]: cos = 1 / (1 × √2) = 0.7071.
    assert hover[0][0] == "cos(q₁, k₁) = q₁·k₁ / (‖q₁‖ ‖k₁‖) = 1 / (1 × 1.4142) = 0.7071"
    assert cell_hover(steps, "scaled", q=EX.q, k=EX.k, v=EX.v)[0][0] == (
        "score × scale = 0.7071 × 2 = 1.4142"
    )
    additive = attention_for(EX.q, EX.k, EX.v, scoring="additive")
    text = cell_hover(additive, "scores", q=EX.q, k=EX.k, v=EX.v, scoring="additive")[1][2]
    assert text == f"vᵀ tanh(W_q q₂ + W_k k₃) = {num(additive.scores[1, 2])} (a small tanh network)"


def test_hover_shapes_match_every_step():
    e = sharp_flat_pair()[1]
    steps = attention_for(e.q[:3], e.k, e.v[:, :1], causal=True)
    for name in STEP_NAMES:
        hover = cell_hover(steps, name, q=e.q[:3], k=e.k, v=e.v[:, :1])
        assert np.array(hover).shape == np.asarray(getattr(steps, name)).shape


def test_row_latex_of_row_three_by_hand():
    parts = dict(row_latex(STEPS, 2, q=EX.q, k=EX.k, v=EX.v))
    latex = "\n".join(parts.values())
    assert r"s_{3,1} &= q_{3}\cdot k_{1} = 1\times1 + 1\times1 = 2" in latex
    assert r"\tilde s_{3,1} &= 2\times \frac{1}{\sqrt{2}} = 1.4142" in latex
    assert r"e^{1.4142} &= 4.1133" in latex and r"e^{0.7071} &= 2.0281" in latex
    assert parts["Their sum"] == "Z = 4.1133 + 2.0281 + 2.0281 = 8.1695"
    weights = parts["Weights (4 decimals) and their row sum"]
    assert r"w_{3,1} &= \frac{4.1133}{8.1695} = 0.5035" in weights
    assert r"w_{3,2} &= \frac{2.0281}{8.1695} = 0.2483" in weights
    assert r"\sum_j w_{3,j} &= 1.0000" in weights
    output = parts["Output: the weighted sum of the value rows"]
    # 0.50349·[10, 0] = [5.0349, 0]; 0.24826·[0, 10] = [0, 2.4826]; 0.24826·[5, 5] = [1.2413, …]
    assert r"0.5035\times[10,\ 0] = [5.0349,\ 0]" in output
    assert r"0.2483\times[5,\ 5] = [1.2413,\ 1.2413]" in output
    assert output.endswith(r"&= [6.2762,\ 3.7238]\end{aligned}")


def test_row_latex_with_a_mask_and_with_a_shift():
    parts = dict(row_latex(CAUSAL, 0, q=EX.q, k=EX.k, v=EX.v))
    assert r"\to\; -\infty \quad\text{(masked)}" in parts["Scale (and mask)"]
    assert r"e^{-\infty} &= 0" in parts["Exponentials"]
    assert parts["Their sum"] == "Z = 2.0281 = 2.0281"
    _, sharp = sharp_flat_pair()
    big = sharp.q * 5
    steps = attention_for(big, sharp.k, sharp.v)
    headings = [heading for heading, _ in row_latex(steps, 0, q=big, k=sharp.k, v=sharp.v)]
    assert any("is subtracted first" in heading for heading in headings)
    unscaled = attention_for(EX.q, EX.k, EX.v, scoring="dot")
    assert (
        r"\tilde s_{1,1} &= 1\times 1 = 1"
        in dict(row_latex(unscaled, 0, q=EX.q, k=EX.k, v=EX.v))["Scale (and mask)"]
    )


def test_row_latex_of_a_fully_masked_row():
    steps = scaled_dot_product_attention([[1.0]], [[1.0]], [[2.0]], mask=[[False]])
    parts = dict(row_latex(steps, 0, q=[[1.0]], k=[[1.0]], v=[[2.0]]))
    assert "every key is masked" in parts["Weights"]


def test_step_captions_follow_the_setting():
    assert "√d_k = √2 = 1.4142" in step_caption("scaled", STEPS, d_k=2, scoring="scaled_dot")
    dot = attention_for(EX.q, EX.k, EX.v, scoring="dot")
    assert "Scale 1" in step_caption("scaled", dot, d_k=2, scoring="dot")
    assert "No mask" in step_caption("masked", STEPS, d_k=2, scoring="scaled_dot")
    assert "−∞" in step_caption("masked", CAUSAL, d_k=2, scoring="scaled_dot")
    assert "cosine" in step_caption("scores", STEPS, d_k=2, scoring="cosine")


def test_step_figures_are_shared_only_for_the_same_input():
    def figure(steps, name="weights", labels=("a", "b", "c")):
        return render.cached(
            step_figure, steps, name, EX.q, EX.k, EX.v, labels, labels, "scaled_dot"
        )

    a, b = figure(STEPS), figure(attention_for(EX.q.copy(), EX.k, EX.v))
    assert a is b
    assert figure(CAUSAL) is not a and figure(STEPS, labels=("a", "b", "d")) is not a
    assert figure(STEPS, "scores") is not a
    np.testing.assert_allclose(np.asarray(figure(CAUSAL).data[0].z, dtype=float), CAUSAL.weights,
                               rtol=1e-6)  # fmt: skip


def test_a_step_figure_explains_each_cell_in_its_hover():
    fig = step_figure(STEPS, "scores", EX.q, EX.k, EX.v, ("the", "cat", "sat"),
                      ("the", "cat", "sat"), "scaled_dot")  # fmt: skip
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), EX.q @ EX.k.T)
    # q₃ = [1, 1], k₁ = [1, 1]: 1×1 + 1×1 = 2.
    assert fig.data[0].hovertext[2][0].endswith("q₃·k₁ = 1×1 + 1×1 = 2")
    output = step_figure(STEPS, "output", EX.q, EX.k, EX.v, "abc", "abc", "scaled_dot")
    assert tick_labels(output.layout.xaxis) == ["d1", "d2"]


def test_each_step_has_its_own_caption_saying_what_that_step_does():
    captions = {name: step_caption(name, STEPS, d_k=2, scoring="scaled_dot") for name in STEP_NAMES}
    assert "sᵢⱼ = qᵢ·kⱼ = QKᵀ" in captions["scores"]
    assert "√d_k = √2 = 1.4142" in captions["scaled"]
    assert captions["masked"].startswith("No mask")
    assert "sum to 1" in captions["weights"]
    assert "oᵢ = Σⱼ wᵢⱼ vⱼ" in captions["output"]
    assert len(set(captions.values())) == len(STEP_NAMES)  # no step borrows another's text
    # τ = 2 with d_k = 2: scale 1/(2√2) = 0.3536 is no longer 1/√d_k, so the caption says it.
    warm = attention_for(EX.q, EX.k, EX.v, temperature=2.0)
    assert "multiplied by 0.3536" in step_caption("scaled", warm, d_k=2, scoring="scaled_dot")
    additive = attention_for(EX.q, EX.k, EX.v, scoring="additive")
    assert "tanh" in step_caption("scores", additive, d_k=2, scoring="additive")
    assert "not scaled" in step_caption("scaled", additive, d_k=2, scoring="additive")


def test_long_sums_are_shortened_for_a_real_model_size():
    # d_k = 12 ones against keys of twos: q·k = 12 × (1×2) = 24, written with 3 terms, …, 1.
    q, k = np.ones((1, 12)), np.full((10, 12), 2.0)
    v = np.arange(10.0)[:, None] * np.ones((1, 12))
    steps = attention_for(q, k, v, scoring="dot")
    hover = cell_hover(steps, "scores", q=q, k=k, v=v, scoring="dot")
    assert hover[0][0] == "q₁·k₁ = 1×2 + 1×2 + 1×2 + … + 1×2 = 24"
    # All ten keys tie, so each weight is 0.1 and every output entry is 0.1 × (0 + … + 9) = 4.5.
    output = cell_hover(steps, "output", q=q, k=k, v=v)[0][0]
    assert output == "Σⱼ w₁ⱼ·vⱼ[1] = 0.1000×0 + 0.1000×1 + 0.1000×2 + … + 0.1000×9 = 4.5"
    parts = dict(row_latex(steps, 0, q=q, k=k, v=v, scoring="dot"))
    assert parts["Their sum"] == r"Z = 1 + 1 + 1 + \cdots + 1 = 10"
    assert (
        r"[0.4,\ 0.4,\ 0.4,\ \ldots,\ 0.4]" in parts["Output: the weighted sum of the value rows"]
    )
