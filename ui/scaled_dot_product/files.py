"""Q, K and V in and out of the scaled dot-product page: the uploader, one download per matrix,
and the whole example with its settings and steps as JSON (which the uploader reads back).
"""

from __future__ import annotations

from attention_core import AttentionSteps
from attention_core.lessons.presets import Example
from ui.scaled_dot_product.inputs import SCORING_TITLES, TAU_RANGE, Settings
from ui.widgets import exports
from ui.widgets.hand_made import HandMadeExample
from ui.widgets.state import PageState


def upload_or_download(hand: HandMadeExample, current: Example) -> None:
    """An upload replaces the example on screen (and its settings, from a JSON export); a
    download gives one of Q, K, V as CSV, NumPy or LaTeX, with the token names."""
    view = hand.view
    exports.upload_example(
        hand,
        key=view.key("upload"),
        label="Upload a JSON example saved from this page, or CSV files named q.csv, k.csv, "
        "v.csv (one or more; the others stay as they are)",
        choices={"scoring": list(SCORING_TITLES)},
        flags=("scaling", "causal"),
        ranges={"tau": TAU_RANGE},
    )
    rows = {"Q": (current.q, current.query_labels), "K": (current.k, current.key_labels),
            "V": (current.v, current.key_labels)}  # fmt: skip
    exports.download_chooser(
        {
            name: (matrix, labels, [f"d{c + 1}" for c in range(matrix.shape[1])], f"sdpa-{name}")
            for name, (matrix, labels) in rows.items()
        },
        key=view.key("download.qkv"),
        label="Download a matrix",
    )


def download_example(
    view: PageState, current: Example, settings: Settings, steps: AttentionSteps
) -> None:
    """The example on screen, its settings and every step, as one JSON file."""
    exports.download_example(
        current,
        settings=settings.exported(steps.scale),
        steps=steps,
        filename="sdpa-example",
        key=view.key("download.json"),
    )
