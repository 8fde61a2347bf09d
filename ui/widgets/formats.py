"""The file formats numbers leave and come back in: CSV, .npy, LaTeX, JSON of the whole example.

Pure functions, tested on their own: `combine_upload` turns uploaded files into an `Example` or a
clear message; `ui.widgets.exports` puts these behind the page's download buttons and uploader.

CSV layout (what `matrix_to_csv` writes and `csv_to_matrix` reads)::

    token,d1,d2
    the,1,0
    cat,0,1

A first column that is not numeric holds the row labels; a first row that is not numeric is the
header. −∞ (a masked score) is written `-inf`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_core import AttentionInputError, AttentionSteps
from attention_core.lessons.presets import MAX_EXAMPLE_TOKENS, MAX_EXAMPLE_WIDTH, Example

JSON_FORMAT = "attention-explorer/example"
JSON_VERSION = 1
# An upload is untrusted input: refuse big files before parsing them.
MAX_UPLOAD_BYTES = 200_000
STEP_NAMES = ("scores", "scaled", "masked", "weights", "output")
LABEL_HEADERS = ("token", "query", "key", "")


# -- one matrix --------------------------------------------------------------------------------


def _cell(x: float) -> str:
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return repr(float(x)).removesuffix(".0") if float(x).is_integer() else repr(float(x))


def matrix_to_csv(
    values: np.ndarray,
    *,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    row_title: str = "token",
) -> str:
    """CSV text of a `(rows, cols)` matrix with a header and one label per row.

    Numbers are written with full precision (`repr`), so reading the file back gives exactly the
    same floats.
    """
    matrix = np.asarray(values, dtype=np.float64)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([row_title, *col_labels])
    for label, row in zip(row_labels, matrix, strict=True):
        writer.writerow([label, *(_cell(x) for x in row)])
    return out.getvalue()


def _is_number(text: str) -> bool:
    try:
        float(text.strip().replace("−", "-"))
    except ValueError:
        return False
    return bool(text.strip())


def csv_to_matrix(
    text: str,
    *,
    name: str,
    max_rows: int = MAX_EXAMPLE_TOKENS,
    max_cols: int = MAX_EXAMPLE_WIDTH,
    allow_neg_inf: bool = False,
) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """(matrix, row labels or None) from CSV text, or AttentionInputError saying what to fix.

    Accepts the layout `matrix_to_csv` writes, and also bare numbers without header or labels.
    """
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows:
        raise AttentionInputError(f"The CSV file for {name} is empty.")
    first = rows[0]
    # A header names columns: none of its cells after the first is a number ("token,d1,d2").
    if not any(_is_number(cell) for cell in first[1:]) and (
        len(first) > 1 or not _is_number(first[0])
    ):
        header, rows = rows[0], rows[1:]
        if not rows:
            raise AttentionInputError(f"The CSV file for {name} has a header but no rows.")
    else:
        header = None
    # Labels are a first column of words, or a first column headed like our own exports.
    has_labels = any(not _is_number(row[0]) for row in rows) or (
        header is not None and header[0].strip().lower() in LABEL_HEADERS
    )
    labels = tuple(row[0].strip() for row in rows) if has_labels else None
    cells = [row[1:] if has_labels else row for row in rows]
    if len(cells) > max_rows or any(len(row) > max_cols for row in cells):
        raise AttentionInputError(
            f"{name} has {len(cells)} rows and up to {max(len(r) for r in cells)} columns; this "
            f"page takes at most {max_rows} rows and {max_cols} columns."
        )
    widths = {len(row) for row in cells}
    if len(widths) != 1 or 0 in widths:
        raise AttentionInputError(
            f"The rows of {name} have different numbers of cells ({sorted(widths)}): every row "
            "needs one number per column."
        )
    values = np.empty((len(cells), widths.pop()))
    for i, row in enumerate(cells):
        for j, cell in enumerate(row):
            text_cell = cell.strip().replace("−", "-")
            try:
                values[i, j] = float(text_cell)
            except ValueError:
                where = f"row {i + 1}" + (f" (“{labels[i]}”)" if labels else "")
                shown = text_cell[:20] or "an empty cell"
                raise AttentionInputError(
                    f"{name} holds “{shown}” at {where}, column {j + 1}: type a number there."
                ) from None
    bad = np.isnan(values) | (np.isposinf(values) if allow_neg_inf else np.isinf(values))
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise AttentionInputError(
            f"{name} holds {values[i, j]} at row {i + 1}, column {j + 1}: every entry must be a "
            "finite number."
        )
    return values, labels


def matrix_to_npy(values: np.ndarray) -> bytes:
    """The matrix as a NumPy `.npy` file (float64), for `np.load`."""
    out = io.BytesIO()
    np.save(out, np.asarray(values, dtype=np.float64), allow_pickle=False)
    return out.getvalue()


def npy_to_matrix(data: bytes) -> np.ndarray:
    """Read back what `matrix_to_npy` wrote (never unpickles)."""
    return np.load(io.BytesIO(data), allow_pickle=False)


def _latex_number(x: float, decimals: int) -> str:
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def matrix_to_latex(values: np.ndarray, *, decimals: int = 4) -> str:
    """A LaTeX `bmatrix` for slides; −∞ becomes `-\\infty`, trailing zeros are dropped."""
    matrix = np.asarray(values, dtype=np.float64)
    body = " \\\\\n".join(" & ".join(_latex_number(x, decimals) for x in row) for row in matrix)
    return "\\begin{bmatrix}\n" + body + "\n\\end{bmatrix}"


# -- the whole example ---------------------------------------------------------------------------


def _nested(values: np.ndarray) -> list:
    """Nested lists for JSON; −∞ (JSON has no infinity) becomes null."""
    matrix = np.asarray(values, dtype=np.float64)
    return [[None if math.isinf(x) else float(x) for x in row] for row in matrix]


def example_to_json(
    example: Example,
    *,
    settings: Mapping[str, Any] | None = None,
    steps: AttentionSteps | None = None,
) -> str:
    """The example (Q, K, V, tokens), the settings it was shown with and, for reference, every
    step. `json_to_example` reads it back; masked scores (−∞) are written as null.
    """
    document: dict[str, Any] = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "title": example.title,
        "query_tokens": list(example.query_labels),
        "key_tokens": list(example.key_labels),
        "Q": _nested(example.q),
        "K": _nested(example.k),
        "V": _nested(example.v),
        "settings": dict(settings or {}),
    }
    if steps is not None:
        document["steps"] = {name: _nested(getattr(steps, name)) for name in STEP_NAMES}
        document["steps"]["scale"] = float(steps.scale)
        document["steps"]["note"] = "masked scores (−∞) are null; weights rows sum to 1"
    return json.dumps(document, indent=1, ensure_ascii=False)


@dataclass(frozen=True)
class UploadedExample:
    """What an upload held: the example, and the settings saved with it (may be empty)."""

    example: Example
    settings: dict[str, Any]


def _matrix_field(document: Mapping[str, Any], name: str) -> np.ndarray:
    raw = document.get(name)
    if not isinstance(raw, list) or not raw or not all(isinstance(row, list) for row in raw):
        raise AttentionInputError(
            f'The JSON file has no {name} matrix: it needs "{name}": [[...], [...]] (a list of '
            "rows, each a list of numbers)."
        )
    if len(raw) > MAX_EXAMPLE_TOKENS or any(len(row) > MAX_EXAMPLE_WIDTH for row in raw):
        raise AttentionInputError(
            f"{name} in the JSON file is larger than {MAX_EXAMPLE_TOKENS}×{MAX_EXAMPLE_WIDTH}, the "
            "most this page shows."
        )
    if len({len(row) for row in raw}) != 1 or not raw[0]:
        raise AttentionInputError(f"The rows of {name} in the JSON file have different lengths.")
    for i, row in enumerate(raw):
        for j, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
                raise AttentionInputError(
                    f"{name} in the JSON file holds {x!r} at row {i + 1}, column {j + 1}: every "
                    "entry must be a finite number."
                )
    return np.array(raw, dtype=np.float64)


def _tokens(document: Mapping[str, Any], field: str, count: int, prefix: str) -> tuple[str, ...]:
    raw = document.get(field)
    if raw is None:
        return tuple(f"{prefix}{i + 1}" for i in range(count))
    if not isinstance(raw, list) or len(raw) != count:
        raise AttentionInputError(
            f'"{field}" in the JSON file must list one token per row ({count}).'
        )
    return tuple(str(token)[:40] for token in raw)


def json_to_example(text: str | bytes) -> UploadedExample:
    """Read an `example_to_json` file (steps, if present, are ignored: they are recomputed)."""
    if len(text) > MAX_UPLOAD_BYTES:
        raise AttentionInputError(
            f"The file is {len(text):,} bytes; an example file is at most {MAX_UPLOAD_BYTES:,}."
        )
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise AttentionInputError(
            f"The file is not valid JSON ({error}). Upload a file saved with “Download the "
            "example (JSON)”, or a CSV file."
        ) from None
    if not isinstance(document, dict):
        raise AttentionInputError("The JSON file must hold an object with Q, K and V.")
    if document.get("format", JSON_FORMAT) != JSON_FORMAT:
        raise AttentionInputError(
            f"The JSON file's format is {document.get('format')!r}, not {JSON_FORMAT!r}."
        )
    q, k, v = (_matrix_field(document, name) for name in ("Q", "K", "V"))
    example = Example(
        q=q,
        k=k,
        v=v,
        query_labels=_tokens(document, "query_tokens", q.shape[0], "q"),
        key_labels=_tokens(document, "key_tokens", k.shape[0], "k"),
        title=str(document.get("title", "uploaded"))[:80],
    )
    settings = document.get("settings") or {}
    if not isinstance(settings, dict):
        raise AttentionInputError('"settings" in the JSON file must be an object.')
    return UploadedExample(example, settings)


def matrix_role(filename: str) -> str | None:
    """Which matrix a CSV file holds, from its name: q.csv, sdpa-Q.csv, my_k.csv -> "Q"/"K"."""
    stem = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0].strip()
    for separator in ("-", "_", " ", "."):
        stem = stem.rsplit(separator, 1)[-1]
    return stem.upper() if stem.upper() in ("Q", "K", "V") else None


def combine_upload(files: Sequence[tuple[str, bytes]], current: Example) -> UploadedExample:
    """The example that uploaded files describe, or AttentionInputError saying what to fix.

    `files` are (file name, contents). One `.json` file (an `example_to_json` export) replaces
    the whole example; `.csv` files replace the matrix their name says (q.csv, sdpa-K.csv, ...)
    and the other matrices are kept from `current`. The result must still fit together (Q and K
    as wide, K and V as tall).
    """
    if not files:
        raise AttentionInputError("No file was uploaded.")
    for name, data in files:
        if len(data) > MAX_UPLOAD_BYTES:
            raise AttentionInputError(
                f"{name} is {len(data):,} bytes; this page takes files up to {MAX_UPLOAD_BYTES:,}."
            )
    jsons = [(n, d) for n, d in files if n.lower().endswith(".json")]
    csvs = [(n, d) for n, d in files if n.lower().endswith(".csv")]
    others = [n for n, _ in files if not n.lower().endswith((".json", ".csv"))]
    if others:
        raise AttentionInputError(f"{others[0]} is neither a .csv nor a .json file.")
    if jsons:
        if len(files) > 1:
            raise AttentionInputError(
                "Upload either one JSON example or CSV files for Q, K and V, not both."
            )
        return json_to_example(jsons[0][1])
    matrices: dict[str, tuple[np.ndarray, tuple[str, ...] | None]] = {}
    for name, data in csvs:
        role = matrix_role(name)
        if role is None:
            raise AttentionInputError(
                f"Is {name} Q, K or V? Name the file q.csv, k.csv or v.csv (the page's own "
                "downloads, like sdpa-Q.csv, work as they are)."
            )
        if role in matrices:
            raise AttentionInputError(f"Two files hold {role}: upload one per matrix.")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise AttentionInputError(
                f"{name} is not UTF-8 text: save it as CSV (UTF-8)."
            ) from None
        matrices[role] = csv_to_matrix(text, name=role)
    q, q_labels = matrices.get("Q", (current.q, current.query_labels))
    k, k_labels = matrices.get("K", (current.k, current.key_labels))
    v, _ = matrices.get("V", (current.v, None))
    if k_labels is None and "V" in matrices and matrices["V"][1] is not None:
        k_labels = matrices["V"][1]
    if q_labels is None or len(q_labels) != q.shape[0]:
        q_labels = tuple(f"q{i + 1}" for i in range(q.shape[0]))
    if k_labels is None or len(k_labels) != k.shape[0]:
        k_labels = tuple(f"k{j + 1}" for j in range(k.shape[0]))
    kept = [role for role in ("Q", "K", "V") if role not in matrices]
    try:
        example = Example(q=q, k=k, v=v, query_labels=q_labels, key_labels=k_labels,
                          title="uploaded")  # fmt: skip
    except AttentionInputError as error:
        hint = f" ({', '.join(kept)} kept from the page; upload them too.)" if kept else ""
        raise AttentionInputError(f"{error}{hint}") from None
    return UploadedExample(example, {})


def clean_settings(
    raw: Mapping[str, Any],
    *,
    choices: Mapping[str, Sequence[str]] | None = None,
    flags: Sequence[str] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The settings from an uploaded file that are valid here, and a message per refused one.

    `choices` name settings that must be one of some strings, `flags` booleans, `ranges`
    numbers within [lo, hi]. Unknown names are ignored silently (they may be informative,
    like the scale).
    """
    choices, ranges = choices or {}, ranges or {}
    kept: dict[str, Any] = {}
    refused: list[str] = []
    for name, value in raw.items():
        if name in choices:
            if isinstance(value, str) and value in choices[name]:
                kept[name] = value
            else:
                refused.append(f"{name}={value!r} is not one of {', '.join(choices[name])}")
        elif name in flags:
            if isinstance(value, bool):
                kept[name] = value
            else:
                refused.append(f"{name}={value!r} is not true or false")
        elif name in ranges:
            lo, hi = ranges[name]
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if ok and math.isfinite(value) and lo <= value <= hi:
                kept[name] = float(value)
            else:
                refused.append(f"{name}={value!r} is not a number between {lo:g} and {hi:g}")
    return kept, refused


FORMATS = {"CSV": ".csv", "NumPy": ".npy", "LaTeX": ".tex"}


def matrix_file(
    values: np.ndarray,
    fmt: str,
    *,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    row_title: str = "token",
    decimals: int = 4,
) -> bytes:
    """The bytes of one matrix in `fmt` ("CSV", "NumPy" or "LaTeX")."""
    if fmt == "CSV":
        return matrix_to_csv(
            values, row_labels=row_labels, col_labels=col_labels, row_title=row_title
        ).encode()
    if fmt == "NumPy":
        return matrix_to_npy(values)
    if fmt == "LaTeX":
        return matrix_to_latex(values, decimals=decimals).encode()
    raise ValueError(f"unknown format {fmt!r}: choose one of {list(FORMATS)}")
