"""What a trained model can be asked: its heads at any saved step, the gradient one step would
follow, what removing a head costs, how its layers compose, and a head's circuits.

Each group of a control and its charts is a fragment of its own (a slider moves only its
charts); every control is in the link.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attention_core.training.run import EVAL_EVERY, TrainingSettings
from ui.learning import data, figures
from ui.models import toy
from ui.widgets import render
from ui.widgets.state import PageState, write_url_after_fragment

KINDS = {"k": "K (into the keys)", "q": "Q (into the queries)", "v": "V (into the values)"}
QK_READINGS = {"tokens": "tokens (the vocabulary)", "positions": "positions"}


def bind_link(view: PageState, settings: TrainingSettings) -> None:
    """Read this section's controls from the link now, while the run still trains and they are
    not drawn yet: the link written at the end of each run would otherwise drop them."""
    names = data.head_ids(settings.n_layers, settings.n_heads)
    steps = sorted({*range(0, settings.steps, EVAL_EVERY), settings.steps})
    view.choice_key("step", settings.steps, steps)
    view.choice_key("head", "", names)  # "": not chosen yet, the strongest head once trained
    view.multi("remove", [], names)
    view.choice_key("composition", "k", list(KINDS))
    view.choice_key("qk_over", "tokens", list(QK_READINGS))


def head_choice(view: PageState, run: toy.TrainingRun, curves: data.Curves) -> tuple[int, int]:
    """The head the gradient, circuits and editor views are about: by default the strongest
    induction head (the strongest previous-token head in a model of one layer)."""
    config = run.settings.config
    names = data.head_ids(config.n_layers, config.n_heads)
    layer, head, _ = curves.best_induction()
    if config.n_layers == 1:
        head = int(np.argmax(curves.previous[-1, 0]))
    chosen = st.selectbox(
        "Head (layer.head, from 0 as TransformerLens counts)",
        names,
        key=view.choice_key("head", f"{layer}.{head}", names),
    )
    first, second = chosen.split(".")
    return int(first), int(second)


@st.fragment
def stripe(view: PageState, run: toy.TrainingRun) -> None:
    steps = [chunk.step for chunk in run.chunks]
    step = st.select_slider(
        "Step",
        steps,
        key=view.choice_key("step", steps[-1], steps),
        format_func=lambda s: f"{s:,}",
        help=f"Every {EVAL_EVERY} steps was kept: drag back to before the phase change.",
    )
    chunk = run.chunks[steps.index(step)]
    example = data.probe_of(run.settings).example
    render.show(
        render.cached(
            figures.patterns_panels,
            render.digested(f"{run.key}:{step}", chunk.evaluation.patterns),
            toy.token_labels(example),
            step,
        ),
        filename=f"learning-heads-step-{step}",
        key="learning.stripe",
    )
    write_url_after_fragment(view)


def gradient_step(run: toy.TrainingRun, layer: int, head: int) -> None:
    """One backward pass on the held-out example at the last saved step: the head's pattern, the
    gradient at it, what passes the softmax, and each head's weight gradients."""
    chunk = run.final
    grads = data.gradients(run.key, chunk.step, chunk.params, run.settings)
    example = data.probe_of(run.settings).example
    name = f"head {layer}.{head}"
    render.show(
        render.cached(
            figures.gradient_panels,
            render.digested(f"{run.key}:{chunk.step}:{layer}.{head}:P", grads.weights[layer, head]),
            render.digested(
                f"{run.key}:{chunk.step}:{layer}.{head}:dP", grads.d_weights[layer, head]
            ),
            render.digested(
                f"{run.key}:{chunk.step}:{layer}.{head}:dS", grads.d_scaled[layer, head]
            ),
            toy.token_labels(example),
            name,
        ),
        filename=f"learning-gradient-{layer}-{head}",
    )
    d_s = grads.d_scaled[layer, head]
    query, key = np.unravel_index(int(np.argmax(np.abs(d_s))), d_s.shape)
    st.markdown(
        f"At step {chunk.step:,} the loss on this sequence is {grads.loss:.3f} nats. For "
        f"{name} the softmax passes the largest push at query {query + 1} (token "
        f"{example[query]}), key {key + 1} (token {example[key]}): dS = {d_s[query, key]:+.4f}, "
        f"{'raising' if d_s[query, key] < 0 else 'lowering'} that weight when the step goes "
        "against the gradient. A key with weight 0 (the future, masked) gets exactly 0: no "
        "gradient crosses the mask."
    )
    config = run.settings.config
    table = pd.DataFrame(
        grads.norms.reshape(-1, 4),
        index=pd.Index(data.head_ids(config.n_layers, config.n_heads), name="head"),
        columns=["‖dW_Q‖", "‖dW_K‖", "‖dW_V‖", "‖dW_O‖"],
    )  # fmt: skip
    st.dataframe(table.style.format("{:.4f}"), width="stretch")
    st.caption(
        f"The key bias gets no gradient: the largest |db_K| is {grads.key_bias:.1e} (rounding), "
        f"against {grads.query_bias:.1e} for db_Q. q·b_K is the same for every key of a query, "
        "and a softmax does not move when its whole row moves."
    )


@st.fragment
def ablation(view: PageState, run: toy.TrainingRun) -> None:
    chunk = run.final
    settings, config = run.settings, run.settings.config
    read = data.readings(run.key, chunk.step, chunk.params, settings)
    render.show(
        render.cached(
            figures.ablation_figure,
            render.digested(f"{run.key}:{chunk.step}:ablation:repeated", read.repeated),
            render.digested(f"{run.key}:{chunk.step}:ablation:first", read.first),
            read.whole.loss_repeated,
            read.whole.loss_first,
        ),
        filename="learning-ablation",
    )
    names = data.head_ids(config.n_layers, config.n_heads)
    gone = st.multiselect(
        "Remove these heads together",
        names,
        key=view.multi("remove", [], names),
        placeholder="Choose heads to remove",
    )
    if gone:
        mask = np.ones((config.n_layers, config.n_heads))
        for name in gone:
            layer, head = map(int, name.split("."))
            mask[layer, head] = 0.0
        result = data.removed(run.key, chunk.step, chunk.params, settings, tuple(map(tuple, mask)))
        repeated_col, first_col = st.columns(2)
        repeated_col.metric(
            "repeated tokens", f"{result.loss_repeated:.3f} nats",
            f"{result.loss_repeated - read.whole.loss_repeated:+.3f}", delta_color="inverse",
        )  # fmt: skip
        first_col.metric(
            "first-seen tokens", f"{result.loss_first:.3f} nats",
            f"{result.loss_first - read.whole.loss_first:+.3f}", delta_color="inverse",
        )  # fmt: skip
    write_url_after_fragment(view)


@st.fragment
def composition(view: PageState, run: toy.TrainingRun) -> None:
    chunk = run.final
    read = data.readings(run.key, chunk.step, chunk.params, run.settings)
    kind = st.radio(
        "Composition", list(KINDS), format_func=KINDS.get, horizontal=True,
        key=view.choice_key("composition", "k", list(KINDS)),
    )  # fmt: skip
    for scores in read.compositions:
        values = getattr(scores, kind)
        render.show(
            render.cached(
                figures.composition_figure,
                render.digested(
                    f"{run.key}:{chunk.step}:{kind}:{scores.earlier}{scores.later}", values
                ),
                scores.earlier,
                scores.later,
                kind.upper(),
            ),
            filename=f"learning-{kind}-composition-{scores.earlier}-{scores.later}",
        )
        writer, reader = np.unravel_index(int(np.argmax(values)), values.shape)
        st.markdown(
            f"Strongest: head {scores.earlier}.{writer} into head {scores.later}.{reader}, "
            f"{values[writer, reader]:.2f}, against {read.baseline:.2f} for random matrices of "
            "these sizes."
        )
    write_url_after_fragment(view)


def circuits(
    view: PageState, run: toy.TrainingRun, curves: data.Curves, layer: int, head: int
) -> None:
    over = st.radio(
        "QK read over", list(QK_READINGS), format_func=QK_READINGS.get, horizontal=True,
        key=view.choice_key("qk_over", "tokens", list(QK_READINGS)),
    )  # fmt: skip
    chunk = run.final
    through = data.strongest_previous(curves, layer) if layer > 0 else None
    read = data.circuits(run.key, chunk.step, chunk.params, layer, head, over, through)
    through = read.through
    config = run.settings.config
    tokens = [str(t) for t in range(config.d_vocab)]
    qk_col, ov_col = st.columns(2)
    with qk_col:
        if over == "positions":
            positions = [str(p) for p in range(config.n_ctx)]
            title, labels, rows, cols = (f"QK of head {layer}.{head}, positions", positions,
                                         "query position", "key position")  # fmt: skip
        elif through is None:
            title, labels, rows, cols = (f"QK of head {layer}.{head}, tokens", tokens,
                                         "query token", "key token")  # fmt: skip
        else:
            title, labels, rows, cols = (
                f"QK of head {layer}.{head} via head {through[0]}.{through[1]}",
                tokens, "query token", "token before the key",
            )  # fmt: skip
        render.show(
            render.cached(
                figures.circuit_figure,
                render.digested(
                    f"{run.key}:{chunk.step}:qk:{layer}.{head}:{over}:{through}", read.qk
                ),
                title=title,
                row_labels=labels,
                col_labels=labels,
                row_title=rows,
                col_title=cols,
            ),
            filename=f"learning-qk-{layer}-{head}",
        )
    with ov_col:
        render.show(
            render.cached(
                figures.circuit_figure,
                render.digested(f"{run.key}:{chunk.step}:ov:{layer}.{head}", read.ov),
                title=f"OV of head {layer}.{head}",
                row_labels=tokens,
                col_labels=tokens,
                row_title="token attended to",
                col_title="logit of token",
            ),
            filename=f"learning-ov-{layer}-{head}",
        )
    copying_col, copied_col = st.columns(2)
    copying_col.metric("copying score (−1 to 1)", f"{read.copying:+.2f}")
    copied_col.metric("tokens it copies best", f"{read.copied:.0%}")
    if through is not None:
        st.markdown(
            f"Read through head {through[0]}.{through[1]}, the strongest previous-token head "
            "before it: a bright diagonal means the query's token attends to keys whose previous "
            "token is that same token, the induction rule."
        )
