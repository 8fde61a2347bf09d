"""TODO"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from attention_core import AttentionSteps
from attention_core.lessons.presets import (
    RowBreakdown,
    row_breakdown,
)

STEP_NAMES = ("scores", "scaled", "masked", "weights", "output")


STEP_TITLES = {
    "scores": "1 · Scores",
    "scaled": "2 · Scaled",
    "masked": "3 · Masked",
    "weights": "4 · Weights (softmax)",
    "output": "5 · Output",
}


SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


# A sum with more terms than this is written with its first and last terms only (a real
# model's d_k = 64 would not fit in a tooltip).
MAX_WRITTEN_TERMS = 8


MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|$<>~")


def num(x: float, decimals: int = 4) -> str:
    """Short text for a number: at most `decimals` decimals, trailing zeros dropped, −∞ kept."""
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        return "0"
    return text.replace("-", "−")


def fixed(x: float, decimals: int = 4) -> str:
    """A number with exactly `decimals` decimals (weights: 0.4011), −0 shown as 0."""
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text.replace("-", "−")


def _factor(x: float) -> str:
    """A factor in a product: negative numbers in parentheses, 1×(−2)."""
    text = num(x)
    return f"({text})" if text.startswith("−") else text


def join_terms(terms: Iterable[Any], *, dots: str = "…", write: Callable[[Any], str] = str) -> str:
    """`a + b + c`, or `a + b + c + … + z` when there are more than MAX_WRITTEN_TERMS.

    `write` turns each kept term into text; terms that are elided are never written, which
    matters for a real model's 32-wide heads.
    """
    terms = list(terms)
    if len(terms) > MAX_WRITTEN_TERMS:
        return " + ".join([*map(write, terms[:3]), dots, write(terms[-1])])
    return " + ".join(map(write, terms))


def subscript(i: int) -> str:
    return str(i + 1).translate(SUBSCRIPTS)


def _tex(x: float, decimals: int = 4) -> str:
    """A number for LaTeX: trailing zeros dropped, -\\infty for −∞, large ones in ×10^n."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-4):
        mantissa, exponent = f"{x:.4e}".split("e")
        return rf"{mantissa}\times 10^{{{int(exponent)}}}"
    return num(x, decimals).replace("−", "-")


def _tex_factor(x: float) -> str:
    text = _tex(x)
    return f"({text})" if text.startswith("-") else text


def scale_text(scale: float, d_k: int) -> str:
    """How the scale reads: "1/√2" when it is 1/√d_k, else its value."""
    if math.isclose(scale, 1.0 / math.sqrt(d_k), rel_tol=1e-12):
        return f"1/√{d_k}"
    return num(scale)


def breakdowns(steps: AttentionSteps, q, k, v) -> list[RowBreakdown]:
    return [row_breakdown(steps, i, q=q, k=k, v=v) for i in range(np.asarray(q).shape[0])]


def cell_hover(
    steps: AttentionSteps,
    step: str,
    *,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scoring: str = "scaled_dot",
    rows: Sequence[RowBreakdown] | None = None,
) -> list[list[str]]:
    """One line per cell of `step` saying how it was computed, e.g. `q₁·k₂ = 1×1 + 0×0 = 1`.

    `step` is one of STEP_NAMES; the result has the step's shape (`(q_pos, d_v)` for "output").
    Pass `rows` (from `row_breakdown`) to reuse breakdowns already computed.
    """
    rows = list(rows) if rows is not None else breakdowns(steps, q, k, v)
    d_k = np.asarray(q).shape[1]
    text = []
    for i, b in enumerate(rows):
        line = []
        width = b.weighted.shape[1] if step == "output" else b.scores.shape[0]
        for j in range(width):
            line.append(_hover_one(b, step, i, j, d_k, scoring))
        text.append(line)
    return text


def _hover_one(b: RowBreakdown, step: str, i: int, j: int, d_k: int, scoring: str) -> str:
    qi, kj = f"q{subscript(i)}", f"k{subscript(j)}"
    if step == "scores":
        if scoring == "additive":
            return f"vᵀ tanh(W_q {qi} + W_k {kj}) = {num(b.scores[j])} (a small tanh network)"
        products = join_terms(
            zip(b.query, b.keys[j], strict=True), write=lambda t: f"{_factor(t[0])}×{_factor(t[1])}"
        )
        dot = f"{qi}·{kj} = {products} = {num(b.dots[j])}"
        if scoring == "cosine":
            return (
                f"cos({qi}, {kj}) = {qi}·{kj} / (‖{qi}‖ ‖{kj}‖) = {num(b.dots[j])} / "
                f"({num(b.q_norm)} × {num(b.k_norms[j])}) = {num(b.scores[j])}"
            )
        return dot
    if step == "scaled":
        return (
            f"score × scale = {num(b.scores[j])} × {scale_text(b.scale, d_k)} = {num(b.scaled[j])}"
        )
    if step == "masked":
        if not b.allowed[j]:
            return f"the mask blocks {kj} for {qi}: −∞, so its weight will be 0"
        return f"{kj} is visible to {qi}: unchanged, {num(b.scaled[j])}"
    if step == "weights":
        if not b.allowed[j]:
            return "masked: e^(−∞) = 0, so the weight is 0"
        shifted = f" − {num(b.shift)}" if b.shift else ""
        return (
            f"e^({num(b.scaled[j])}{shifted}) / Σ = {num(b.exps[j])} / {num(b.total)} = "
            f"{fixed(b.weights[j])}"
        )
    terms = join_terms(
        [(w, x) for w, x, ok in zip(b.weights, b.values[:, j], b.allowed, strict=True) if ok],
        write=lambda t: f"{fixed(t[0])}×{_factor(t[1])}",
    )
    return f"Σⱼ w{subscript(i)}ⱼ·vⱼ[{j + 1}] = {terms or '0'} = {num(b.output[j])}"


def step_caption(step: str, steps: AttentionSteps, *, d_k: int, scoring: str) -> str:
    """One sentence under each panel: what this step does, in the current setting."""
    if step == "scores":
        return {
            "additive": "Each query-key pair goes through a small tanh network: "
            "sᵢⱼ = vᵀ tanh(W_q qᵢ + W_k kⱼ).",
            "cosine": "Each query is compared with each key by the cosine of their angle "
            "(lengths ignored), in [−1, 1].",
        }.get(scoring, "Each query is compared with each key: sᵢⱼ = qᵢ·kⱼ = QKᵀ.")
    if step == "scaled":
        if scoring == "additive":
            return "Additive scores are not scaled (scale 1): the learned v sets how sharp."
        if math.isclose(steps.scale, 1.0):
            return "Scale 1: the scores go to the softmax as they are (no √d_k)."
        if scoring == "scaled_dot" and math.isclose(steps.scale, 1 / math.sqrt(d_k)):
            return (
                f"Divided by √d_k = √{d_k} = {num(math.sqrt(d_k))}, so the scores keep a spread "
                "near 1 whatever d_k is and the softmax does not saturate."
            )
        return f"Every score is multiplied by {num(steps.scale)} (the temperature and scale)."
    if step == "masked":
        if not np.isneginf(np.asarray(steps.masked)).any():
            return "No mask: every key is visible, so this is the same as the scaled scores."
        return "Blocked pairs become −∞ (grey): e^(−∞) = 0, so they get exactly zero weight."
    if step == "weights":
        return "Softmax along each row (over the keys): positive weights that sum to 1."
    return "Each output row is the weighted average of the value rows: oᵢ = Σⱼ wᵢⱼ vⱼ."


def row_latex(
    steps: AttentionSteps,
    row: int,
    *,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scoring: str = "scaled_dot",
) -> list[tuple[str, str]]:
    """Query `row`'s calculation as (heading, LaTeX) pairs, in the order it happens.

    Weights are given to 4 decimals and followed by their row sum.
    """
    b = row_breakdown(steps, row, q=q, k=k, v=v)
    i = row + 1
    d_k = np.asarray(q).shape[1]
    keys = range(b.scores.shape[0])
    parts: list[tuple[str, str]] = []

    lines = []
    for j in keys:
        if scoring == "additive":
            rhs = rf"v^\top \tanh(W_q q_{{{i}}} + W_k k_{{{j + 1}}}) = {_tex(b.scores[j])}"
        else:
            products = join_terms(
                zip(b.query, b.keys[j], strict=True),
                dots=r"\cdots",
                write=lambda t: rf"{_tex_factor(t[0])}\times{_tex_factor(t[1])}",
            )
            rhs = rf"q_{{{i}}}\cdot k_{{{j + 1}}} = {products} = {_tex(b.dots[j])}"
            if scoring == "cosine":
                rhs = (
                    rf"\frac{{q_{{{i}}}\cdot k_{{{j + 1}}}}}{{\lVert q_{{{i}}}\rVert\,"
                    rf"\lVert k_{{{j + 1}}}\rVert}} = \frac{{{_tex(b.dots[j])}}}"
                    rf"{{{_tex(b.q_norm)}\times{_tex(b.k_norms[j])}}} = {_tex(b.scores[j])}"
                    rf"\quad ({rhs})"
                )
        lines.append(rf"s_{{{i},{j + 1}}} &= {rhs}")
    parts.append(("Scores: compare the query with every key", _aligned(lines)))

    if math.isclose(b.scale, 1 / math.sqrt(d_k), rel_tol=1e-12):
        factor = rf"\frac{{1}}{{\sqrt{{{d_k}}}}}"
    else:
        factor = _tex(b.scale)
    lines = []
    for j in keys:
        value = rf"{_tex_factor(b.scores[j])}\times {factor} = {_tex(b.scaled[j])}"
        if not b.allowed[j]:
            value += r" \;\to\; -\infty \quad\text{(masked)}"
        lines.append(rf"\tilde s_{{{i},{j + 1}}} &= {value}")
    parts.append(("Scale (and mask)", _aligned(lines)))

    lines = []
    shift = rf" - {_tex_factor(b.shift)}" if b.shift else ""
    for j in keys:
        exponent = rf"{_tex(b.scaled[j])}{shift}" if b.allowed[j] else r"-\infty"
        lines.append(rf"e^{{{exponent}}} &= {_tex(b.exps[j])}")
    heading = "Exponentials"
    if b.shift:
        heading += (
            f" (the largest score, {num(b.shift)}, is subtracted first so e^x stays printable; "
            "it cancels in the ratio, the weights do not change)"
        )
    parts.append((heading, _aligned(lines)))

    terms = join_terms(
        [e for e, ok in zip(b.exps, b.allowed, strict=True) if ok], dots=r"\cdots", write=_tex
    )
    parts.append(("Their sum", rf"Z = {terms or '0'} = {_tex(b.total)}"))

    if b.total == 0:
        parts.append(("Weights", r"\text{every key is masked: all weights and the output are } 0"))
        return parts
    lines = [
        rf"w_{{{i},{j + 1}}} &= \frac{{{_tex(b.exps[j])}}}{{{_tex(b.total)}}} = "
        rf"{fixed(b.weights[j]).replace('−', '-')}"
        for j in keys
    ]
    lines.append(rf"\textstyle\sum_j w_{{{i},j}} &= {fixed(float(b.weights.sum()))}")
    parts.append(("Weights (4 decimals) and their row sum", _aligned(lines)))

    lines = []
    for j in keys:
        if not b.allowed[j]:
            continue
        lead = r"o_{" + str(i) + "} &= " if not lines else r" &\;+ "
        lines.append(
            rf"{lead}{fixed(b.weights[j]).replace('−', '-')}\times{_tex_vector(b.values[j])}"
            rf" = {_tex_vector(b.weighted[j])}"
        )
    lines.append(rf" &= {_tex_vector(b.output)}")
    parts.append(("Output: the weighted sum of the value rows", _aligned(lines)))
    return parts


def markdown_text(text: str) -> str:
    """A token shown as typed: Markdown and LaTeX markers are escaped."""
    return "".join("\\" + c if c in MARKDOWN_SPECIALS else c for c in str(text))


def _aligned(lines: list[str]) -> str:
    return r"\begin{aligned}" + r" \\ ".join(lines) + r"\end{aligned}"


def _tex_vector(values: np.ndarray) -> str:
    if len(values) > MAX_WRITTEN_TERMS:
        entries = [*map(_tex, values[:3]), r"\ldots", _tex(values[-1])]
    else:
        entries = [_tex(x) for x in values]
    return r"[" + r",\ ".join(entries) + r"]"
