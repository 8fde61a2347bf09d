"""The measurement harness: backend availability, measured values (never timings) at tiny sizes."""

import statistics
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import AttentionInputError
from attention_core.cost import chunk_bytes
from attention_core.measurement import (
    MAX_MEASURE_LENGTH,
    _numpy_call,
    _numpy_peak,
    _torch_call,
    _torch_cpu_peak,
    available_backends,
    backend_status,
    measure_attention,
    speedup,
)


def test_speedup_is_the_ratio_of_median_times():
    slow = measure_attention("numpy", 16, 4, repeats=1, measure_memory=False)
    fast = measure_attention("numpy", 16, 4, repeats=1, measure_memory=False)
    assert speedup(slow, fast) == slow.seconds / fast.seconds


# --- backends -----------------------------------------------------------------------------------


def test_backend_status_here():
    statuses = {status.name: status for status in backend_status()}
    assert list(statuses) == ["numpy", "torch-cpu", "torch-cuda"]
    assert statuses["numpy"].available and np.__version__ in statuses["numpy"].detail
    assert statuses["torch-cpu"].available and torch.__version__ in statuses["torch-cpu"].detail
    cuda = statuses["torch-cuda"]
    assert cuda.available == torch.cuda.is_available()
    if not cuda.available:
        expected = "CPU-only" if torch.version.cuda is None else "no CUDA GPU found"
        assert expected in cuda.detail
    assert available_backends() == tuple(name for name, s in statuses.items() if s.available)


def test_without_torch_only_numpy_is_available_and_torch_backends_say_why(monkeypatch):
    # None in sys.modules makes `import torch` raise ImportError, as on a machine without torch.
    monkeypatch.setitem(sys.modules, "torch", None)
    statuses = {status.name: status for status in backend_status()}
    assert available_backends() == ("numpy",)
    for name in ("torch-cpu", "torch-cuda"):
        assert not statuses[name].available
        assert statuses[name].detail == "torch is not installed (pip install torch)"
    with pytest.raises(AttentionInputError, match="needs PyTorch, which is not installed"):
        measure_attention("torch-cpu", 8, 4)


def test_cuda_backend_runs_with_a_gpu_and_is_refused_with_the_reason_without():
    if torch.cuda.is_available():
        assert measure_attention("torch-cuda", 8, 4, repeats=1).n == 8
    else:
        with pytest.raises(AttentionInputError, match="needs a CUDA GPU"):
            measure_attention("torch-cuda", 8, 4)


# --- what is measured is attention --------------------------------------------------------------


def reference(q, k, v):
    tensors = (torch.from_numpy(a) for a in (q, k, v))
    return F.scaled_dot_product_attention(*tensors).numpy()


@pytest.fixture
def qkv():
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((70, 16), dtype=np.float32) for _ in range(3))


@pytest.mark.parametrize("method", ["full", "chunked"])
def test_numpy_measured_calls_compute_attention(qkv, method):
    out = _numpy_call(method, *qkv, block_size=16)()
    np.testing.assert_allclose(out, reference(*qkv), atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", ["full", "chunked", "fused"])
def test_torch_measured_calls_compute_attention(qkv, method):
    run, _, _ = _torch_call("torch-cpu", method, *qkv, block_size=16)
    np.testing.assert_allclose(run().numpy(), reference(*qkv), atol=1e-5, rtol=0)


# --- memory tracers against known allocations ---------------------------------------------------


def test_numpy_peak_sees_one_known_buffer():
    peak, note = _numpy_peak(lambda: np.ones((1000, 1000), dtype=np.float32))
    # The 4,000,000-byte buffer plus NumPy's small array header.
    assert 4_000_000 <= peak < 4_000_000 + 4_096
    assert "tracemalloc" in note


def test_torch_cpu_peak_sees_one_known_tensor_and_a_temporary():
    peak, _ = _torch_cpu_peak(lambda: torch.empty(1000, 1000))
    assert peak == 4_000_000
    # (a + 1) is a temporary that still exists while its double is made: 2 buffers at the peak.
    a = torch.ones(500, 500)
    peak, note = _torch_cpu_peak(lambda: (a + 1) * 2)
    # (+ a few bytes: torch wraps the scalars 1 and 2 in tiny tensors.)
    assert 2 * 500 * 500 * 4 <= peak < 2 * 500 * 500 * 4 + 1_024
    assert "profiler" in note


# --- measurements (values only; timings are never asserted) -------------------------------------


def test_numpy_full_measurement_values():
    n, d = 256, 16
    m = measure_attention("numpy", n, d, repeats=3)
    assert (m.backend, m.method, m.n, m.d, m.block_size) == ("numpy", "full", n, d, None)
    assert len(m.runs) == 3 and m.seconds == statistics.median(m.runs)
    assert m.flops == 4 * n * n * d
    assert m.gflops == pytest.approx(m.flops / m.seconds / 1e9, rel=1e-12)
    assert m.score_bytes == n * n * 4
    # The full method must hold the n×n float32 scores at some point.
    assert m.peak_bytes >= n * n * 4


def test_numpy_chunked_never_holds_the_matrix():
    n, d, block = 512, 16, 32
    m = measure_attention("numpy", n, d, method="chunked", block_size=block, repeats=1)
    assert m.block_size == block
    # It holds at least one n×block tile, and far less than the n×n matrix (1 MiB here).
    assert chunk_bytes(n, n, block) <= m.peak_bytes < n * n * 4 / 2


def test_torch_cpu_full_chunked_and_fused_memory():
    n, d = 512, 16
    full = measure_attention("torch-cpu", n, d, repeats=1)
    chunked = measure_attention("torch-cpu", n, d, method="chunked", block_size=32, repeats=1)
    fused = measure_attention("torch-cpu", n, d, method="fused", repeats=1)
    assert full.peak_bytes >= n * n * 4
    assert chunked.peak_bytes < n * n * 4 / 2
    # torch's CPU SDPA kernel tiles too: it never allocates the n×n matrix either.
    assert fused.peak_bytes < n * n * 4 / 2
    assert full.flops == chunked.flops == fused.flops == 4 * n * n * d


@pytest.mark.gpu
def test_torch_cuda_memory():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False")
    n, d = 1024, 32
    full = measure_attention("torch-cuda", n, d, repeats=1)
    chunked = measure_attention("torch-cuda", n, d, method="chunked", block_size=64, repeats=1)
    assert full.peak_bytes >= n * n * 4
    assert chunked.peak_bytes < n * n * 4 / 2
    assert "max_memory_allocated" in full.peak_note


def test_memory_measurement_can_be_skipped():
    m = measure_attention("numpy", 32, 8, repeats=2, warmup=False, measure_memory=False)
    assert m.peak_bytes is None and len(m.runs) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "tpu", "n": 8}, "Unknown backend"),
        ({"backend": "numpy", "n": 8, "method": "magic"}, "Unknown method"),
        ({"backend": "numpy", "n": 8, "method": "fused"}, "no fused attention kernel"),
        ({"backend": "numpy", "n": MAX_MEASURE_LENGTH + 1}, "limited to n <="),
        ({"backend": "numpy", "n": 8, "d": 10_000}, "limited to"),
        ({"backend": "numpy", "n": 8, "repeats": 0}, "at least 1"),
        ({"backend": "numpy", "n": "abc"}, "whole number"),
        # 8192² scores exceed MAX_ELEMENTS for the full method (chunked would be fine).
        ({"backend": "numpy", "n": 8192}, "n×n score matrix"),
    ],
)
def test_bad_requests_are_refused_before_any_allocation(kwargs, message):
    def refused():
        with pytest.raises(AttentionInputError, match=message):
            measure_attention(**kwargs)

    peak, _ = _numpy_peak(refused)
    # Refused up front: not even the (n, d) inputs were made (8192×64 float32 would be 2 MiB).
    assert peak < 100_000


def test_a_crafted_billion_token_request_is_refused():
    with pytest.raises(AttentionInputError, match="limited to n"):
        measure_attention("numpy", 1_000_000_000, 64, method="chunked")


def test_concurrent_measurements_take_turns_instead_of_crashing():
    # Two browser sessions on one server measuring at once: two torch profiler sessions at the
    # same time abort the process, so measurements hold a lock; both must come back whole.
    import threading

    results, errors = [], []

    def measure(backend):
        try:
            results.append(measure_attention(backend, 256, 16, repeats=1))
        except Exception as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=measure, args=(b,)) for b in ("torch-cpu", "torch-cpu")]
    threads += [threading.Thread(target=measure, args=("numpy",))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 3
    assert all(m.peak_bytes >= 256 * 256 * 4 for m in results)
