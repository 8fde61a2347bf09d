"""Branching: fork the decoder's text at the current step into its likeliest next tokens and
continue each for a few tokens, every branch reading the one KV cache of the shared prefix.

    fork(model, state, sampling, count, length)  the branches (`Fork`): count × length decode
                                                 steps once per distinct view, for every viewer
    branch_table, branch_figure                  what the page shows of them
    branch_view(view, model, state, sampling)    the page's section (a fragment)

The cache keeps numbers only (tokens, probabilities, positions and bytes), never a branch's KV
cache: what is shown of the caches is measured while they exist.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core.models.decoder import DecoderModel
from attention_core.models.generation import Generation, Sampling, extend
from attention_core.sampling import ContinuationProbability, continuation_probability
from server.lane import LONG_RUNS
from ui.decoder.choosing import drawn_from
from ui.models import smollm
from ui.widgets import lines, render, small_screens, theme
from ui.widgets.byte_cache import MB, bounded_by_bytes, digest_of
from ui.widgets.state import PageState, write_url_after_fragment

MAX_BRANCHES, MAX_BRANCH_TOKENS = 5, 6  # at most 30 decode steps for one view
DEFAULT_BRANCHES, DEFAULT_BRANCH_TOKENS = 3, 4


@dataclass(frozen=True, eq=False)
class Branch:
    """One continuation of the prefix, starting with one of the fork's alternatives.

    token_ids  the tokens it appends (fewer than asked if it ends with <|im_end|>)
    model      their probability under the model's own distributions (T = 1, nothing removed)
    sampler    the same under the page's sampling: the chance the sampler writes exactly this
               branch (None when greedy, which takes the argmax with certainty)
    positions  the positions its cache adds to the prefix's (one key and value row per layer
               and KV head each); `cache_bytes` their bytes
    in_place   True if those rows went into the prefix's buffer (its room to grow); False if
               the prefix's rows were first copied into a buffer of its own
    """

    token_ids: tuple[int, ...]
    model: ContinuationProbability
    sampler: ContinuationProbability | None
    positions: int
    cache_bytes: int
    in_place: bool


@dataclass(frozen=True, eq=False)
class Fork:
    """The branches of one prefix: `prefix_positions` cached once (`prefix_bytes`), read by all.
    `asked` branches were asked for; the filters may have kept fewer next tokens."""

    prefix_positions: int
    prefix_bytes: int
    asked: int
    branches: tuple[Branch, ...]


def fork(
    model: DecoderModel, state: Generation, sampling: Sampling, count: int, length: int
) -> Fork:
    """The `count` likeliest next tokens after `state` (after the filters when sampling), each
    continued to `length` tokens by the core's ``extend`` (greedy, or seeded by the seed and
    the step, as the page's own text is: the branch the page would take is its text), every
    branch starting from `state.cache`."""
    used = sampling.as_used()
    state = replace(state, sampling=used)
    return _fork(state.ids, state.next_step, used, count, length, id(model), model, state)


@smollm.let_go_with_model
@bounded_by_bytes(8 * MB, name="decoder.branches", spinner="Growing the branches…", lane=LONG_RUNS)
def _fork(ids, step, sampling, count, length, model_id, _model, _state: Generation) -> Fork:
    # Keyed on the prefix's ids, the next step (it seeds the draws) and the settings: the state
    # only brings the prefix's cache and logits, which the ids determine.
    p = drawn_from(sampling.steps(_state.logits))
    alternatives = [int(t) for t in np.argsort(-p, kind="stable")[:count] if p[t] > 0]
    branches = tuple(
        _branch(_state, extend(_model, _state, length, first_token=token)) for token in alternatives
    )
    return Fork(_state.cache.length, _state.cache.bytes_used, count, branches)


def _branch(prefix: Generation, grown: Generation) -> Branch:
    """What `grown` adds to `prefix`: its tokens, their probabilities, its own cache rows."""
    added = grown.steps[len(prefix.steps) :]
    before, after = prefix.cache, grown.cache
    return Branch(
        token_ids=tuple(step.token_id for step in added),
        model=continuation_probability([step.model_probability for step in added]),
        sampler=None
        if prefix.sampling.greedy
        else continuation_probability([step.probability for step in added]),
        positions=after.length - before.length,
        cache_bytes=after.bytes_used - before.bytes_used,
        in_place=after is not before
        and bool(np.may_share_memory(after.layers[0].keys, before.layers[0].keys)),
    )


def branch_table(model: DecoderModel, result: Fork) -> pd.DataFrame:
    """One row per branch: its tokens, its probability (Π p) and log-probability (Σ log p),
    and what it added to the cache."""
    rows = {
        "branch": [i + 1 for i in range(len(result.branches))],
        "continuation": [repr(model.decode(list(b.token_ids)))[1:-1] for b in result.branches],
        "token ids": [" ".join(str(t) for t in b.token_ids) for b in result.branches],
        "p (model)": [b.model.probability for b in result.branches],
        "log p (model)": [b.model.log_probability for b in result.branches],
    }
    if result.branches and result.branches[0].sampler is not None:
        rows["p (sampler)"] = [b.sampler.probability for b in result.branches]
    rows |= {
        "own positions": [b.positions for b in result.branches],
        "own K/V bytes": [b.cache_bytes for b in result.branches],
        "prefix rows": [
            "shared, grown in place" if b.in_place else "copied first" for b in result.branches
        ],
    }
    return pd.DataFrame(rows)


def branch_figure(result: Fork, first_tokens: tuple[str, ...], length: int) -> go.Figure:
    """Each branch's tokens' model probabilities, token by token: where the model was sure.
    `first_tokens` are the texts of the branches' first tokens."""
    series = {}
    for i, (branch, first) in enumerate(zip(result.branches, first_tokens, strict=True)):
        p = np.full(length, np.nan)  # a branch that ended early stops its line
        p[: len(branch.token_ids)] = branch.model.token_probabilities
        series[f"{i + 1} “{first}”"] = p
    drawn = lines.line_plot(
        np.arange(1, length + 1),
        series,
        x_title="token of the branch",
        y_title="p(token | prefix and branch so far)",
        title="How sure the model was of each branch's tokens",
        markers=True,
    )
    # Still this builder's own figure: whole tokens on x, a colour-blind-safe colour a branch.
    drawn.layout.xaxis.dtick = 1
    for line, color in zip(drawn.data, theme.HEAD_COLORS, strict=False):
        line.line.color = color
    return drawn


@st.fragment
def branch_view(view: PageState, model: DecoderModel, state: Generation, sampling: Sampling):
    """Fork here: the controls, what the branches share and add, their table and their line."""
    # count × length decode steps: only for a reader who opens it (a link can).
    box = st.expander("Fork the text here", icon=":material/call_split:",
                      key=view.bool_key("branch", False), on_change="rerun")  # fmt: skip
    if not box.open:
        return write_url_after_fragment(view)
    with box:
        count_col, length_col = st.columns(2)
        count = count_col.slider(
            "Branches: the likeliest next tokens", 2, MAX_BRANCHES,
            key=view.int_key("branches", DEFAULT_BRANCHES, lo=2, hi=MAX_BRANCHES),
        )  # fmt: skip
        length = length_col.slider(
            "Tokens per branch", 1, MAX_BRANCH_TOKENS,
            key=view.int_key("branch_tokens", DEFAULT_BRANCH_TOKENS, lo=1, hi=MAX_BRANCH_TOKENS),
        )  # fmt: skip
        if state.ended:
            st.info("The model has finished: there is no next token to fork on.")
            return write_url_after_fragment(view)
        result = fork(model, state, sampling, count, length)
        _show_fork(model, state, sampling, result, count, length)
        write_url_after_fragment(view)


def _show_fork(model, state, sampling, result: Fork, count: int, length: int) -> None:
    used = sampling.as_used()
    found = len(result.branches)
    how = "greedily" if used.greedy else "by the sampler (seeded by the seed and the step)"
    after = "" if used.greedy else " after the filters"
    fewer = f" (they keep only {found})" if found < result.asked else ""
    st.markdown(
        f"Forked after “…{_token(model, state.ids[-1])}”: the {found} likeliest next tokens"
        f"{after}{fewer}, each continued {how}. "
        "Every branch reads the prefix's keys and values from the one cache; it computes only "
        "its own tokens."
    )
    own = sum(b.positions for b in result.branches)
    prefix_col, own_col, best_col = st.columns(3)
    prefix_col.metric(
        "Shared prefix, computed once",
        f"{result.prefix_positions} positions",
        delta=f"{result.prefix_bytes:,} bytes, read by {found} branch{'es' * (found != 1)}",
        delta_color="off",
    )
    own_col.metric(
        "Computed for the branches",
        f"{own} positions",
        delta=f"{found * result.prefix_positions + own} without the shared prefix",
        delta_color="off",
    )
    best = max(result.branches, key=lambda b: b.model.log_probability)
    best_col.metric(
        "The likeliest branch",
        f"“{_token(model, best.token_ids[0])}”",
        delta=f"p = {best.model.probability:.3g} (log p {best.model.log_probability:.2f})",
        delta_color="off",
    )
    number = st.column_config.NumberColumn
    small_screens.table(
        branch_table(model, result),
        hide_index=True,
        column_config={
            "p (model)": number(format="scientific"),
            "p (sampler)": number(format="scientific"),
            "log p (model)": number(format="%.3f"),
            "own K/V bytes": number(format="localized"),
        },
    )
    step = len(state.ids) - state.prompt_length
    # The branches are the model's for these ids, this step and these settings: their digest.
    digest = digest_of(id(model), state.ids, step, used, count, length)
    first_tokens = tuple(_token(model, branch.token_ids[0]) for branch in result.branches)
    render.show(
        render.cached(branch_figure, render.digested(digest, result), first_tokens, length),
        filename="decoder-branches",
    )
    st.caption(
        "p (model) multiplies the model's own probabilities of the branch's tokens (T = 1, "
        "nothing removed); log p adds their logarithms, which does not underflow. The cache "
        "keeps each layer's rows in one growing buffer: the first branch to grow writes into "
        "the prefix's spare room, the others copy the prefix's rows first (a paged cache, as "
        "in vLLM, would share its blocks instead)."
    )


def _token(model: DecoderModel, token_id: int) -> str:
    return repr(model.token_text(int(token_id)))[1:-1]
