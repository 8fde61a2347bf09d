"""Input checks shared by every public function, with messages written for a learner.

Each helper either returns a clean array (or number) or raises `AttentionInputError` saying
what is wrong, where, and how to fix it. Pages catch `AttentionInputError` and show its message;
nothing here prints or logs.

Arrays follow the array API: a function that runs on NumPy arrays and on torch tensors starts
with `xp = array_namespace(q, k, v)`, validates each input with `xp=xp` (which lets tensors
through; without it they are refused with a message) and brings them together with
`to_common(xp, ...)` (one namespace, one device, one float dtype). The checks themselves use
`xp.` functions, so a tensor is checked where it lives, CPU or CUDA. torch is never imported
here: `array_api_compat` only looks at it when it is handed a tensor.

`MAX_ELEMENTS` caps the size of any array a function would produce (for example the
`(q_pos, k_pos)` score matrix), so a typo such as `q_len=10**6` gives a message instead of
exhausting memory. It is read at call time: set `attention_core.validation.MAX_ELEMENTS`, or use
the `max_elements(n)` context manager, to change it.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

import array_api_compat
import array_api_compat.numpy
import numpy as np
from array_api_compat import (
    device,
    is_array_api_obj,
    is_numpy_array,
    is_numpy_namespace,
    to_device,
)

__all__ = [
    "MAX_ELEMENTS",
    "AttentionInputError",
    "array_namespace",
    "as_array",
    "as_float_array",
    "as_mask",
    "as_matrix",
    "broadcast_batch",
    "check_finite",
    "check_int",
    "check_real",
    "check_same_width",
    "check_size",
    "check_token_ids",
    "max_elements",
    "result_float_dtype",
    "to_common",
    "to_like",
]

MAX_ELEMENTS: int = 50_000_000


class AttentionInputError(ValueError):
    """Invalid input to an attention function; the message is meant to be shown to a learner."""


@contextlib.contextmanager
def max_elements(limit: int) -> Iterator[None]:
    """Temporarily change the size cap `MAX_ELEMENTS` (e.g. in a test or a notebook)."""
    global MAX_ELEMENTS
    limit = check_int(limit, "the element cap", minimum=1)
    previous = MAX_ELEMENTS
    MAX_ELEMENTS = limit
    try:
        yield
    finally:
        MAX_ELEMENTS = previous


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + (",)" if len(shape) == 1 else ")")


def check_size(shape: Sequence[int], what: str) -> None:
    """Raise if an array of `shape` would hold more than `MAX_ELEMENTS` elements."""
    count = math.prod(int(s) for s in shape)
    if count > MAX_ELEMENTS:
        raise AttentionInputError(
            f"{what} would have shape {_shape_text(shape)}, i.e. {count:,} numbers, more than the "
            f"limit of {MAX_ELEMENTS:,}. Use shorter sequences or fewer heads (the limit is "
            "attention_core.validation.MAX_ELEMENTS)."
        )


# What is never a tensor; checked first because it is cheap (the toy examples are microseconds).
_PLAIN = (np.ndarray, np.generic, list, tuple, numbers.Number, str, type(None))


def _is_tensor(x: object) -> bool:
    """An array of another library than NumPy (a torch tensor, say)."""
    return not isinstance(x, _PLAIN) and is_array_api_obj(x) and not is_numpy_array(x)


def array_namespace(*values: object) -> Any:
    """The namespace to compute in: torch's if any of `values` is a torch tensor, else NumPy's.

    Lists, numbers, None and NumPy arrays do not choose: they are converted into the tensors'
    namespace by `to_common`, so a NumPy mask can go with CUDA tensors.
    """
    tensors = [x for x in values if _is_tensor(x)]
    if not tensors:
        return array_api_compat.numpy
    try:
        return array_api_compat.array_namespace(*tensors)
    except TypeError:
        kinds = sorted({type(x).__module__.split(".")[0] for x in tensors})
        raise AttentionInputError(
            f"The inputs mix arrays of {' and '.join(kinds)}: use one array library."
        ) from None


def to_common(xp: Any, *arrays: Any) -> list[Any]:
    """The float `arrays` in namespace `xp`, on one device, in one dtype.

    float32 if every array is float32, else float64 (as `result_float_dtype`). NumPy arrays among
    tensors move to the tensors' device; tensors on two different devices are an error.
    """
    if is_numpy_namespace(xp):
        dtype = result_float_dtype(*(a.dtype for a in arrays))
        return [a.astype(dtype, copy=False) for a in arrays]
    devices = list(dict.fromkeys(device(a) for a in arrays if _is_tensor(a)))
    if len(devices) > 1:
        raise AttentionInputError(
            f"Inputs live on different devices ({devices[0]} and {devices[1]}): move them to "
            "one device with .to(device)."
        )
    dtype = xp.float64 if any(a.dtype.itemsize > 4 for a in arrays) else xp.float32
    return [
        xp.astype(xp.asarray(a, device=devices[0]) if is_numpy_array(a) else a, dtype, copy=False)
        for a in arrays
    ]


def to_like(ref: Any, *arrays: Any) -> list[Any]:
    """`arrays` (parameters, say; NumPy or tensors) in the namespace, device and dtype of `ref`."""
    if isinstance(ref, np.ndarray):
        return [np.asarray(a).astype(ref.dtype, copy=False) for a in arrays]
    xp, where = array_namespace(ref), device(ref)
    return [
        xp.astype(
            xp.asarray(a, device=where) if is_numpy_array(a) else to_device(a, where),
            ref.dtype,
            copy=False,
        )
        for a in arrays
    ]


def as_array(x: object, name: str, xp: Any = None) -> Any:
    """Turn `x` (array, nested lists, scalar) into a NumPy array, rejecting ragged input.

    A tensor is returned as it is when the caller computes in a tensor namespace `xp`, and
    refused otherwise: the function asking works on NumPy only.
    """
    if isinstance(x, np.ndarray):
        return x
    if _is_tensor(x):
        if xp is not None and not is_numpy_namespace(xp):
            return x
        library = type(x).__module__.split(".")[0]
        raise AttentionInputError(
            f"{name} is a {library} tensor, but this function works on NumPy arrays only: "
            "convert it with tensor.detach().cpu().numpy()."
        )
    try:
        return np.asarray(x)
    except (ValueError, TypeError):
        raise AttentionInputError(
            f"{name} is ragged: every row must have the same number of entries."
        ) from None


def result_float_dtype(*dtypes: np.dtype) -> np.dtype:
    """float32 if every float input is float32 (or smaller), else float64."""
    floats = [np.dtype(d) for d in dtypes if np.issubdtype(d, np.floating)]
    if floats and all(d.itemsize <= 4 for d in floats):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def as_float_array(
    x: object,
    name: str,
    *,
    xp: Any = None,
    min_ndim: int = 0,
    max_ndim: int | None = None,
    allow_neg_inf: bool = False,
    allow_nonfinite: bool = False,
    allow_empty: bool = False,
) -> Any:
    """A float32/float64 array from `x`, checked for rank, emptiness, type and NaN/inf.

    float32 and float64 are kept; float16 becomes float32; integers and booleans become float64.
    With `xp` a tensor namespace, tensors are accepted and stay where they are (see `as_array`).
    """
    arr = as_array(x, name, xp)
    if is_numpy_array(arr) and (
        arr.dtype == object
        or not (np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_))
    ):
        raise AttentionInputError(
            f"{name} contains non-numeric values such as {_first_non_number(arr)!r}: "
            "enter plain numbers only."
        )
    axp = array_namespace(arr)
    if arr.dtype not in (axp.float32, axp.float64):
        if axp.isdtype(arr.dtype, "complex floating"):
            raise AttentionInputError(f"{name} contains complex numbers: use real numbers only.")
        small_float = axp.isdtype(arr.dtype, "real floating") and arr.dtype.itemsize <= 4
        arr = axp.astype(arr, axp.float32 if small_float else axp.float64)
    if arr.ndim < min_ndim:
        need = {1: "a vector", 2: "a matrix (rows × columns)"}.get(min_ndim, f"{min_ndim}-D")
        raise AttentionInputError(
            f"{name} must be {need} with at least {min_ndim} dimension(s), "
            f"but it has shape {_shape_text(arr.shape)}."
        )
    if max_ndim is not None and arr.ndim > max_ndim:
        raise AttentionInputError(
            f"{name} must have at most {max_ndim} dimension(s), but it has shape "
            f"{_shape_text(arr.shape)}."
        )
    if math.prod(arr.shape) == 0 and not allow_empty:
        raise AttentionInputError(
            f"{name} is empty (shape {_shape_text(arr.shape)}): it needs at least one row and "
            "one column."
        )
    if not allow_nonfinite:
        check_finite(arr, name, allow_neg_inf=allow_neg_inf)
    return arr


def _first_non_number(arr: np.ndarray) -> object:
    for item in arr.flat:
        if isinstance(item, bool | np.bool_) or not isinstance(item, numbers.Real):
            return item.item() if isinstance(item, np.generic) else item
    return arr.flat[0]


def as_matrix(x: object, name: str, xp: Any = None) -> Any:
    """A finite float array with at least 2 dims `(..., rows, columns)`."""
    return as_float_array(x, name, xp=xp, min_ndim=2)


def check_finite(arr: Any, name: str, *, allow_neg_inf: bool = False) -> Any:
    """Raise if `arr` holds NaN or ±inf (optionally allowing -inf, the 'masked' marker)."""
    xp = array_namespace(arr)
    bad = xp.isnan(arr) | (arr == math.inf if allow_neg_inf else xp.isinf(arr))
    if bool(xp.any(bad)):
        where = tuple(int(i[0]) for i in xp.nonzero(bad)) if arr.ndim else ()
        value = float(arr[where])
        if arr.ndim == 2:
            place = f"row {where[0] + 1}, column {where[1] + 1}"
        elif arr.ndim > 2:
            place = f"index {list(where)} (counting from 0)"
        else:
            place = f"position {where[0] + 1}" if where else "the only entry"
        raise AttentionInputError(
            f"{name} contains {value} at {place}: all entries must be finite numbers. "
            "Replace NaN/inf with an ordinary value (use a mask to hide positions)."
        )
    return arr


def check_int(value: object, name: str, *, minimum: int | None = None) -> int:
    """A Python int from an int-like value (not bool, not a fractional float)."""
    if isinstance(value, bool | np.bool_):
        raise AttentionInputError(f"{name} must be a whole number, not {value!r}.")
    if isinstance(value, numbers.Integral):
        out = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        out = int(value)
    else:
        raise AttentionInputError(f"{name} must be a whole number, got {value!r}.")
    if minimum is not None and out < minimum:
        raise AttentionInputError(f"{name} must be at least {minimum}, got {out}.")
    return out


def check_position(position: object, length: int) -> int:
    """A token's position from 0 in a text of ``length`` tokens, as a Python int."""
    position = check_int(position, "the position", minimum=0)
    if position >= length:
        raise AttentionInputError(
            f"Token {position + 1} does not exist: the text has {length} tokens."
        )
    return position


def check_token_ids(input_ids: object, vocab_size: int) -> np.ndarray:
    """``input_ids`` as a non-empty `(n,)` integer array of ids a vocabulary of ``vocab_size``
    tokens has."""
    ids = np.asarray(input_ids)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise AttentionInputError(
            f"input_ids must be a non-empty list of token ids, got shape {ids.shape}."
        )
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise AttentionInputError(f"Token ids must lie in 0..{vocab_size - 1}.")
    return ids


def check_real(value: object, name: str, *, positive: bool = False, nonzero: bool = False) -> float:
    """A finite Python float (optionally > 0 or != 0)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise AttentionInputError(f"{name} must be a real number, got {value!r}.")
    out = float(value)
    if not math.isfinite(out):
        raise AttentionInputError(f"{name} must be a finite number, got {out}.")
    if positive and out <= 0:
        raise AttentionInputError(f"{name} must be greater than 0, got {out}.")
    if nonzero and out == 0:
        raise AttentionInputError(f"{name} must not be 0.")
    return out


def check_same_width(a: Any, b: Any, name_a: str, name_b: str, what: str) -> None:
    """Raise if the last dimensions differ, e.g. Q and K must share d_k."""
    if a.shape[-1] != b.shape[-1]:
        raise AttentionInputError(
            f"{name_b} has {b.shape[-1]} columns but {name_a} has {a.shape[-1]}: {what}."
        )


def broadcast_batch(*named: tuple[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Broadcast the leading (batch/head) dims of several arrays, with a readable error."""
    try:
        return np.broadcast_shapes(*(shape for _, shape in named))
    except ValueError:
        listing = ", ".join(f"{n} {_shape_text(s)}" for n, s in named)
        raise AttentionInputError(
            f"The batch/head dimensions do not match: {listing}. Leading dimensions must be "
            "equal or 1 so they can be broadcast."
        ) from None


def as_mask(mask: object, name: str, target_shape: tuple[int, ...], xp: Any = None) -> Any:
    """A boolean mask (True = may attend) that broadcasts against `target_shape`.

    The mask's last two dims must be 1 or match the (query, key) grid of `target_shape`; its
    leading dims must broadcast with the leading dims of `target_shape`.

    Accepts bool arrays, nested lists of bools, and 0/1 integer arrays. Float masks are rejected
    because they are ambiguous (additive bias or boolean?).
    """
    arr = as_array(mask, name, xp)
    axp = array_namespace(arr)
    if arr.dtype != axp.bool:
        if axp.isdtype(arr.dtype, "integral") and bool(axp.all((arr == 0) | (arr == 1))):
            arr = axp.astype(arr, axp.bool)
        else:
            raise AttentionInputError(
                f"{name} must be boolean (True = may attend, False = blocked), but it has dtype "
                f"{arr.dtype}. Build masks with causal_mask/padding_mask, or use `scores > x` "
                "style comparisons; 0/1 integers are accepted too."
            )
    if arr.ndim == 0 or math.prod(arr.shape) == 0:
        raise AttentionInputError(
            f"{name} has shape {_shape_text(arr.shape)}: it must have a (query, key) grid."
        )
    try:
        full = np.broadcast_shapes(arr.shape, target_shape)
    except ValueError:
        full = None
    # Extra leading (batch) dimensions on the mask are fine; the (query, key) grid must fit.
    if full is None or full[-2:] != tuple(target_shape)[-2:]:
        raise AttentionInputError(
            f"{name} has shape {_shape_text(arr.shape)} but the scores have shape "
            f"{_shape_text(target_shape)} (…, query positions, key positions): the mask must "
            "match or broadcast to it, one row per query and one column per key."
        )
    return arr


def as_pattern(weights: object, *, min_ndim: int = 2) -> np.ndarray:
    """Self-attention weights `(..., q_pos, k_pos)` as a float array, checked: as many queries as
    keys (the same tokens), at least two of them, every weight between 0 and 1."""
    w = as_float_array(weights, "weights", min_ndim=min_ndim)
    q_pos, k_pos = w.shape[-2:]
    if q_pos != k_pos:
        raise AttentionInputError(
            f"The weights have {q_pos} query rows and {k_pos} key columns: a head's pattern is "
            "read from self-attention, where queries and keys are the same tokens."
        )
    if k_pos < 2:
        raise AttentionInputError(
            "The weights cover a single token: a head's pattern needs at least 2 tokens (a "
            "previous or next token, and something to spread over)."
        )
    if (w < 0).any() or (w > 1 + 1e-6).any():
        raise AttentionInputError(
            "The weights are not all between 0 and 1: pass softmax attention weights."
        )
    return w
