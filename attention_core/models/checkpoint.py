"""What every family's loader shares once it has a checkpoint's config and tensors in hand.

    TensorPicker     takes the tensors a family's weights need by name and shape, noting every
                     missing or mis-shaped one, so a load reports all its problems at once
    read_only        an array made read-only: a cached model cannot be changed by accident
    optional_id      a config's token id (bos/eos), which some configs list and some omit
    config_errors    a config value that is missing or of the wrong type, as a ModelFileError
    check_logits     a damaged weight file (NaN or huge values), told once, at the logits

The family's own modules say which names and shapes a checkpoint holds; nothing here knows one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from .loading import ModelFileError, widen

__all__ = ["TensorPicker", "check_logits", "config_errors", "optional_id", "read_only"]


def read_only(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


class TensorPicker:
    """Takes tensors from a state dict by name and shape; ``check`` then raises one
    ``ModelFileError`` naming the first five problems (and how many more there were)."""

    def __init__(self, state: Mapping[str, np.ndarray], source: str) -> None:
        self.state, self.source = state, source
        self.problems: list[str] = []

    def stored(self, name: str, shape: tuple[int, ...], *, optional: bool = False) -> Any:
        """The tensor ``name`` as stored when it has ``shape``; else None, and the problem
        noted (none for a missing ``optional`` tensor)."""
        arr = self.state.get(name)
        if arr is None:
            if not optional:
                self.problems.append(f"{name} is missing")
            return None
        if tuple(arr.shape) != shape:
            self.problems.append(f"{name} has shape {tuple(arr.shape)}, expected {shape}")
            return None
        return arr

    def float32(self, name: str, shape: tuple[int, ...], *, finite: bool = False) -> Any:
        """The tensor ``name`` widened to float32, contiguous and read-only (None with the
        problem noted, as ``stored``); one that holds no floats (uint16 is bfloat16 bits:
        ``read_weights``) is a problem, and with ``finite`` one holding NaN or infinities."""
        arr = self.stored(name, shape)
        if arr is None:
            return None
        if arr.dtype != np.uint16 and not np.issubdtype(arr.dtype, np.floating):
            self.problems.append(f"{name} holds {arr.dtype} values, expected floats")
            return None
        out = np.ascontiguousarray(widen(arr), dtype=np.float32)
        if finite and not np.isfinite(out).all():
            self.problems.append(f"{name} contains NaN or infinite values")
        return read_only(out)

    def layers(self, prefix: str, count: int, build: Callable[[str], Any]) -> tuple[Any, ...]:
        """Each of ``count`` layers, ``build`` given its names' prefix ("h.0", "model.layers.1"…):
        the tensors it takes are picked, and noted, in the layers' order."""
        return tuple(build(f"{prefix}.{i}") for i in range(count))

    def check(self, what: str = "the configuration", advice: str = "") -> None:
        """Raise the problems noted so far, if any: "The weights in <source> do not match
        <what>: ...". ``advice`` (a sentence) follows them."""
        if not self.problems:
            return
        shown = "; ".join(self.problems[:5])
        more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        raise ModelFileError(
            f"The weights in {self.source} do not match {what}: {shown}{more}."
            + (f" {advice}" if advice else "")
        )


def optional_id(value: Any) -> int | None:
    if isinstance(value, list):  # some configs list several end-of-sequence ids
        value = value[0] if value else None
    return None if value is None else int(value)


@contextmanager
def config_errors(source: str, family: str) -> Iterator[None]:
    """Reading a config's numbers inside this turns a missing key or a value of the wrong type
    into a ModelFileError that names the file and the family it should describe."""
    try:
        yield
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ModelFileError(
            f"{source} is not a complete {family} configuration (missing or bad {exc})."
        ) from exc


def check_logits(logits: np.ndarray) -> None:
    # The layers skip the attention functions' per-call checks; a damaged weight file still
    # shows here, once, instead of as NaN probabilities.
    if not np.all(np.isfinite(logits)):
        raise ModelFileError(
            "The model produced non-finite logits: its weight file is damaged (NaN or huge "
            "values). Download or save the model again."
        )
