"""The learning page's controls: the model's sizes and the training's, every one in the link.

Each control keeps what its reader typed, and a setting the run cannot take gets its sentence
right under it (`settings_problems`); the run starts only once none is left. A link's values are
bound loosely (a context of 2, a learning rate of 0) so that the page can say what is wrong with
them next to the input; only absurd sizes are refused by the link itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from attention_core.training.run import TrainingSettings, settings_problems
from ui.widgets.state import PageState

LAYERS = (1, 2, 3)
HEADS = (1, 2, 4, 8)
D_MODELS = (16, 32, 64, 128)
BATCHES = (8, 16, 32, 64, 128)
DEFAULTS = TrainingSettings()
# What a link may put in a box, the box then saying what the run can take: wider than the run's
# limits, so that `steps=9000` reaches the sentence, narrower than anything that costs memory.
BOX_LIMITS = {"d_vocab": (1, 10_000), "n_ctx": (1, 1_000), "steps": (1, 1_000_000)}
MAX_SEED = 2**31 - 1
LR_CHARS = 40


@dataclass(frozen=True)
class Asked:
    """The settings as the controls hold them, right or wrong (lr as a number, or the text typed
    if it is not one)."""

    n_layers: int
    n_heads: int
    d_model: int
    d_vocab: int
    n_ctx: int
    steps: int
    lr: object
    batch: int
    seed: int


def _learning_rate(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return text


def settings_from_controls(view: PageState) -> TrainingSettings | None:
    """Draw the controls in two columns; the settings they hold, or None (each problem said
    under its input)."""
    keys = {
        "layers": view.choice_key("layers", DEFAULTS.n_layers, LAYERS),
        "heads": view.choice_key("heads", DEFAULTS.n_heads, HEADS),
        "d_model": view.choice_key("d_model", DEFAULTS.d_model, D_MODELS),
        "vocab": _box_key(view, "vocab", "d_vocab"),
        "context": _box_key(view, "context", "n_ctx"),
        "steps": _box_key(view, "steps", "steps"),
        "lr": view.text_key("lr", f"{DEFAULTS.lr:g}", max_chars=LR_CHARS),
        "batch": view.choice_key("batch", DEFAULTS.batch, BATCHES),
        "seed": view.int_key("seed", DEFAULTS.seed, lo=0, hi=MAX_SEED),
    }
    model_col, training_col = st.columns(2)
    # A place under each input for its sentence, filled once every setting is read.
    slots = {}
    with model_col:
        st.markdown("**The model**")
        n_layers = st.select_slider(
            "Layers", LAYERS, key=keys["layers"],
            help="Attention layers, one after another, each adding its heads' outputs to the "
            "residual stream. An induction head needs two.",
        )  # fmt: skip
        slots["n_layers"] = st.empty()
        n_heads = st.select_slider("Heads per layer", HEADS, key=keys["heads"])
        slots["n_heads"] = st.empty()
        d_model = st.select_slider("d_model (features per token)", D_MODELS, key=keys["d_model"])
        slots["d_model"] = st.empty()
        d_vocab = _box("Vocabulary (different tokens)", keys["vocab"], "d_vocab")
        slots["d_vocab"] = st.empty()
        n_ctx = _box("Context (tokens a sequence holds)", keys["context"], "n_ctx")
        slots["n_ctx"] = st.empty()
    with training_col:
        st.markdown("**The training**")
        steps = _box("Steps", keys["steps"], "steps", step=100)
        slots["steps"] = st.empty()
        lr_text = st.text_input(
            "Learning rate (AdamW)", key=keys["lr"], max_chars=LR_CHARS,
            help="The size of each step downhill; 3e-3 forms an induction head in a few "
            "hundred steps here.",
        )  # fmt: skip
        slots["lr"] = st.empty()
        batch = st.select_slider("Batch (sequences a step)", BATCHES, key=keys["batch"])
        slots["batch"] = st.empty()
        seed = st.number_input(
            "Seed (initial weights and sequences)", 0, MAX_SEED, step=1, key=keys["seed"]
        )
        slots["seed"] = st.empty()
    asked = Asked(
        n_layers, n_heads, d_model, int(d_vocab), int(n_ctx), int(steps),
        _learning_rate(lr_text.strip()), batch, int(seed),
    )  # fmt: skip
    problems = settings_problems(asked)
    for name, problem in problems.items():
        slots[name].error(problem, icon=":material/error:")
    if problems:
        return None
    return TrainingSettings(**vars(asked))


def _box_key(view: PageState, name: str, field: str) -> str:
    lo, hi = BOX_LIMITS[field]
    return view.int_key(name, getattr(DEFAULTS, field), lo=lo, hi=hi)


def _box(label: str, key: str, field: str, step: int = 1) -> int:
    lo, hi = BOX_LIMITS[field]
    return st.number_input(label, lo, hi, step=step, key=key)
