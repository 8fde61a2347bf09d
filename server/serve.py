"""Serve the app as N Streamlit processes behind HAProxy, sticky by cookie.

One Streamlit process runs every session's script in threads that share one GIL, so past what
one core can do a lecture hall needs more processes. Each process keeps its sessions in memory
(widget state, uploaded files, media), so every request of a browser tab must reach the same
process: HAProxy inserts a cookie naming the worker into the page's first response, and the
browser sends it back with every later request, the websocket upgrade included.

    python server/serve.py --workers 2 --port 8501        # what `make serve WORKERS=2` runs
    python server/serve.py --address 0.0.0.0              # in a container: WORKERS=2 (Dockerfile)

With `--workers 1` it is plain `streamlit run app.py`. The workers listen on 127.0.0.1 only;
HAProxy is the one public port. Ctrl-C (or SIGTERM) stops them all.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from server.resident import memory_mb

ROOT = Path(__file__).resolve().parent.parent
HEALTH_TIMEOUT = 60.0

HAPROXY_CONFIG = """\
global
    maxconn 4096

defaults
    mode http
    option forwardfor
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    # A Streamlit tab holds one websocket for as long as it is open.
    timeout tunnel 1h
    timeout client-fin 30s
    # A worker restarting refuses connections until its health check marks it down: such a
    # request goes to another worker rather than fail.
    option redispatch
    retries 3

frontend attention_explorer
    bind {address}:{port}
    default_backend streamlit

backend streamlit
    balance roundrobin
    # Sticky sessions: the first response names the worker; the tab sends it back ever after.
    cookie AE_WORKER insert indirect nocache httponly
    # Says which worker answered: for debugging a deployment, and for the stickiness test.
    http-response set-header X-AE-Worker %s
    option httpchk GET /_stcore/health
    http-check expect string ok
{servers}
"""


def haproxy_config(address: str, port: int, worker_ports: list[int]) -> str:
    servers = "\n".join(
        f"    server w{i} 127.0.0.1:{p} check inter 2s cookie w{i}"
        for i, p in enumerate(worker_ports, start=1)
    )
    return HAPROXY_CONFIG.format(address=address, port=port, servers=servers)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_healthy(port: int, process: subprocess.Popen, timeout: float = HEALTH_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} on port {port} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing answered on port {port} within {timeout:.0f} s")


class Deployment:
    """N Streamlit workers (and HAProxy when N > 1) on loopback, stopped on exit."""

    def __init__(self, script: Path, *, workers: int = 1, port: int | None = None,
                 address: str = "127.0.0.1", env: dict[str, str] | None = None):  # fmt: skip
        if workers > 1 and shutil.which("haproxy") is None:
            raise RuntimeError("HAProxy is missing: run `sudo apt-get install -y haproxy`.")
        self.script, self.workers, self.address = script, workers, address
        self.env = {**os.environ, **(env or {})}
        self.port = port or free_port()
        self.processes: list[subprocess.Popen] = []
        self.balancer: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="attention-explorer-")

    def __enter__(self) -> Deployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        single = self.workers == 1
        self.ports = [self.port] if single else [free_port() for _ in range(self.workers)]
        # Workers share one cookie secret, so the XSRF cookie one issued is good at all of them.
        self.secret = self.env.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(16)
        self.processes = [self._spawn(worker_port) for worker_port in self.ports]
        for worker_port, process in zip(self.ports, self.processes, strict=True):
            wait_healthy(worker_port, process)
        if not single:
            config = Path(self._tmp.name) / "haproxy.cfg"
            config.write_text(haproxy_config(self.address, self.port, self.ports))
            self.balancer = subprocess.Popen(["haproxy", "-f", str(config), "-db"], cwd=ROOT)
            wait_healthy(self.port, self.balancer)

    def _spawn(self, worker_port: int) -> subprocess.Popen:
        command = [
            sys.executable, "-m", "streamlit", "run", str(self.script),
            "--server.port", str(worker_port),
            "--server.address", self.address if self.workers == 1 else "127.0.0.1",
            "--server.headless", "true",
        ]  # fmt: skip
        environment = {**self.env, "STREAMLIT_SERVER_COOKIE_SECRET": self.secret}
        return subprocess.Popen(
            command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=sys.stderr
        )

    def restart_worker(self, index: int) -> None:
        """Start worker `index` again on its port (stopping it first if it still runs): its
        sessions are gone, and its tabs reconnect to new ones (HAProxy sends a tab whose worker
        is down to another, and back once it answers its health check again)."""
        process = self.processes[index]
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes[index] = self._spawn(self.ports[index])
        wait_healthy(self.ports[index], self.processes[index])

    def rss_mb(self) -> float:
        """Memory of all Streamlit workers together, their children's own included (`memory_mb`;
        HAProxy's few MB left out)."""
        return round(sum(memory_mb(p.pid) for p in self.processes), 1)

    def stop(self) -> None:
        for process in [self.balancer, *self.processes]:
            if process and process.poll() is None:
                process.terminate()
        for process in [self.balancer, *self.processes]:
            if process:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        self._tmp.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKERS", "2")))
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1")
    args = parser.parse_args()
    if not 1 <= args.workers <= 64:
        parser.error("--workers must be between 1 and 64")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        deployment = Deployment(
            ROOT / "app.py", workers=args.workers, port=args.port, address=args.address
        )
    except RuntimeError as error:
        sys.exit(str(error))
    with deployment:
        shown = "localhost" if args.address in ("127.0.0.1", "0.0.0.0") else args.address
        print(f"Attention Explorer: {args.workers} worker(s) at http://{shown}:{args.port}")
        try:
            while not stopping:
                # A worker that died is started again: its tabs reconnect, and a room's answers
                # are in the store, not in the worker.
                for index, process in enumerate(deployment.processes):
                    if process.poll() is not None:
                        print(
                            f"worker {index + 1} exited ({process.returncode}); starting it again"
                        )
                        deployment.restart_worker(index)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
