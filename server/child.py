"""What the server and a child process it starts agree on: a function is named to the child as
`module:qualified.name`, and a child that ends without an answer is a `ChildLoadError` carrying
its last words (the lines it wrote to standard error).

    function_name(run_llama)        "attention_core.models.llama.forward:run_llama"
    function_named(name)            the function again, imported in the child
    child_ended(code, stderr)       the ChildLoadError to raise for a child that has ended
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import IO, Any


class ChildLoadError(RuntimeError):
    """The child process ended without an answer (killed, out of memory, a broken install)."""


def function_name(function: Callable) -> str:
    """How a module-level function is named to a child."""
    return f"{function.__module__}:{function.__qualname__}"


def function_named(name: str) -> Callable:
    """The function `function_name` named, its module imported."""
    module, qualified = name.split(":")
    found: Any = importlib.import_module(module)
    for part in qualified.split("."):
        found = getattr(found, part)
    return found


def child_ended(code: int, stderr: IO[bytes]) -> ChildLoadError:
    """The error for a child that ended with exit code `code`: its last five lines on
    `stderr`, a file it wrote to."""
    stderr.seek(0)
    last_words = stderr.read().decode(errors="replace").strip().splitlines()[-5:]
    return ChildLoadError(
        f"the loading process ended with exit code {code}: " + " / ".join(last_words)
    )
