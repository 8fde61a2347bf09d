"""What a process holds in memory, read from Linux's /proc: its resident memory by kind, its
children, and what those children hold on their own. Not Linux, or no such process: nothing.
"""

from __future__ import annotations

from pathlib import Path


def rss_mb(pid: int) -> float:
    return status_mb(pid, "VmRSS").get("VmRSS", 0.0)


def status_mb(pid: int, *fields: str) -> dict[str, float]:
    """The memory `fields` of /proc/<pid>/status (VmRSS, RssAnon, ...) in MB, read at once;
    those missing (no such process, not Linux) are left out."""
    found: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in fields:
                found[name] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found


def memory_mb(pid: int) -> float:
    """What a server holds: its resident memory, and what its children (the model's kept
    process, server.kept_process) hold on their own. The pages they share with it (the model's
    memfd, the libraries) are counted once, in its resident memory, as a container's limit
    counts them."""
    return rss_mb(pid) + children_mb(pid)


def children_mb(pid: int) -> float:
    """What the process's children hold on their own: the pages no other process maps."""
    return sum(_private_mb(child) for child in child_pids(pid))


def child_pids(pid: int) -> list[int]:
    """The process's living and unreaped children, from every thread's list in /proc."""
    found = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in listing.read_text().split()]
        except OSError:
            pass
    return found


def _private_mb(pid: int) -> float:
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0.0
    kb = (
        int(line.split()[1])
        for line in lines
        if line.startswith(("Private_Clean:", "Private_Dirty:"))
    )
    return sum(kb) / 1024
