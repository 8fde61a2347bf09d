"""How the decoder page's next token is chosen: every stage of temperature, top-k, top-p and
min-p over the model's next-token logits (attention_core.sampling), the distribution before and
after each one, top-p's cumulative line, and the token this step draws.

    next_token_steps(model, ids, logits, sampling)  the stages, cached by the ids and settings
    next_token_table(model, steps)                  the likeliest next tokens, as drawn from
    stages_table(steps)                             each stage's setting, kept set and mass
    stages_figure(steps, texts)                     the SHOWN likeliest tokens, stage by stage
    nucleus_figure(steps, texts)                    top-p's cumulative mass, its bar, its nucleus
    show_choice(model, state, sampling)             the page's section, top to bottom

The figure builders take the stages (with their digest for `render.cached`'s key) and the texts
of the tokens they name, never the ids to compute them again.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core.models.decoder import DecoderModel
from attention_core.models.generation import Generation, Sampling
from attention_core.sampling import FilterSteps, SamplingSteps, sampling_steps
from ui.models import smollm
from ui.widgets import describe, render, small_screens, theme
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of
from ui.widgets.render import figure

SHOWN = 12  # the likeliest tokens drawn as bars, stage by stage
TOP_TOKENS = 10  # rows of the next-token table
# Top-p's line: at least this many ranks, a few past the nucleus, never more than the cap.
NUCLEUS_RANKS, NUCLEUS_MAX_RANKS = 20, 100
STAGE_TITLES = ("Temperature", "Top-k", "Top-p", "Min-p")
MIN_SHOWN_P = 1e-8  # the bottom of a log axis: smaller probabilities are drawn there
# Before a stage in the bars' plain colour, after it in the chosen one; what a stage removes
# in the masked grey, hatched, so it does not rest on colour alone.
BEFORE_COLOR, AFTER_COLOR, REMOVED_COLOR = theme.BAR_COLOR, theme.CHOSEN_COLOR, theme.BLOCKED_COLOR
REMOVED_PATTERN = "/"


def next_token_steps(
    model: DecoderModel, ids: tuple[int, ...], logits: np.ndarray, sampling: Sampling
) -> SamplingSteps:
    """Every stage of choosing the token after `ids` (whose next-token `logits` the page holds)
    with `sampling`'s filters; once per distinct view, shared by every viewer."""
    return _steps(ids, sampling.filters, id(model), model, logits)


@smollm.let_go_with_model
@bounded_by_bytes(12 * MB, name="decoder.sampling")
def _steps(ids, filters, model_id, _model: DecoderModel, _logits) -> SamplingSteps:
    # Keyed on the ids: the logits are the model's for them. ~7 MB an entry (a few float64
    # rows of the 49152-token vocabulary per stage), hence only a few.
    return sampling_steps(_logits, *filters)


def shown_tokens(steps: SamplingSteps) -> np.ndarray:
    """The SHOWN likeliest next tokens by logit: the same order in every stage's panel."""
    return np.argsort(-steps.logits, kind="stable")[:SHOWN]


def nucleus_tokens(steps: SamplingSteps) -> np.ndarray:
    """The tokens top-p's line shows, likeliest first: its nucleus and a few past it."""
    nucleus = steps.top_p
    ranks = min(nucleus.order.size, NUCLEUS_MAX_RANKS, max(NUCLEUS_RANKS, nucleus.kept_count + 5))
    return nucleus.order[:ranks]


def _likeliest_drawn(steps: SamplingSteps) -> list[int]:
    p = steps.probabilities
    return [int(i) for i in np.argsort(-p, kind="stable")[:3] if p[i] > 0]


def named_tokens(steps: SamplingSteps) -> set[int]:
    """Every token the figures name: their texts are the figures' only other input."""
    return {int(i) for i in (*shown_tokens(steps), *nucleus_tokens(steps))} | set(
        _likeliest_drawn(steps)
    )


def drawn_from(steps: SamplingSteps) -> np.ndarray:
    """`(vocab,)` what the page shows as the next-token distribution: the filtered one when
    sampling; at T = 0 the model's own (T = 1), of which greedy takes the top."""
    return steps.model_probabilities if steps.temperature.setting == 0 else steps.probabilities


def next_token_table(model: DecoderModel, steps: SamplingSteps) -> pd.DataFrame:
    """The model's TOP_TOKENS likeliest next tokens with their probabilities as they are drawn
    (0 for a token the filters removed)."""
    p = drawn_from(steps)
    best = np.argsort(-steps.logits, kind="stable")[:TOP_TOKENS]
    return pd.DataFrame(
        {
            "token": [_token(model, i) for i in best],
            "id": best.astype(int),
            "probability": np.round(p[best], 4),
        }
    )


def setting_text(stage: FilterSteps) -> str:
    """A stage's setting as the page writes it ("off" at its neutral value)."""
    value = stage.setting
    if stage.name == "temperature":
        return "T = 0 (greedy)" if value == 0 else f"T = {value:g}"
    if stage.name == "top-k":
        return f"k = {int(value)}" if value else "off (k = 0)"
    if stage.name == "top-p":
        return f"p = {value:g}" if value < 1 else "off (p = 1)"
    return f"min-p = {value:g}, bar {stage.threshold:.4g}" if value else "off (min-p = 0)"


def stages_table(steps: SamplingSteps) -> pd.DataFrame:
    """One row per stage, in order: its setting, what it kept and removed, the kept share."""
    return pd.DataFrame(
        {
            "stage": [f"{i + 1} · {s.name}" for i, s in enumerate(steps.stages)],
            "setting": [setting_text(s) for s in steps.stages],
            "tokens kept": [s.kept_count for s in steps.stages],
            "removed here": [int(np.count_nonzero(s.removed)) for s in steps.stages],
            "share of its input kept": [round(s.kept_mass, 4) for s in steps.stages],
        }
    )


def stages_figure(steps: SamplingSteps, texts: dict[int, str]) -> go.Figure:
    """The SHOWN likeliest next tokens (by logit: the same order in every panel), one panel per
    stage: the distribution it was given and the one it passes on, what it removed hatched.
    `texts` names every token of `named_tokens(steps)`.

    The probability axes are logarithmic: one token often holds most of the mass, and on a
    linear axis the tail the filters cut would not show. (Renormalising multiplies the kept
    probabilities by one number, so on a log axis it lifts every kept bar by the same step.)"""
    shown = shown_tokens(steps)
    names = [describe.label(rank, texts[int(i)]) for rank, i in enumerate(shown)]
    count = len(steps.stages)
    gap = 0.08  # between panels, room for each panel's title
    height = (1 - gap * (count - 1)) / count
    data, layout = [], _layout(height=170 * count + 120)
    for i, stage in enumerate(steps.stages):
        axis = "" if i == 0 else str(i + 1)
        top = 1 - i * (height + gap)
        removed, kept = stage.removed[shown], stage.kept[shown]
        status = np.where(kept, "kept", np.where(removed, "removed here", "removed earlier"))
        common = {"type": "bar", "x": names, "xaxis": f"x{axis}", "yaxis": f"y{axis}"}
        data += [
            common
            | {
                "name": "before this stage",
                "y": stage.before[shown],
                "marker": {
                    "color": np.where(removed, REMOVED_COLOR, BEFORE_COLOR).tolist(),
                    "pattern": {"shape": np.where(removed, REMOVED_PATTERN, "").tolist()},
                },
                "customdata": status.tolist(),
                "hovertemplate": "%{x} before: p = %{y:.4f}, %{customdata}<extra></extra>",
                "legendgroup": "before",
                "showlegend": i == 0,
            },
            common
            | {
                "name": "after it (renormalised)",
                "y": stage.after[shown],
                "marker": {"color": AFTER_COLOR},
                "hovertemplate": "%{x} after: p = %{y:.4f}<extra></extra>",
                "legendgroup": "after",
                "showlegend": i == 0,
            },
        ]
        layout[f"xaxis{axis}"] = {
            "anchor": f"y{axis}",
            "showticklabels": i == count - 1,
            "tickangle": -45,
            "title": {"text": "next token, likeliest first" if i == count - 1 else ""},
        } | ({"matches": "x"} if i else {})
        drawn = np.concatenate([stage.before[shown], stage.after[shown]])
        lowest = max(drawn[drawn > 0].min(), MIN_SHOWN_P)
        layout[f"yaxis{axis}"] = {
            "anchor": f"x{axis}",
            "domain": [max(top - height, 0.0), top],
            "type": "log",
            "range": [np.log10(lowest) - 0.3, 0.05],  # from under the smallest bar to p = 1
            "dtick": 1,
            "title": {"text": "p (log)"},
        }
        layout["annotations"].append(_panel_title(i, stage, top))
    table = describe.ChartTable(
        np.column_stack(
            [steps.model_probabilities[shown], *(s.after[shown] for s in steps.stages)]
        ),
        tuple(names),
        ("model (T = 1)", *(f"after {s.name}" for s in steps.stages)),
        row_title="next token",
        title="The next token, stage by stage",
    )
    return describe.attach(figure(data, layout), _stages_summary(texts, steps), table)


def nucleus_figure(steps: SamplingSteps, texts: dict[int, str]) -> go.Figure:
    """Top-p's reading of its distribution: the cumulative probability of the likeliest tokens
    against their rank, the bar p, and the nucleus (the ranks it keeps) marked. `texts` names
    every token of `named_tokens(steps)`."""
    nucleus = steps.top_p
    size, p = nucleus.kept_count, nucleus.setting
    order = nucleus_tokens(steps)
    ranks = order.size
    cumulative = nucleus.cumulative[:ranks]
    x = np.arange(1, ranks + 1)
    inside = nucleus.kept[order]
    tokens = [texts[int(i)] for i in order]
    hover = "rank %{x} “%{text}”: cumulative %{y:.4f}<extra></extra>"
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": x,
            "y": cumulative,
            "name": "cumulative probability",
            "line": {"color": theme.OTHER_LINES_COLOR},
            "hoverinfo": "skip",
            "showlegend": False,  # the markers on it say what it is
        },
        *(
            {
                "type": "scatter",
                "mode": "markers",
                "x": x[where],
                "y": cumulative[where],
                "text": [t for t, w in zip(tokens, where, strict=True) if w],
                "name": name,
                "marker": {"color": color, "symbol": symbol, "size": 9},
                "hovertemplate": hover,
            }
            for where, name, color, symbol in (
                (inside, "in the nucleus", AFTER_COLOR, "circle"),
                (~inside, "left out", BEFORE_COLOR, "x"),
            )
        ),
        {
            "type": "scatter",
            "mode": "lines",
            "x": [1, ranks],
            "y": [p, p],
            "name": f"p = {p:g}",
            "line": {"color": theme.OTHER_LINES_COLOR, "dash": "dash"},
            "hovertemplate": f"p = {p:g}<extra></extra>",
        },
    ]
    after_top_k = " (after top-k)" if steps.top_k.setting else ""
    title = (
        f"Top-p, p = {p:g}: the nucleus is {size:,} token{'s' * (size != 1)}"
        if p < 1
        else "Top-p is off (p = 1): every token stays"
    )
    floor = max(0.0, np.floor(min(cumulative[0], p) * 20) / 20 - 0.05)
    layout = _layout(height=400) | {
        "title": {"text": title, "font": {"size": theme.font_size() + 3}},
        "xaxis": {"title": {"text": "tokens, likeliest first (rank)"}},
        # From just under the top token's share or p, whichever is lower: the crossing shows.
        "yaxis": {"title": {"text": "cumulative p"}, "range": [floor, 1.02]},
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        "hovermode": "closest",
    }
    last = min(size, ranks) - 1
    summary = (
        f"{title}. The cumulative probability of the likeliest tokens{after_top_k} starts at "
        f"{cumulative[0]:.3f} (“{tokens[0]}”) and reaches {nucleus.kept_mass:.3f} with token "
        f"{size:,}" + (f" (“{tokens[last]}”)" if size <= ranks else "") + ", the first time it "
        f"is at least p = {p:g}."
        if p < 1
        else f"{title}. The cumulative probability of the likeliest tokens{after_top_k} starts "
        f"at {cumulative[0]:.3f} (“{tokens[0]}”) and is {cumulative[-1]:.3f} after {ranks}."
    )
    table = describe.ChartTable(
        np.column_stack([nucleus.before[order], cumulative, inside.astype(float)]),
        tuple(describe.label(rank, token) for rank, token in enumerate(tokens)),
        ("probability", "cumulative", "in the nucleus (1 = yes)"),
        row_title="token by rank",
        title=title,
    )
    return describe.attach(figure(data, layout), summary, table)


def show_choice(model: DecoderModel, state: Generation, sampling: Sampling) -> None:
    """The section: what may be drawn and what this step draws, the stages' table, their bars,
    and top-p's line."""
    if state.ended:
        st.info("The model has finished: there is no next token to choose.")
        return
    used, step = sampling.as_used(), state.next_step
    steps = next_token_steps(model, state.ids, state.logits, used)
    token = state.next_token(steps)
    if used.greedy:
        st.info(
            "Temperature 0 is greedy decoding: all the mass goes to the likeliest token, so "
            "top-k, top-p and min-p find nothing to remove. Raise the temperature to sample: "
            "then the filters start to cut the tail.",
            icon=":material/info:",
        )
    kept_col, mass_col, draw_col = st.columns(3)
    kept_col.metric(
        "Tokens that may be drawn", f"{steps.min_p.kept_count:,} of {steps.logits.size:,}"
    )
    mass_col.metric("Their share of the tempered distribution", f"{steps.kept_mass:.1%}")
    draw_col.metric(
        "Greedy takes" if used.greedy else f"Seed {used.seed} draws, at step {step}",
        f"“{_token(model, token)}”",
        delta=f"p = {drawn_from(steps)[token]:.4f} "
        + ("by the model (T = 1)" if used.greedy else "after the filters"),
        delta_color="off",
    )
    small_screens.table(stages_table(steps), hide_index=True)
    st.caption(
        "Each stage renormalises what it keeps, so its share is of the distribution it was given; "
        "the share of the tempered distribution above is their product."
    )
    # The stages are the model's for these ids and settings: that is their digest.
    drawn = render.digested(digest_of(id(model), state.ids, used.filters), steps)
    texts = {i: _token(model, i) for i in sorted(named_tokens(steps))}
    render.show(render.cached(stages_figure, drawn, texts), filename="decoder-sampling-stages")
    st.caption(
        "Blue: the distribution a stage was given; red: the one it passes on. Hatched grey: what "
        "it removed. The axes are logarithmic, so the tail the filters cut stays visible."
    )
    line_col, text_col = st.columns([3, 2])
    with line_col:
        render.show(
            render.cached(nucleus_figure, drawn, texts),
            filename="decoder-top-p",
        )
    text_col.markdown(
        "**Top-p** walks down the tokens, likeliest first, adding up their probabilities, and "
        "stops at the first token that brings the sum to p: the nucleus. When the model is sure "
        "it holds a token or two, when it hesitates many.\n\n"
        "**Min-p** keeps the tokens at least min-p times as likely as the top one, so its bar "
        "rises and falls with the model's confidence. **Top-k** keeps k tokens whatever the "
        "distribution looks like."
    )


def _panel_title(index: int, stage: FilterSteps, top: float) -> dict:
    kept = f"keeps {stage.kept_count:,} token{'s' * (stage.kept_count != 1)}"
    return {
        # Two short lines: in one, a phone's narrow figure cut it off.
        "text": f"<b>{index + 1} · {STAGE_TITLES[index]}</b>, {setting_text(stage)}:<br>{kept} "
        f"({stage.kept_mass:.1%} of its input)",
        "x": 0,
        "y": top,
        "xref": "paper",
        "yref": "paper",
        "xanchor": "left",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": theme.font_size()},
    }


def _stages_summary(texts: dict[int, str], steps: SamplingSteps) -> str:
    said = "; ".join(
        f"{s.name} {setting_text(s)} keeps {s.kept_count:,} ({s.kept_mass:.1%} of its input)"
        for s in steps.stages
    )
    p = steps.probabilities
    drawn = ", ".join(f"“{texts[i]}” {p[i]:.3f}" for i in _likeliest_drawn(steps))
    return (
        f"The next token, stage by stage, over the {SHOWN} likeliest tokens: {said}. "
        f"Drawn from: {drawn}."
    )


def _layout(height: int) -> dict:
    return {
        "barmode": "group",
        "height": height,
        "font": {"size": theme.font_size()},
        # Below the plot, under the x axis (ui.margins places it): above, a phone's narrow
        # figure put it on the first panel's title.
        "legend": {"orientation": "h", "y": -0.1},
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        "annotations": [],
    }


def _token(model: DecoderModel, token_id: int) -> str:
    """A token's text as Python writes it in quotes: whitespace and escapes visible."""
    return repr(model.token_text(int(token_id)))[1:-1]
