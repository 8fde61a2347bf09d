"""server.memory: glibc's knobs do what they say, measured in page faults of a fresh process."""

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

# A fresh interpreter each time: the allocator setting is process-wide.
CHURN = """
import resource, sys, numpy as np
from server.memory import reuse_freed_memory
def faults_of_one_pass(mib):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones((512, 1024), np.float32) for _ in range(mib // 2)]  # 2 MiB each, then freed
    del arrays
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
mib, keep = int(sys.argv[1]), sys.argv[2]
faults_of_one_pass(mib)
default = faults_of_one_pass(mib)
applied = reuse_freed_memory() if keep == "default" else reuse_freed_memory(keep_mb=int(keep))
faults_of_one_pass(mib)
print(applied, default, faults_of_one_pass(mib))
"""


def churn(mib: int, keep: str) -> tuple[str, int, int]:
    run = subprocess.run(
        [sys.executable, "-c", CHURN, str(mib), keep],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    applied, default, reused = run.stdout.split()
    return applied, int(default), int(reused)


PAGES_PER_MIB = 256  # 4 KiB pages


def test_reuse_freed_memory_lets_the_next_arrays_skip_page_faults():
    applied, default, reused = churn(32, keep="64")
    if platform.libc_ver()[0] != "glibc":
        assert applied == "False"
        return
    assert applied == "True"
    assert default > 32 * PAGES_PER_MIB * 0.9  # every page of 32 MiB faulted in again
    assert reused < 100


def test_by_default_a_free_heap_top_past_16_mib_goes_back_to_the_system():
    # A room's threads each have a heap: keeping a large free top in each adds up (#36).
    applied, _, kept_under = churn(8, keep="default")
    if platform.libc_ver()[0] != "glibc":
        assert applied == "False"
        return
    _, _, given_back_past = churn(64, keep="default")
    assert kept_under < 100  # 8 MiB freed and taken again without faults
    assert given_back_past > 64 * PAGES_PER_MIB * 0.9  # all 64 MiB faulted in again


def test_a_memory_report_line_says_what_the_process_and_each_cache_hold(tmp_path):
    from server.memory import report_memory
    from ui.widgets.byte_cache import MB, bounded_by_bytes, what_caches_hold

    @bounded_by_bytes(8 * MB, name="test.report")
    def block(rows: int):
        return np.ones((rows, 1024), np.float32)  # rows * 4 KiB

    block(256)
    block(512)
    path = tmp_path / "memory.jsonl"
    report_memory(path, what_caches_hold())
    report_memory(path, {})
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["holding"]["test.report"] == {"entries": 2, "mb": 3.0}
    assert second["holding"] == {} and second["time"] >= first["time"]
    if sys.platform == "linux":
        assert sum(first["resident_parts_mb"].values()) == pytest.approx(first["rss_mb"], abs=2)
        status = Path("/proc/self/status").read_text()
        vm_rss_kib = int(status.split("VmRSS:")[1].split()[0])
        assert abs(first["rss_mb"] - vm_rss_kib / 1024) < 50


# A fresh interpreter: what the heaps hold before counts.
HEAP_PARTS = """
import json, numpy as np
from server.memory import heap_mb, resident_parts_mb
before, before_parts = heap_mb(), resident_parts_mb()
small = [np.ones(8_000) for _ in range(1_000)]  # 64 kB each: on a heap, 61 MiB in all
# The last one stays: it lies above the others on the heap (a small array of its own could fill
# an older hole below them), so their freed pages are not the heap's free top.
pinned = small.pop()
large = np.ones(4 * 1024 * 1024)  # 32 MiB: mapped on its own
with_arrays, with_arrays_parts = heap_mb(), resident_parts_mb()
del small
print(json.dumps([before, with_arrays, heap_mb(), before_parts, with_arrays_parts]))
"""


def test_the_report_tells_live_arrays_from_freed_memory_kept_and_mapped_arrays():
    run = subprocess.run(
        [sys.executable, "-c", HEAP_PARTS], capture_output=True, text=True, check=True, cwd=ROOT
    )
    before, with_arrays, after_del, before_parts, with_arrays_parts = json.loads(run.stdout)
    if platform.libc_ver()[0] != "glibc":
        assert before == {}
        return
    megabytes = 1_000 * 8_000 * 8 / 2**20  # 61 MiB of small arrays
    assert with_arrays["in_use"] - before["in_use"] > megabytes * 0.95
    assert with_arrays["mapped"] - before["mapped"] > 31.9
    assert with_arrays["freed_kept"] < before["freed_kept"] + 2
    # Freed below a live piece: still the heap's, counted as kept, no longer in use.
    assert after_del["freed_kept"] - with_arrays["freed_kept"] > megabytes * 0.95
    assert with_arrays["in_use"] - after_del["in_use"] > megabytes * 0.95
    # ones() writes every page: anonymous resident memory grows by both.
    assert with_arrays_parts["anon"] - before_parts["anon"] > (megabytes + 32) * 0.95
    assert set(before_parts) == {"anon", "file", "shmem"}


# A fresh interpreter, alone and then with a child that holds 64 MiB of its own.
CHILDREN = """
import json, subprocess, sys, tempfile
from pathlib import Path
from server.memory import report_memory
path = Path(tempfile.mkdtemp()) / "memory.jsonl"
report_memory(path, {})
child = subprocess.Popen([sys.executable, "-c",
    "import sys, numpy as np; a = np.ones(8 * 2**20); print(flush=True); sys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
child.stdout.readline()
report_memory(path, {})
child.stdin.close()
child.wait()
print(json.dumps([json.loads(line)["children_mb"] for line in path.read_text().splitlines()]))
"""


def test_the_report_counts_what_the_children_hold_on_their_own():
    run = subprocess.run(
        [sys.executable, "-c", CHILDREN], capture_output=True, text=True, check=True, cwd=ROOT
    )
    alone, with_child = json.loads(run.stdout)
    assert alone == 0
    if sys.platform == "linux":
        assert with_child > 64  # its array, and its own interpreter's private pages


BUSY_THREADS = """
import ctypes, sys, threading, numpy as np
from server.memory import fewer_heaps
if sys.argv[1] == "fewer":
    fewer_heaps(2)
start = threading.Barrier(8)
def allocate():
    start.wait()
    for _ in range(200):
        arrays = [np.ones(20_000) for _ in range(20)]
        del arrays
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL("libc.so.6").malloc_stats()  # "Arena N:" per heap, on stderr
"""


def heaps_after_busy_threads(setting: str) -> int:
    run = subprocess.run(
        [sys.executable, "-c", BUSY_THREADS, setting],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return sum(line.startswith("Arena ") for line in run.stderr.splitlines())


def test_fewer_heaps_keeps_busy_threads_to_two():
    if platform.libc_ver()[0] != "glibc":
        return
    assert heaps_after_busy_threads("default") > 2  # glibc's own: a heap per contended thread
    assert heaps_after_busy_threads("fewer") == 2
