"""The run as it grows: where it stands, its losses and every head's scores by step, the phase
change named once it has happened, and every head's attention at the latest checkpoint.

The page draws this in a fragment that runs again every POLL_S seconds while the run goes on,
so every viewer of the link watches the same run grow (one run, the board's: ui.models.toy);
figures are keyed on the run and how far it has come, so a room costs one figure per update.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from attention_core.lessons import learning
from attention_core.training.formation import INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD, formations
from attention_core.training.run import EVAL_EVERY, HELD_OUT_COUNT
from attention_core.training.sequences import period_range
from ui.learning import data, figures
from ui.models import toy
from ui.widgets import render

# How often a page looks at a growing run: the charts move every 25 steps (a fraction of a
# second of training), and a second is as often as a reader can follow them. A room looks less
# often, a second more for every VIEWERS_A_SECOND viewers: fifty, each drawing the charts every
# second, hold the server's cores and slow the run they watch (bench/bench_learning_room.py).
POLL_S = 1.0
VIEWERS_A_SECOND = 10
MOST_POLL_S = 5.0


def poll_seconds(watchers: int) -> float:
    """Seconds between a page's looks at a run that `watchers` viewers watch."""
    return min(MOST_POLL_S, POLL_S * math.ceil(max(1, watchers) / VIEWERS_A_SECOND))


def run_text(run: toy.TrainingRun, *, uploaded: bool) -> str:
    """What is trained on what, and how it is scored, in a paragraph."""
    settings = run.settings
    shortest, longest = period_range(settings.n_ctx)
    layers = f"{settings.n_layers} layer{'s' if settings.n_layers > 1 else ''}"
    said = (
        f"{layers} of {settings.n_heads} heads, d_model {settings.d_model}, {settings.d_vocab} "
        f"tokens, {settings.n_ctx} positions; AdamW at {settings.lr:g}, {settings.batch} fresh "
        f"sequences a step, each a segment of {shortest} to {longest} random tokens repeated "
        f"to fill the context. Scored every {EVAL_EVERY} steps on {HELD_OUT_COUNT} held-out "
        "sequences never trained on. " + after_lines()
    )
    if uploaded:
        return said + " The model is your file's: this run is yours alone."
    return said + " Everyone who opens this link watches this one run."


def after_lines() -> str:
    return (
        f"A head counts as a previous-token head once its score passes {PREVIOUS_TOKEN_HEAD}, "
        f"and as an induction head once its prefix matching passes {INDUCTION_HEAD}."
    )


def progress(run: toy.TrainingRun) -> None:
    """The progress bar, and why the run is not moving if it is not."""
    if run.error:
        st.error(run.error, icon=":material/error:")
        return
    fraction = run.step / run.settings.steps if run.chunks else 0.0
    if run.finished:
        text = f"Trained: {run.step:,} steps" + (" (stopped early)" if run.diverged else "")
    else:
        text = toy.progress_text(run)
    st.progress(min(1.0, fraction), text=text)
    if run.state == "idle":
        st.caption("Paused: nobody was watching. It goes on from here now.")
    if run.diverged:
        st.warning(run.diverged, icon=":material/warning:")


def charts(run: toy.TrainingRun) -> data.Curves | None:
    """The losses and scores by step, the sentence on the phase change, the latest patterns;
    the curves drawn (None before the first checkpoint)."""
    if not run.chunks:
        return None
    curves = data.curves(run)
    n_layers = run.settings.n_layers
    if n_layers == 1:
        st.markdown(
            learning.one_layer_sentence(curves.best_induction()[2], curves.chance_induction)
        )
    else:
        st.markdown(learning.phase_change_sentence(curves.steps, curves.previous, curves.induction))
    shown = render.digested(run.digest, curves)
    loss_col, induction_col = st.columns(2)
    with loss_col:
        render.show(render.cached(figures.loss_figure, shown), filename="learning-loss")
    with induction_col:
        render.show(
            render.cached(figures.scores_figure, shown, "induction"), filename="learning-induction"
        )
    previous_col, table_col = st.columns(2)
    with previous_col:
        render.show(
            render.cached(figures.scores_figure, shown, "previous"), filename="learning-previous"
        )
    with table_col:
        st.dataframe(_heads_table(curves), width="stretch")
    latest = run.chunks[-1]
    st.markdown(
        f"**Every head now (step {latest.step:,})**, on a held-out sequence: {_segment_text(run)}."
    )
    example = data.probe_of(run.settings).example
    render.show(
        render.cached(
            figures.patterns_panels,
            render.digested(f"{run.key}:{latest.step}", latest.evaluation.patterns),
            toy.token_labels(example),
            latest.step,
        ),
        filename=f"learning-heads-step-{latest.step}",
        key="learning.now",
    )
    return curves


def _heads_table(curves: data.Curves) -> pd.DataFrame:
    """Each head's scores now, and the step it passed each line (blank: not yet)."""
    _, n_layers, n_heads = curves.induction.shape
    passed = {
        role: {(f.layer, f.head): f.step for f in formations(curves.steps, scores, line)}
        for role, scores, line in (
            ("previous", curves.previous, PREVIOUS_TOKEN_HEAD),
            ("induction", curves.induction, INDUCTION_HEAD),
        )
    }
    heads = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    return pd.DataFrame(
        {
            "previous": [curves.previous[-1][h] for h in heads],
            "prefix match": [curves.induction[-1][h] for h in heads],
            "previous from step": pd.array(
                [passed["previous"].get(h) for h in heads], dtype="Int64"
            ),
            "induction from step": pd.array(
                [passed["induction"].get(h) for h in heads], dtype="Int64"
            ),
        },
        index=pd.Index(data.head_ids(n_layers, n_heads), name="head"),
    ).round(2)


def _segment_text(run: toy.TrainingRun) -> str:
    example = data.probe_of(run.settings).example
    half = example.size // 2
    first = " ".join(map(str, example[:half]))
    return f"{half} token ids, “{first}”, then the same {half} again"
