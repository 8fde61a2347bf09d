"""The words and LaTeX the pages show for names that `attention_core` computes with.

`attention_core` holds the math and names things by plain keys ("scaled_dot", "torch-cpu");
how those are described to a learner lives here, next to the pages that show it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

__all__ = ["BACKEND_LABELS", "METHOD_LABELS", "SCORING_TEXT", "ScoringText"]


class ScoringText(NamedTuple):
    """How a scoring function (a key of `attention_core.SCORING_FUNCTIONS`) is described."""

    description: str
    formula: str  # LaTeX, for st.latex


SCORING_TEXT: Mapping[str, ScoringText] = MappingProxyType(
    {
        "dot": ScoringText(
            "Unscaled dot product: scores grow with d_k, so the softmax saturates.",
            r"\operatorname{score}(q_i, k_j) = q_i \cdot k_j",
        ),
        "scaled_dot": ScoringText(
            "Scaled dot product (Transformer): divide by √d_k to keep the score variance near 1.",
            r"\operatorname{score}(q_i, k_j) = \frac{q_i \cdot k_j}{\sqrt{d_k}}",
        ),
        "additive": ScoringText(
            "Additive (Bahdanau): a one-hidden-layer network scores each query-key pair.",
            r"\operatorname{score}(q_i, k_j) = v^\top \tanh(W_q q_i + W_k k_j)",
        ),
        "cosine": ScoringText(
            "Cosine similarity: only the angle matters; a temperature sets how sharp it is.",
            r"\operatorname{score}(q_i, k_j) = \frac{1}{\tau}"
            r"\,\frac{q_i \cdot k_j}{\lVert q_i \rVert\,\lVert k_j \rVert}",
        ),
    }
)

# The backends and methods of `attention_core.cost` (its BACKENDS and METHODS), as labelled.
BACKEND_LABELS: Mapping[str, str] = MappingProxyType(
    {"numpy": "NumPy", "torch-cpu": "torch CPU", "torch-cuda": "torch CUDA"}
)
METHOD_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "full": "full (n×n matrix)",
        "chunked": "chunked (online softmax)",
        "fused": "torch fused SDPA kernel",
    }
)
