"""The measurement harness: time and peak memory of attention, measured here, per backend.

Not a formula: it runs `attention_core`'s attention (and torch's) on random inputs, times it and
reads its peak memory, so the cost page can set measurements beside `cost`'s formulas.

    numpy       this library's NumPy code (peak memory from `tracemalloc`)
    torch-cpu   torch on the CPU (peak memory from the torch profiler's allocation events)
    torch-cuda  torch on a CUDA GPU (peak memory from `torch.cuda.max_memory_allocated`)

Methods: "full" materialises softmax(Q Kᵀ/√d) as an n×n matrix; "chunked" is the online softmax
over key blocks; "fused" (torch only) is `torch.nn.functional.scaled_dot_product_attention`,
whose CPU and CUDA kernels tile the computation the same way (FlashAttention-style).

torch is imported inside the functions that need it, so `import attention_core` stays NumPy-only.
Inputs are one head of standard-normal float32 Q, K, V `(n, d)`.
"""

from __future__ import annotations

import importlib
import math
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .chunked import chunked_attention
from .cost import attention_flops, score_matrix_bytes
from .softmax import stable_softmax
from .validation import AttentionInputError, check_int, check_size

__all__ = [
    "BACKENDS",
    "MAX_HEAD_DIM",
    "MAX_MEASURE_LENGTH",
    "METHODS",
    "BackendStatus",
    "Measurement",
    "available_backends",
    "backend_status",
    "measure_attention",
    "speedup",
]

BACKENDS = ("numpy", "torch-cpu", "torch-cuda")
METHODS = ("full", "chunked", "fused")
# Hard limits for anything a page or a link can ask for; the score-matrix size is also capped
# by attention_core.validation.MAX_ELEMENTS for the full method.
MAX_MEASURE_LENGTH = 16_384
MAX_HEAD_DIM = 512
MAX_REPEATS = 50
FLOAT32_BYTES = 4
# tracemalloc and the torch profiler are process-wide, and two torch profiler sessions at once
# crash the process: measurements from concurrent callers (two browser tabs on one server) take
# turns. Taking turns also keeps one caller's run from slowing the other's timings.
_MEASURE_LOCK = threading.Lock()


# --- backends -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackendStatus:
    """Whether a backend can run here: `detail` says what runs it, or why it cannot."""

    name: str
    available: bool
    detail: str


def _import_torch() -> Any:
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def backend_status() -> tuple[BackendStatus, ...]:
    """The three backends, each with its availability and the reason when it is missing."""
    statuses = [BackendStatus("numpy", True, f"NumPy {np.__version__}")]
    torch = _import_torch()
    if torch is None:
        reason = "torch is not installed (pip install torch)"
        statuses.append(BackendStatus("torch-cpu", False, reason))
        statuses.append(BackendStatus("torch-cuda", False, reason))
        return tuple(statuses)
    statuses.append(
        BackendStatus(
            "torch-cpu",
            True,
            f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s)",
        )
    )
    if torch.version.cuda is None:
        cuda = BackendStatus(
            "torch-cuda",
            False,
            f"no CUDA: this torch build ({torch.__version__}) is CPU-only",
        )
    elif not torch.cuda.is_available():
        cuda = BackendStatus(
            "torch-cuda",
            False,
            "no CUDA GPU found (torch.cuda.is_available() is False)",
        )
    else:
        cuda = BackendStatus(
            "torch-cuda",
            True,
            f"{torch.cuda.get_device_name(0)}, torch CUDA {torch.version.cuda}",
        )
    statuses.append(cuda)
    return tuple(statuses)


def available_backends() -> tuple[str, ...]:
    """Names of the backends that can run here, in the order of `BACKENDS`."""
    return tuple(status.name for status in backend_status() if status.available)


# --- measurement --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """Time and peak memory of one attention call `(n, d) -> (n, d)`.

    seconds      median wall time over `runs` (after one warm-up call)
    runs         every timed run, in seconds
    flops        `attention_flops(n, n, d)`
    gflops       achieved GFLOP/s: flops / seconds / 1e9
    score_bytes  bytes of the n×n float32 matrix the full method stores
    peak_bytes   extra memory allocated at the peak of one call (inputs excluded, output
                 included), or None if this backend cannot measure it; `peak_note` says how
    """

    backend: str
    method: str
    n: int
    d: int
    block_size: int | None
    seconds: float
    runs: tuple[float, ...]
    flops: int
    gflops: float
    score_bytes: int
    peak_bytes: int | None
    peak_note: str


def measure_attention(
    backend: str,
    n: int,
    d: int = 64,
    *,
    method: str = "full",
    block_size: int = 256,
    repeats: int = 3,
    seed: int = 0,
    warmup: bool = True,
    measure_memory: bool = True,
) -> Measurement:
    """Time `method` attention on `backend` for n queries and keys of width d, and its peak memory.

    Runs once to warm up (unless `warmup=False`), then `repeats` times timed (wall clock; CUDA
    is synchronised). Peak memory (unless `measure_memory=False`) is traced on the untimed
    warm-up call, or on one extra call after the timed ones without a warm-up, so tracing never
    slows a timed run. Raises
    `AttentionInputError` for an unknown or unavailable backend, or sizes above the limits.
    """
    if backend not in BACKENDS:
        raise AttentionInputError(f"Unknown backend {backend!r}: choose one of {BACKENDS}.")
    if method not in METHODS:
        raise AttentionInputError(f"Unknown method {method!r}: choose one of {METHODS}.")
    n = check_int(n, "n (sequence length)", minimum=1)
    d = check_int(d, "d (head width)", minimum=1)
    block_size = check_int(block_size, "block_size", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    if n > MAX_MEASURE_LENGTH or d > MAX_HEAD_DIM or repeats > MAX_REPEATS:
        raise AttentionInputError(
            f"Measurements are limited to n <= {MAX_MEASURE_LENGTH:,}, d <= {MAX_HEAD_DIM} and "
            f"{MAX_REPEATS} repeats; got n={n:,}, d={d}, repeats={repeats}."
        )
    if method == "full":
        check_size((n, n), "The n×n score matrix")
    with _MEASURE_LOCK:
        return _measure(backend, n, d, method, block_size, repeats, seed, warmup, measure_memory)


def _measure(
    backend: str,
    n: int,
    d: int,
    method: str,
    block_size: int,
    repeats: int,
    seed: int,
    warmup: bool,
    measure_memory: bool,
) -> Measurement:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
    if backend == "numpy":
        run, sync, peak = _numpy_call(method, q, k, v, block_size), _no_sync, _numpy_peak
    else:
        run, sync, peak = _torch_call(backend, method, q, k, v, block_size)
    peak_bytes, note = None, "not measured"
    if warmup:
        # The first call pays for one-off work (thread pools, kernel selection, page faults), so
        # it is not timed; tracing it costs nothing, and the arrays it allocates are the same.
        if measure_memory:
            peak_bytes, note = peak(run)
        else:
            run()
        sync()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        runs.append(time.perf_counter() - start)
    if measure_memory and not warmup:
        peak_bytes, note = peak(run)
    seconds = statistics.median(runs)
    flops = attention_flops(n, n, d)
    return Measurement(
        backend,
        method,
        n,
        d,
        block_size if method == "chunked" else None,
        seconds,
        tuple(runs),
        flops,
        flops / seconds / 1e9,
        score_matrix_bytes(n, n),
        peak_bytes,
        note,
    )


def _no_sync() -> None:
    return None


def _numpy_call(
    method: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, block_size: int
) -> Callable[[], Any]:
    scale = np.float32(1.0 / math.sqrt(q.shape[-1]))
    if method == "full":

        def full() -> np.ndarray:
            scores = q @ k.T  # (n, n): the matrix chunking avoids
            scores *= scale
            return stable_softmax(scores) @ v

        return full
    if method == "chunked":
        return lambda: chunked_attention(q, k, v, block_size=block_size).output
    raise AttentionInputError(
        "NumPy has no fused attention kernel: the fused method needs a torch backend."
    )


def _numpy_peak(run: Callable[[], Any]) -> tuple[int, str]:
    """Peak bytes NumPy allocated during `run()`, above what was allocated before it."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = run()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return max(0, peak - before), "tracemalloc (NumPy reports its array buffers to it)"


def _torch_call(
    backend: str, method: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, block_size: int
) -> tuple[Callable[[], Any], Callable[[], None], Callable[[Callable[[], Any]], tuple]]:
    torch = _import_torch()
    if torch is None:
        raise AttentionInputError(
            f"The {backend} backend needs PyTorch, which is not installed (pip install torch)."
        )
    cuda = backend == "torch-cuda"
    if cuda and not torch.cuda.is_available():
        raise AttentionInputError(
            "The torch-cuda backend needs a CUDA GPU, and torch finds none here "
            "(torch.cuda.is_available() is False)."
        )
    device = torch.device("cuda" if cuda else "cpu")
    tq, tk, tv = (torch.from_numpy(a).to(device) for a in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1])

    if method == "full":

        def compute() -> Any:
            scores = tq @ tk.T  # (n, n): the matrix chunking avoids
            return torch.softmax(scores * scale, dim=-1) @ tv

    elif method == "chunked":

        def compute() -> Any:
            return chunked_attention(tq, tk, tv, block_size=block_size).output

    else:
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def compute() -> Any:
            return sdpa(tq[None, None], tk[None, None], tv[None, None])[0, 0]

    def run() -> Any:
        with torch.inference_mode():
            return compute()

    if cuda:
        return run, torch.cuda.synchronize, _cuda_peak
    return run, _no_sync, _torch_cpu_peak


def _cuda_peak(run: Callable[[], Any]) -> tuple[int, str]:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = run()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del result
    return max(0, peak - before), "torch.cuda.max_memory_allocated"


def _torch_cpu_peak(run: Callable[[], Any]) -> tuple[int | None, str]:
    """Peak of the running total of the CPU allocations the torch profiler records."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            result = run()
            del result
        events = prof.profiler.kineto_results.events()
        # Each allocation (+bytes) and free (-bytes) is one event; the running total's maximum
        # is the peak above the memory held before the call.
        changes = sorted(
            (
                (event.start_ns(), event.nbytes())
                for event in events
                if event.name() == "[memory]" and str(event.device_type()).endswith("CPU")
            ),
            key=lambda change: change[0],
        )
    except (AttributeError, RuntimeError) as error:
        return None, f"the torch profiler could not report allocations here ({error})"
    total = peak = 0
    for _, change in changes:
        total += change
        peak = max(peak, total)
    return peak, "torch profiler allocation events (profile_memory=True)"


def speedup(baseline: Measurement, other: Measurement) -> float:
    """How many times faster `other` ran than `baseline`: baseline.seconds / other.seconds."""
    return baseline.seconds / other.seconds
