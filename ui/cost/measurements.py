"""The cost page's measurements: the backends, the Measure buttons' jobs, their caches, the table.

Measurements are slow and noisy, so they run only when the learner presses a button (with a
progress bar), never on a plain rerun. Each result is cached per backend, method and size in
the byte-bounded cache, shared by every session, so measuring again (or a bigger range) reuses
what was already measured, and the results of the last click are kept in the session so reruns
can show them. Each measurement takes its turn in the lane of long runs (server.lane): a timing
with another run beside it on two cores would measure the other run too, and the peak-memory
section's largest n×n matrices are as large as a model run's steps.

torch is imported only when the viewer asks to compare with it (`backend_statuses(True)`):
importing it costs about 190 MB and seconds, which a plain visit must not pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attention_core import AttentionInputError
from attention_core.measurement import (
    BackendStatus,
    Measurement,
    backend_status,
    measure_attention,
    speedup,
)
from server.lane import LONG_RUNS
from ui.widgets.byte_cache import SMALL_ENTRY_BYTES, bounded_by_bytes
from ui.widgets.formulas import BACKEND_LABELS, METHOD_LABELS
from ui.widgets.state import PageState
from ui.widgets.tables import number_columns

MB = 1e6
# Where each button's results are kept in the session, so a rerun shows them again.
TIMINGS_KEY = "cost.timing_results"
MEMORY_KEY = "cost.memory_results"
# How each backend's peak memory is measured, as the page says it.
PEAK_METHODS = {
    "numpy": "`tracemalloc` (NumPy reports its buffers to it)",
    "torch-cpu": "the allocation events of the torch profiler",
    "torch-cuda": "`torch.cuda.max_memory_allocated`",
}
NUMPY_STATUS = BackendStatus("numpy", True, f"NumPy {np.__version__}")
TIMING_COLUMNS = number_columns(
    {
        "median time (ms)": "%.2f",
        "FLOPs": "%.3e",
        "GFLOP/s": "%.2f",
        "n×n matrix (MB)": "%.2f",
        "peak memory (MB)": "%.2f",
        "speed-up vs NumPy (×)": "%.2f",
    }
)


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


# -- the backends ---------------------------------------------------------------------------------


def backend_statuses(with_torch: bool) -> tuple[BackendStatus, ...]:
    """NumPy always; the torch backends only when the viewer asked to compare with torch."""
    return torch_backend_statuses() if with_torch else (NUMPY_STATUS,)


def use_torch_backends(view: PageState) -> None:
    """The torch toggle's callback: compare every backend that runs here, or NumPy alone."""
    statuses = backend_statuses(view.value("torch"))
    view.set("backends", [status.name for status in statuses if status.available])


# Three statuses, no array: SMALL_ENTRY_BYTES.
@bounded_by_bytes(16 * SMALL_ENTRY_BYTES, name="cost.torch_backends", lane=None,
                  spinner="Importing torch (once per server)…")  # fmt: skip
def torch_backend_statuses() -> tuple[BackendStatus, ...]:
    """Every backend, torch's included: imports torch, once per process, while other sessions
    asking wait for it, so no session can see a half-imported torch."""
    return backend_status()


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


# -- measuring on a click -------------------------------------------------------------------------


# A measurement is a dozen numbers and no array, so it counts SMALL_ENTRY_BYTES: 512 of them.
@bounded_by_bytes(512 * SMALL_ENTRY_BYTES, name="cost.measurements", lane=LONG_RUNS)
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


def forget_measurements() -> None:
    """Drop the cache and the kept results, so the next click measures afresh."""
    cached_measurement.clear()
    st.session_state.pop(TIMINGS_KEY, None)
    st.session_state.pop(MEMORY_KEY, None)


def measure_prompt(sizes: Sequence[int], backends: Sequence[str]) -> str:
    """What pressing Measure will time, before anything is measured."""
    return (
        f"Press **Measure** to time {len(sizes) * len(backends)} runs: "
        + ", ".join(f"{n:,}" for n in sizes)
        + " tokens on "
        + (", ".join(BACKEND_LABELS[b] for b in backends) or "no backend")
        + "."
    )


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
