"""Whether the Hugging Face Hub can be reached from this server, asked before a download.

huggingface_hub retries a failing download for about 25 s; this check lets a server without
internet say so at once. Behind an HTTPS proxy the direct check would fail, so the Hub is
assumed reachable and huggingface_hub decides.
"""

from __future__ import annotations

import os
import socket

HUB_HOST = "huggingface.co"


def hub_reachable(host: str = HUB_HOST, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to `host` opens within `timeout` seconds."""
    if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
        return True
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
