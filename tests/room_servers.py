"""A real Redis server for the tests, on a free loopback port, gone when they end.

`make test` installs Debian's redis-server (scripts/ensure-apt-package), as it installs HAProxy.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from server.serve import free_port


@contextmanager
def redis_server() -> Iterator[str]:
    """A fresh redis-server that keeps nothing on disk; yields its URL."""
    program = shutil.which("redis-server")
    if program is None:
        raise RuntimeError("redis-server is missing: run `sudo apt-get install -y redis-server`.")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="ae-redis-") as folder:
        command = [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", folder]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            import redis

            client = redis.Redis(port=port)
            deadline = time.monotonic() + 20
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)
