"""The cost of attention: n² in time and memory, measured here, and how chunking avoids n×n."""

import streamlit as st

from attention_core import AttentionInputError
from attention_core.cost import (
    chunk_bytes,
    decoding_score_counts,
    max_abs_difference,
    score_matrix_bytes,
)
from ui.cost import decoding, figures, measurements, online_softmax
from ui.cost.measurements import MB, MEMORY_KEY, TIMINGS_KEY, Job
from ui.widgets import render, small_screens
from ui.widgets.formulas import BACKEND_LABELS, METHOD_LABELS
from ui.widgets.layout import page_intro, what_to_try
from ui.widgets.state import PageState, write_url_after_fragment

# Every size a link can ask for is one of these: a crafted link can never request more.
MAX_LENGTHS = (256, 512, 1024, 2048)
D_HEADS = (16, 32, 64, 128)  # head widths
LONG_LENGTHS = (512, 1024, 2048, 4096)
BLOCK_SIZES = (32, 64, 128, 256, 512)

view = PageState("cost")
page_intro(
    "The cost of attention",
    "Every query is scored against every key, so doubling the length n quadruples the work "
    "and the size of the score matrix. Measure that here, then see how computing attention "
    "block by block with an **online softmax** (the idea behind FlashAttention) gets the same "
    "answer without ever storing the n×n matrix.",
    r"\text{FLOPs} \approx \underbrace{2n^2d}_{QK^\top} + \underbrace{2n^2d}_{PV} = 4n^2d,"
    r"\qquad P = \mathrm{softmax}\!\left(\tfrac{QK^\top}{\sqrt d}\right) \text{ holds } n^2"
    r"\text{ numbers}",
)
view.show_notices()

torch_column, badge_column = st.columns([1, 3], vertical_alignment="center")
with_torch = torch_column.toggle(
    "Compare with torch",
    key=view.bool_key("torch", False),
    on_change=measurements.use_torch_backends,
    args=(view,),
    help="Imports PyTorch (once per server: a few seconds and about 190 MB) and adds its CPU "
    "and CUDA backends to the measurements.",
)
statuses = measurements.backend_statuses(with_torch)
available = [status.name for status in statuses if status.available]
badge_column.markdown("**Backends on this machine:** " + measurements.backend_badges(statuses))

# -- 1. time and memory against n ----------------------------------------------------------------


@st.fragment
def time_and_memory(available: list[str]) -> None:
    backend_column, size_column, width_column = st.columns([2, 2, 1])
    backends = backend_column.multiselect(
        "Backends",
        available,
        format_func=BACKEND_LABELS.get,
        key=view.multi("backends", available, available),
        placeholder="Choose at least one backend",
    )
    n_max = size_column.select_slider(
        "Longest sequence (n doubles from 128)",
        options=MAX_LENGTHS,
        key=view.choice_key("n_max", 1024, MAX_LENGTHS),
        help="Capped at 2,048 so a click stays quick; the peak-memory section goes further.",
    )
    d = width_column.selectbox("Head width d", D_HEADS, key=view.choice_key("d", 64, D_HEADS))
    sizes = [n for n in (128, 256, 512, 1024, 2048) if n <= n_max]
    jobs = [Job(backend, n, d) for n in sizes for backend in backends]
    measure_column, forget_column = st.columns([1, 3])
    clicked = measure_column.button(
        "Measure", key="cost.measure", type="primary", icon=":material/timer:", disabled=not jobs
    )
    if forget_column.button(
        "Forget cached measurements",
        key="cost.forget",
        icon=":material/delete:",
        help="Measure afresh next time (the machine's load changes timings).",
    ):
        measurements.forget_measurements()
    if clicked:
        for error in measurements.run_jobs(jobs, TIMINGS_KEY):
            st.error(error, icon=":material/error:")
    timings = measurements.stored(jobs, TIMINGS_KEY)
    if not timings:
        st.info(measurements.measure_prompt(sizes, backends), icon=":material/timer:")
    else:
        if len(timings) < len(jobs):
            st.caption(
                f"{len(jobs) - len(timings)} of the {len(jobs)} runs for these settings are not "
                "measured yet: press **Measure**."
            )
        small_screens.table(
            measurements.timing_table(timings),
            hide_index=True,
            width="stretch",
            column_config=measurements.TIMING_COLUMNS,
            key="cost.timing_table",
        )
        builders = {"time": figures.time_figure, "memory": figures.memory_figure}
        for column, (name, build) in zip(st.columns(2), builders.items(), strict=True):
            with column:
                figure = render.cached(build, timings, sizes)
                render.show(figure, filename=f"attention-{name}-vs-length")
        st.caption(
            "FLOPs count the two matrix products, 4·n²·d (the softmax adds a few operations per "
            "score). Small n is dominated by fixed overheads, so the curves bend towards the n² "
            "line only as n grows. Timings vary with the machine's load; the figures of merit "
            "are the slope and the ratio between backends in the same run."
        )
    write_url_after_fragment(view)


st.header("Time and memory against sequence length", anchor="time")
st.markdown(
    "One attention head, n queries and n keys of width d, float32, computed the **full** way: "
    "the n×n scores, their softmax, then the weighted sum of values. Measurements run when you "
    "press **Measure**; each one is cached per backend and size."
)
time_and_memory(available)

# -- 2. the online softmax -----------------------------------------------------------------------


@st.fragment
def block_by_block(page_seed: int) -> None:
    keys_column, block_column, seed_column = st.columns(3)
    n_keys = keys_column.slider("Keys", 2, 12, key=view.int_key("keys", 8, lo=2, hi=12))
    block = block_column.slider(
        "Keys per block", 1, n_keys, key=view.int_key("block", 3, lo=1, hi=n_keys)
    )
    seed = seed_column.number_input(
        "Seed", 0, 9999, key=seed_key, help="Draws the query, keys, values."
    )
    if seed != page_seed:
        st.rerun()  # the KV-cache section below draws from the same seed
    try:
        online, full_output = online_softmax.demo(n_keys, block, seed)
    except AttentionInputError as error:
        st.error(str(error), icon=":material/error:")
        write_url_after_fragment(view)
        return
    small_screens.table(
        online_softmax.block_table(online),
        hide_index=True,
        width="stretch",
        key="cost.online_table",
        column_config=online_softmax.BLOCK_COLUMNS,
    )
    figure = render.cached(online_softmax.weights_figure, n_keys, block, seed)
    render.show(figure, filename="online-softmax-blocks")
    output_column, difference_column = st.columns([3, 1])
    output_column.dataframe(
        online_softmax.output_table(online, full_output),
        hide_index=True,
        width="stretch",
        key="cost.online_output",
        column_config=online_softmax.OUTPUT_COLUMNS,
    )
    difference = max_abs_difference(online.output, full_output)
    difference_column.metric("Largest difference", f"{difference:.1e}")
    st.caption(
        "A rescale of 1 means the block did not raise the maximum; 0 marks the first block, where "
        "there was nothing to re-base. In each row the weights of the keys read so far keep their "
        "ratios; only the shared denominator l grows, until the last row is the full softmax."
    )
    write_url_after_fragment(view)


st.header("The online softmax, block by block", anchor="online-softmax")
st.markdown(
    "A softmax needs the largest score (for stability) and the sum of all exponentials (to "
    "normalise), which seems to require every score at once. The online softmax reads the keys "
    "block by block and keeps three running numbers per query: the largest score so far "
    "**m**, the sum **l** of exp(s − m), and the unnormalised output **o**. When a block "
    "raises the maximum, the old l and o are multiplied by exp(m_old − m_new), which re-bases "
    "them on the new maximum."
)
st.latex(
    r"\begin{aligned}"
    r"m_t &= \max\big(m_{t-1},\ \max_{j \in B_t} s_j\big) && \text{running maximum} \\"
    r"l_t &= l_{t-1}\,e^{m_{t-1}-m_t} + \textstyle\sum_{j\in B_t} e^{s_j - m_t}"
    r" && \text{running sum, re-based on } m_t \\"
    r"o_t &= o_{t-1}\,e^{m_{t-1}-m_t} + \textstyle\sum_{j\in B_t} e^{s_j - m_t}\, v_j"
    r" && \text{unnormalised output} \\"
    r"\text{output} &= o_T / l_T && \text{after the last block } B_T"
    r"\end{aligned}"
)
seed_key = view.int_key("seed", 0, lo=0, hi=9999)
seed = view.value("seed")
block_by_block(seed)

# -- 3. peak memory at a long length -------------------------------------------------------------


@st.fragment
def peak_memory(available: list[str]) -> None:
    memory_backend_column, length_column, chunk_column = st.columns(3)
    memory_backend = memory_backend_column.selectbox(
        "Backend",
        available,
        format_func=BACKEND_LABELS.get,
        key=view.choice_key("backend", "numpy", available),
    )
    n_long = length_column.select_slider(
        "Sequence length n", LONG_LENGTHS, key=view.choice_key("n", 2048, LONG_LENGTHS)
    )
    chunk = chunk_column.select_slider(
        "Keys per block", BLOCK_SIZES, key=view.choice_key("chunk", 128, BLOCK_SIZES)
    )
    methods = ["full", "chunked"] + (["fused"] if memory_backend != "numpy" else [])
    jobs = [Job(memory_backend, n_long, 64, m, chunk, repeats=1, warmup=False) for m in methods]
    st.markdown(
        f"The full method stores the n×n scores: **{score_matrix_bytes(n_long, n_long) / MB:,.1f}"
        f" MB** for n = {n_long:,} in float32, plus temporaries of the same size for the softmax. "
        f"The chunked one holds an n×{min(chunk, n_long)} tile: "
        f"**{chunk_bytes(n_long, n_long, chunk) / MB:,.2f} MB**. Peak memory is measured with "
        f"{measurements.PEAK_METHODS[memory_backend]}, d = 64; one run each."
    )
    if st.button(
        "Measure peak memory", key="cost.measure_memory", type="primary", icon=":material/memory:"
    ):
        for error in measurements.run_jobs(jobs, MEMORY_KEY):
            st.error(error, icon=":material/error:")
    memory = measurements.stored(jobs, MEMORY_KEY)
    if memory:
        by_method = {job.method: result for job, result in memory.items()}
        for column, (method, result) in zip(
            st.columns(len(by_method)), by_method.items(), strict=True
        ):
            column.metric(
                METHOD_LABELS[method],
                "n/a" if result.peak_bytes is None else f"{result.peak_bytes / MB:,.2f} MB",
                help=result.peak_note,
            )
        figure = render.cached(
            figures.memory_bars,
            list(by_method.values()),
            score_matrix_bytes(n_long, n_long),
            chunk_bytes(n_long, n_long, chunk),
        )
        render.show(figure, filename="attention-peak-memory")
    else:
        st.info("Press **Measure peak memory** to run each method once.", icon=":material/memory:")
    write_url_after_fragment(view)


st.header("Peak memory: full versus chunked at a long length", anchor="memory")
peak_memory(available)

# -- 4. decoding with a KV cache -----------------------------------------------------------------


@st.fragment
def kv_cache(seed: int) -> None:
    n_decode = st.slider("Tokens generated", 2, 12, key=view.int_key("decode", 6, lo=2, hi=12))
    figure = render.cached(decoding.weights_figure, n_decode, seed)
    render.show(figure, filename="kv-cache-decoding-weights")
    with_cache, without_cache = decoding_score_counts(n_decode)
    cached_column, uncached_column, match_column = st.columns(3)
    cached_column.metric("q·k products with the cache", f"{with_cache:,}")
    uncached_column.metric("without it (whole prefix every step)", f"{without_cache:,}")
    match_column.metric(
        "Largest difference from full causal attention",
        f"{decoding.step_by_step(n_decode, seed)[1]:.1e}",
    )
    write_url_after_fragment(view)


st.header("Generating with a KV cache", anchor="kv-cache")
st.markdown(
    "A decoder writes one token at a time. Token t only attends to tokens 0..t, and their keys "
    "and values never change, so it keeps them in a **KV cache** and computes just one new row "
    "of the causal pattern per step: t dot products instead of redoing the whole t×t pattern."
)
kv_cache(seed)
st.caption(
    "The saving is paid for in memory: the cache holds 2·n·d numbers per head and per layer, "
    "which is what limits how long a context a server can keep for each user."
)

what_to_try(
    [
        "Measure up to n = 2,048 and compare the slope of each backend with the dashed n² line "
        "in the log-log plot. Where do the lines become parallel?",
        "Compare the **speed-up vs NumPy** column at small and large n: fixed overheads hide "
        "torch's advantage at small sizes.",
        "In the online softmax, set **Keys per block** to 1: every key is its own block, and "
        "each rescale shows the maximum moving. Set it to the number of keys: one block, plain "
        "softmax.",
        "Measure peak memory at n = 4,096 with blocks of 32 and of 512: the chunked peak follows "
        "the tile, the full one the n×n matrix.",
        "On torch, compare our chunked loop with torch's fused kernel: same idea, written in C++.",
    ]
)

view.sync_url()
