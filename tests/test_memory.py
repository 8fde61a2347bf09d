"""server.memory: glibc's knobs do what they say, measured in page faults of a fresh process."""

import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_reuse_freed_memory_lets_the_next_arrays_skip_page_faults():
    # A fresh interpreter: the allocator setting is process-wide.
    churn = """
import resource, numpy as np
from server.memory import reuse_freed_memory
def faults_of_one_pass():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones((512, 1024), np.float32) for _ in range(16)]  # 16 x 2 MiB, then freed
    del arrays
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_one_pass()
default = faults_of_one_pass()
applied = reuse_freed_memory()
faults_of_one_pass()
print(applied, default, faults_of_one_pass())
"""
    run = subprocess.run(
        [sys.executable, "-c", churn], capture_output=True, text=True, check=True, cwd=ROOT
    )
    applied, default, reused = run.stdout.split()
    if platform.libc_ver()[0] != "glibc":
        assert applied == "False"
        return
    assert applied == "True"
    assert int(default) > 16 * 2 * 256 * 0.9  # every 4 KiB page of 32 MiB faulted in again
    assert int(reused) < 100
