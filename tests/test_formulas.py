"""ui.formulas: the words and LaTeX for each name the core computes with, one entry per name."""

from attention_core import SCORING_FUNCTIONS
from attention_core.measurement import (
    BACKENDS,
    METHODS,
)
from ui.widgets.formulas import BACKEND_LABELS, METHOD_LABELS, SCORING_TEXT


def test_every_scoring_function_has_a_description_and_a_formula():
    assert set(SCORING_TEXT) == set(SCORING_FUNCTIONS)
    for entry in SCORING_TEXT.values():
        description, formula = entry
        assert description == entry.description and len(description) > 20
        assert r"\operatorname{score}(q_i, k_j)" in formula
    assert r"\sqrt{d_k}" in SCORING_TEXT["scaled_dot"].formula
    assert r"\sqrt" not in SCORING_TEXT["dot"].formula
    assert r"\tanh" in SCORING_TEXT["additive"].formula
    assert r"\tau" in SCORING_TEXT["cosine"].formula


def test_every_backend_and_method_has_a_label():
    assert tuple(BACKEND_LABELS) == BACKENDS
    assert tuple(METHOD_LABELS) == METHODS
    assert BACKEND_LABELS["torch-cuda"] == "torch CUDA"
