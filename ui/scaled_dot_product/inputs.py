"""The scaled dot-product page's controls, bound to its PageState: the example (a preset, its
options, the four sizes) and the settings that turn Q and K into weights (scoring function, √d_k,
causal mask, temperature τ).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.presets import (
    DEFAULT_SENTENCE,
    PRESETS,
    SIZE_LIMITS,
    preset_sizes,
    sentence_tokens,
)
from ui.widgets.hand_made import HandMadeExample
from ui.widgets.state import PageState, stored

PRESET_TITLES = {
    "three_token": "3 tokens, d_k = 2 (worked by hand)",
    "sentence": "A sentence, random embeddings and projections",
    "random": "Random numbers (seeded)",
    "sharp_flat": "Sharp vs flat softmax",
}
SCORING_TITLES = {
    "dot_product": "Dot product",
    "additive": "Additive (Bahdanau)",
    "cosine": "Cosine similarity",
}
# The four sizes, in the order `example_for` and the link name them, with their slider labels.
SIZE_LABELS = {
    "n_q": "Queries (rows of Q)",
    "n_k": "Keys and values (rows of K, V)",
    "d_k": "d_k (width of Q, K)",
    "d_v": "d_v (width of V)",
}
SIZES = tuple(SIZE_LABELS)
TAU_RANGE = (0.1, 5.0)


@dataclass(frozen=True)
class ExampleChoice:
    """The preset chosen and what it reads: a sentence, a seed, or which of the sharp/flat pair."""

    preset: str
    sentence: str = DEFAULT_SENTENCE
    seed: int = 0
    sharp: bool = True


@dataclass(frozen=True)
class Settings:
    """How the scores are computed and turned into weights."""

    scoring_choice: str  # a SCORING_TITLES key
    scaling: bool  # divide the dot product by √d_k
    causal: bool
    tau: float  # the scores are divided by it

    @property
    def scoring(self) -> str:
        """The scoring function `attention_for` computes: the dot product scaled or not."""
        if self.scoring_choice != "dot_product":
            return self.scoring_choice
        return "scaled_dot" if self.scaling else "dot"

    def exported(self, scale: float) -> dict:
        """The settings saved with a JSON export; an upload reads back the first four."""
        return {"scoring": self.scoring_choice, "scaling": self.scaling, "causal": self.causal,
                "tau": self.tau, "scoring_function": self.scoring, "scale": scale}  # fmt: skip


def use_preset_sizes(view: PageState, hand: HandMadeExample) -> None:
    """A new preset (or sentence) brings its own sizes and drops numbers from a link/upload."""
    hand.drop()
    try:
        sizes = preset_sizes(view.value("preset"), stored(view, "sentence", DEFAULT_SENTENCE))
    except AttentionInputError:
        return
    hand.set_sizes(sizes)


def choose_example(view: PageState, hand: HandMadeExample) -> ExampleChoice:
    """The preset, and under it the one option it has. A sentence that cannot be used is said
    so, and the default sentence shown until it is fixed."""
    preset = st.selectbox(
        "Preset",
        list(PRESETS),
        format_func=PRESET_TITLES.get,
        key=view.choice_key("preset", "three_token", list(PRESETS)),
        on_change=use_preset_sizes,
        args=(view, hand),
    )
    if preset == "sentence":
        sentence = st.text_input(
            "Sentence (up to 8 words)",
            key=view.text_key("sentence", DEFAULT_SENTENCE, max_chars=80),
            on_change=use_preset_sizes,
            args=(view, hand),
        )
        try:
            sentence_tokens(sentence)
        except AttentionInputError as error:
            st.error(f"{error} Until then the page shows “{DEFAULT_SENTENCE}”.",
                     icon=":material/edit:")  # fmt: skip
            sentence = DEFAULT_SENTENCE
        return ExampleChoice(preset, sentence=sentence, seed=_seed(view, hand))
    if preset == "random":
        return ExampleChoice(preset, seed=_seed(view, hand))
    if preset == "sharp_flat":
        pair = st.segmented_control(
            "Edit which of the pair",
            ["flat", "sharp"],
            key=view.choice_key("pair", "sharp", ["flat", "sharp"]),
            required=True,
            on_change=hand.drop,
        )
        return ExampleChoice(preset, sharp=pair != "flat")
    return ExampleChoice(preset)


def _seed(view: PageState, hand: HandMadeExample) -> int:
    return int(
        st.number_input(
            "Seed", min_value=0, max_value=9999, step=1,
            key=view.int_key("seed", 0, lo=0, hi=9999), on_change=hand.drop,
            help="The same seed always gives the same numbers.",
        )
    )  # fmt: skip


def choose_sizes(view: PageState) -> tuple[int, int, int, int]:
    """(n_q, n_k, d_k, d_v), side by side; the three-token example's by default."""
    return tuple(
        column.slider(label, 1, SIZE_LIMITS[name],
                      key=view.int_key(name, size, lo=1, hi=SIZE_LIMITS[name]))
        for column, (name, label), size in zip(
            st.columns(len(SIZES)), SIZE_LABELS.items(), PRESETS["three_token"], strict=True
        )
    )  # fmt: skip


def choose_settings(view: PageState) -> Settings:
    """The scoring function; √d_k and the causal mask; the temperature."""
    left, middle, right = st.columns(3)
    scoring_choice = left.selectbox(
        "Scoring function",
        list(SCORING_TITLES),
        format_func=SCORING_TITLES.get,
        key=view.choice_key("scoring", "dot_product", list(SCORING_TITLES)),
    )
    scaling = middle.toggle(
        "Divide by √d_k",
        key=view.bool_key("scaling", True),
        disabled=scoring_choice != "dot_product",
        help="Only the dot product is scaled by √d_k; cosine and additive scores are bounded.",
    )
    causal = middle.toggle(
        "Causal mask",
        key=view.bool_key("causal", False),
        help="Query i may only look at keys 1..i.",
    )
    tau = right.slider(
        "Temperature τ (divides the scores)",
        *TAU_RANGE,
        step=0.05,
        key=view.float_key("tau", 1.0, lo=TAU_RANGE[0], hi=TAU_RANGE[1]),
        disabled=scoring_choice == "additive",
        help="τ < 1 sharpens the softmax, τ > 1 flattens it. Additive scores do not use it.",
    )
    return Settings(scoring_choice, scaling=scaling, causal=causal, tau=tau)
