"""The cost page's Streamlit pieces: cached measurements, the Measure buttons, their figures.

Measurements are slow and noisy, so they run only when the learner presses a button (with a
progress bar), never on a plain rerun. Each result is cached per backend, method and size with
`st.cache_data`, so measuring again (or a bigger range) reuses what was already measured, and
the results of the last click are kept in the session so reruns can show them.

torch is imported only when the viewer asks to compare with it (`backend_statuses(True)`):
importing it costs about 190 MB and seconds, which a plain visit must not pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attention_core import (
    AttentionInputError,
    causal_mask,
    chunked_attention,
    incremental_causal_attention,
    scaled_dot_product_attention,
)
from attention_core.chunked import ChunkedAttention, online_softmax_weights
from attention_core.cost import (
    max_abs_difference,
    quadratic_reference,
    score_matrix_bytes,
)
from attention_core.lessons.mask_experiments import example_qkv
from attention_core.measurement import (
    BackendStatus,
    Measurement,
    backend_status,
    measure_attention,
    speedup,
)
from ui.widgets.describe import format_number
from ui.widgets.formulas import BACKEND_LABELS, METHOD_LABELS
from ui.widgets.heatmaps import heatmap
from ui.widgets.lines import line_plot
from ui.widgets.state import PageState, is_presenting
from ui.widgets.theme import WEIGHT_COLORS, font_size

# How each backend's peak memory is measured, as the page says it.
PEAK_METHODS = {
    "numpy": "`tracemalloc` (NumPy reports its buffers to it)",
    "torch-cpu": "the allocation events of the torch profiler",
    "torch-cuda": "`torch.cuda.max_memory_allocated`",
}
TIMINGS_KEY = "cost.timing_results"
MEMORY_KEY = "cost.memory_results"
MB = 1e6


@dataclass(frozen=True)
class Job:
    """One measurement to make: what the cache is keyed on."""

    backend: str
    n: int
    d: int
    method: str = "full"
    block_size: int = 256
    repeats: int = 3
    warmup: bool = True

    def describe(self) -> str:
        return f"{BACKEND_LABELS[self.backend]}, {METHOD_LABELS[self.method]}, n = {self.n:,}"


NUMPY_STATUS = BackendStatus("numpy", True, f"NumPy {np.__version__}")
DEMO_WIDTH = 2
DECODE_WIDTH = 4


def backend_statuses(with_torch: bool) -> tuple[BackendStatus, ...]:
    """NumPy always; the torch backends only when the viewer asked to compare with torch."""
    return torch_backend_statuses() if with_torch else (NUMPY_STATUS,)


def use_torch_backends(view: PageState) -> None:
    """The torch toggle's callback: compare every backend that runs here, or NumPy alone."""
    statuses = backend_statuses(view.value("torch"))
    view.set("backends", [status.name for status in statuses if status.available])


@st.cache_resource(show_spinner="Importing torch (once per server)…")
def torch_backend_statuses() -> tuple[BackendStatus, ...]:
    """Every backend, torch's included: imports torch, once per process, under the cache's
    lock, so no session can see a half-imported torch."""
    return backend_status()


@st.cache_data(show_spinner=False, max_entries=512)
def cached_measurement(job: Job) -> Measurement:
    """The measurement of `job`, made once per backend, method and size."""
    return measure_attention(
        job.backend,
        job.n,
        job.d,
        method=job.method,
        block_size=job.block_size,
        repeats=job.repeats,
        warmup=job.warmup,
    )


def run_jobs(jobs: Sequence[Job], store_key: str) -> list[str]:
    """Measure `jobs` under a progress bar and keep the results; returns the errors."""
    results: dict[Job, Measurement] = st.session_state.setdefault(store_key, {})
    errors = []
    progress = st.progress(0.0, text="Measuring…")
    for done, job in enumerate(jobs):
        progress.progress(done / len(jobs), text=f"Measuring {job.describe()}…")
        try:
            results[job] = cached_measurement(job)
        except AttentionInputError as error:
            errors.append(f"{job.describe()}: {error}")
    progress.empty()
    return errors


def stored(jobs: Sequence[Job], store_key: str) -> dict[Job, Measurement]:
    """The results already measured for `jobs` (nothing is measured here)."""
    results = st.session_state.get(store_key, {})
    return {job: results[job] for job in jobs if job in results}


def measure_prompt(sizes: Sequence[int], backends: Sequence[str]) -> str:
    """What pressing Measure will time, before anything is measured."""
    return (
        f"Press **Measure** to time {len(sizes) * len(backends)} runs: "
        + ", ".join(f"{n:,}" for n in sizes)
        + " tokens on "
        + (", ".join(BACKEND_LABELS[b] for b in backends) or "no backend")
        + "."
    )


def forget_measurements() -> None:
    """Drop the cache and the kept results, so the next click measures afresh."""
    cached_measurement.clear()
    st.session_state.pop(TIMINGS_KEY, None)
    st.session_state.pop(MEMORY_KEY, None)


def backend_badges(statuses: Sequence[BackendStatus]) -> str:
    """One badge per backend: green with what runs it, grey with why it is missing."""
    badges = []
    for status in statuses:
        label = BACKEND_LABELS[status.name]
        if status.available:
            badges.append(f":green-badge[:material/check: {label}: {status.detail}]")
        else:
            badges.append(f":gray-badge[:material/block: {label}: {status.detail}]")
    return " ".join(badges)


def timing_table(results: dict[Job, Measurement]) -> pd.DataFrame:
    """One row per measurement, sorted by size then backend, with the speed-up vs NumPy."""
    ordered = sorted(results.values(), key=lambda m: (m.n, BACKEND_LABELS[m.backend]))
    numpy_at = {m.n: m for m in ordered if m.backend == "numpy"}
    rows = []
    for m in ordered:
        baseline = numpy_at.get(m.n)
        rows.append(
            {
                "backend": BACKEND_LABELS[m.backend],
                "n": m.n,
                "d": m.d,
                "median time (ms)": m.seconds * 1e3,
                "FLOPs": m.flops,
                "GFLOP/s": m.gflops,
                "n×n matrix (MB)": m.score_bytes / MB,
                "peak memory (MB)": None if m.peak_bytes is None else m.peak_bytes / MB,
                "speed-up vs NumPy (×)": None if baseline is None else speedup(baseline, m),
            }
        )
    return pd.DataFrame(rows)


TIMING_COLUMNS = {
    "median time (ms)": st.column_config.NumberColumn(format="%.2f"),
    "FLOPs": st.column_config.NumberColumn(format="%.3e"),
    "GFLOP/s": st.column_config.NumberColumn(format="%.2f"),
    "n×n matrix (MB)": st.column_config.NumberColumn(format="%.2f"),
    "peak memory (MB)": st.column_config.NumberColumn(format="%.2f"),
    "speed-up vs NumPy (×)": st.column_config.NumberColumn(format="%.2f"),
}


def _by_backend(
    results: dict[Job, Measurement], sizes: Sequence[int], value
) -> dict[str, np.ndarray]:
    series = {}
    for backend in BACKEND_LABELS:
        found = {m.n: m for m in results.values() if m.backend == backend}
        if found:
            series[BACKEND_LABELS[backend]] = np.array(
                [value(found[n]) if n in found else np.nan for n in sizes], dtype=np.float64
            )
    return series


def time_figure(results: dict[Job, Measurement], sizes: Sequence[int]) -> go.Figure:
    """Median time against n on log-log axes, with an n² line through the slowest largest run."""
    series = _by_backend(results, sizes, lambda m: m.seconds * 1e3)
    anchor = max(
        (m for m in results.values() if m.n == max(sizes)),
        key=lambda m: m.seconds,
        default=None,
    )
    if anchor is not None:
        series["n² reference"] = quadratic_reference(sizes, anchor.n, anchor.seconds * 1e3)
    return _against_length(
        sizes,
        series,
        y_title="median time (ms)",
        title="Time against n (log-log: n² has slope 2)",
        reference="n² reference",
    )


def memory_figure(results: dict[Job, Measurement], sizes: Sequence[int]) -> go.Figure:
    """Measured peak memory against n, and the bytes of the n×n float32 matrix."""
    series = _by_backend(
        results, sizes, lambda m: np.nan if m.peak_bytes is None else m.peak_bytes / MB
    )
    series["n×n float32 matrix"] = np.array([score_matrix_bytes(n, n) / MB for n in sizes])
    return _against_length(
        sizes,
        series,
        y_title="peak memory (MB)",
        title="Peak memory of one call against n (log-log)",
        reference="n×n float32 matrix",
    )


def _against_length(
    sizes: Sequence[int], series: dict, *, y_title: str, title: str, reference: str
) -> go.Figure:
    """Measured series against n on log-log axes, the dashed `reference` among them."""
    fig = line_plot(
        np.asarray(sizes),
        series,
        x_title="sequence length n (queries = keys)",
        y_title=y_title,
        title=title,
        log_x=True,
        log_y=True,
        dashed=[reference],
        markers=True,
    )
    return _size_ticks(fig, sizes)


def _size_ticks(fig: go.Figure, sizes: Sequence[int]) -> go.Figure:
    # Log axes label 2, 3, 5...; the measured sizes are the ticks a reader needs.
    fig.update_xaxes(tickvals=list(sizes), ticktext=[f"{n:,}" for n in sizes])
    return fig


# -- the online softmax demo ----------------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def online_demo(n_keys: int, block: int, seed: int) -> tuple[ChunkedAttention, np.ndarray]:
    """One query of the seeded example read block by block, and the full softmax output `(1, 2)`.

    Raises AttentionInputError for a block size the keys cannot take."""
    q_all, k, v = example_qkv(n_keys, DEMO_WIDTH, seed)
    q = q_all[:1]  # one query keeps every running number readable
    online = chunked_attention(q, k, v, block_size=block, return_blocks=True)
    return online, scaled_dot_product_attention(q, k, v).output


def _span(start: int, stop: int) -> str:
    return f"k{start + 1}–k{stop}" if stop - start > 1 else f"k{stop}"


def online_table(online: ChunkedAttention) -> list[dict]:
    """One row per block: its keys, scores and the three running numbers after it."""
    return [
        {
            "block": t + 1,
            "keys": _span(b.start, b.stop),
            "scores s = q·k/√d": ", ".join(f"{s:.3f}" for s in b.scores[0]),
            "block max": float(b.block_max[0]),
            "running max m": float(b.running_max[0]),
            "rescale exp(m_old − m)": float(b.rescale[0]),
            "running sum l": float(b.running_sum[0]),
            "output estimate o / l": ", ".join(f"{x:.4f}" for x in b.output[0]),
        }
        for t, b in enumerate(online.blocks)
    ]


ONLINE_COLUMNS = {
    name: st.column_config.NumberColumn(format="%.4f")
    for name in ("block max", "running max m", "rescale exp(m_old − m)", "running sum l")
}
OUTPUT_COLUMNS = {name: st.column_config.NumberColumn(format="%.8f") for name in ("d1", "d2")}


def output_table(online: ChunkedAttention, full_output: np.ndarray) -> list[dict]:
    """The chunked output o_T / l_T beside the full softmax's, one row each."""
    return [
        {"output": "chunked, o_T / l_T", **dict(zip(("d1", "d2"), online.output[0], strict=True))},
        {"output": "full softmax", **dict(zip(("d1", "d2"), full_output[0], strict=True))},
    ]


def online_softmax_figure(n_keys: int, block: int, seed: int) -> go.Figure:
    """Rows: the weights the running state implies after each block, then the full softmax."""
    online, _ = online_demo(n_keys, block, seed)
    q_all, k, v = example_qkv(n_keys, DEMO_WIDTH, seed)
    reference = scaled_dot_product_attention(q_all[:1], k, v).weights[0]  # (k_pos,)
    weights = online_softmax_weights(online)[:, 0, :]  # (n_blocks, k_pos), NaN = not read yet
    key_labels = [f"k{j + 1}" for j in range(n_keys)]
    block_labels = [
        f"after block {t + 1} ({_span(b.start, b.stop)})" for t, b in enumerate(online.blocks)
    ]
    matrix = np.vstack([weights, reference[None, :]])
    rows = [*block_labels, "full softmax"]
    unread = np.isnan(matrix)
    text = [
        ["not read" if unread[i, j] else format_number(matrix[i, j], 3) for j in range(len(row))]
        for i, row in enumerate(matrix)
    ]
    hover = [
        [
            f"{rows[i]}, key {key_labels[j]}: "
            + (
                "not read yet"
                if unread[i, j]
                else f"exp(s − m) / l = {matrix[i, j]:.6f}"
                if i < len(block_labels)
                else f"softmax weight {matrix[i, j]:.6f}"
            )
            for j in range(matrix.shape[1])
        ]
        for i in range(matrix.shape[0])
    ]
    fig = go.Figure(
        go.Heatmap(
            z=np.where(unread, np.nan, matrix),
            x=list(range(matrix.shape[1])),
            y=list(range(matrix.shape[0])),
            zmin=0.0,
            zmax=1.0,
            colorscale=WEIGHT_COLORS,
            text=text,
            texttemplate="%{text}",
            textfont={"size": font_size()},
            hovertext=hover,
            hoverinfo="text",
            xgap=1,
            ygap=1,
            colorbar={"thickness": 12, "len": 0.9, "title": "weight"},
        )
    )
    fig.update_xaxes(
        title_text="key →",
        side="top",
        tickvals=list(range(len(key_labels))),
        ticktext=list(key_labels),
    )
    fig.update_yaxes(
        title_text="← state after each block",
        autorange="reversed",
        tickvals=list(range(len(rows))),
        ticktext=rows,
    )
    per_row = 56 if is_presenting() else 40
    fig.update_layout(
        title={
            "text": "The weights the running state implies, block by block",
            "font": {"size": font_size() + 3},
        },
        height=int(min(640, 140 + len(rows) * per_row)),
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
        font={"size": font_size()},
        plot_bgcolor="#eeeeee",
    )
    return fig


def memory_bars(results: Sequence[Measurement], score_bytes: int, tile_bytes: int) -> go.Figure:
    """Measured peak memory per method, with the n×n matrix and one tile as reference lines.

    A linear axis on purpose: the full method's bar should tower over the chunked one.
    """
    labels = [f"{BACKEND_LABELS[m.backend]}<br>{METHOD_LABELS[m.method]}" for m in results]
    values = [np.nan if m.peak_bytes is None else m.peak_bytes / MB for m in results]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=values,
            text=[format_number(v, 2) + " MB" for v in values],
            textposition="outside",
            marker_color=["#b2182b" if m.method == "full" else "#2166ac" for m in results],
            hovertemplate="%{x}: %{y:.3f} MB<extra></extra>",
        )
    )
    for value, name, dash in (
        (score_bytes / MB, "one n×n float32 matrix", "dash"),
        (tile_bytes / MB, "one n×block tile", "dot"),
    ):
        fig.add_hline(
            y=value,
            line_dash=dash,
            annotation_text=f"{name}: {value:.2f} MB",
            annotation_position="top left",
        )
    fig.update_layout(
        title={"text": "Peak memory of one call", "font": {"size": font_size() + 3}},
        yaxis={"title": "peak memory (MB)"},
        height=420,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        font={"size": font_size()},
        showlegend=False,
    )
    return fig


# -- decoding with a KV cache -------------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def decoding(n_decode: int, seed: int) -> tuple[np.ndarray, float]:
    """Weights `(n, n)` built one decoding step at a time, and their outputs' largest
    difference from full causal attention on the same seeded q, k, v."""
    q, k, v = example_qkv(n_decode, DECODE_WIDTH, seed)
    decoded = incremental_causal_attention(q, k, v)
    causal = scaled_dot_product_attention(q, k, v, mask=causal_mask(n_decode))
    return decoded.weights, max_abs_difference(decoded.output, causal.output)


def decoding_figure(n_decode: int, seed: int) -> go.Figure:
    tokens = [f"t{t + 1}" for t in range(n_decode)]
    return heatmap(
        decoding(n_decode, seed)[0],
        row_labels=tokens,
        col_labels=tokens,
        title="Weights built one decoding step (one row) at a time",
        hover=[
            [
                f"step {i + 1}: the new query against {i + 1} cached key(s)"
                if j <= i
                else "not in the cache yet"
                for j in range(n_decode)
            ]
            for i in range(n_decode)
        ],
        blocked=~causal_mask(n_decode),
    )
