"""The masking lab's controls: the mask kinds, one control per parameter a kind takes, and the
position picker of the experiments.

The kinds, their labels and the parameters each takes come from `MASK_KINDS` (one entry per
kind). Each parameter of `lab_mask` has its control here, once, in `PARAMETER_CONTROLS`; it is
drawn when a chosen kind takes it. Their keys in the link: `kinds`, `pad` (1-based positions),
`window`, `prefix`, and `grid` (see grid.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from attention_core.lessons.mask_experiments import MASK_KINDS
from ui.masking import example, grid
from ui.widgets.state import PageState

# A parameter's control: (view, container, n tokens, chosen kinds, the parameters drawn before
# it) -> the value `lab_mask` takes for that parameter.
ParameterControl = Callable[[PageState, Any, int, Sequence[str], Mapping[str, object]], object]


def mask_kinds(view: PageState, container: Any) -> list[str]:
    """The multiselect of the mask kinds, in the table's order, "causal" by default."""
    names = list(MASK_KINDS)
    return container.multiselect(
        "Mask kinds (combined: a key must pass every one)",
        names,
        format_func=lambda name: MASK_KINDS[name].label,
        key=view.multi("kinds", ["causal"], names),
        placeholder="None: every query sees every key",
    )


def mask_name(kinds: Sequence[str]) -> str:
    """ "Causal + Padding": the chosen kinds' labels, or "no mask"."""
    return " + ".join(MASK_KINDS[kind].label for kind in kinds) or "no mask"


def padding_positions(
    view: PageState, container: Any, n: int, kinds: Sequence[str], given: Mapping[str, object]
) -> list[int]:
    """The padding positions, picked 1-based (`3 · sat`), returned 0-based as `lab_mask` takes
    them."""
    positions = list(range(1, n + 1))
    picked = container.multiselect(
        "Padding positions (hidden from every query)",
        positions,
        format_func=lambda p: f"{p} · {example.SENTENCE[p - 1]}",
        key=view.multi("pad", [p for p in (5, 6) if p <= n], positions),
    )
    return [p - 1 for p in picked]


def length_slider(label: str, link: str, lowest: int, default: int) -> ParameterControl:
    """The control of a length parameter: a slider from `lowest` to the number of tokens, kept
    in the link as `link`."""

    def control(view, container, n, kinds, given) -> int:
        return container.slider(label, lowest, n, key=view.int_key(link, default, lo=lowest, hi=n))

    return control


def custom_grid(
    view: PageState, container: Any, n: int, kinds: Sequence[str], given: Mapping[str, object]
) -> np.ndarray:
    """The custom grid, over the tokens as padded by `given`; it offers the other chosen kinds
    (with the parameters drawn before it) as one of its fills."""
    tokens = example.tokens(n, given.get("padding", ()))
    others = [kind for kind in kinds if kind != "custom"]
    with container.expander("Custom grid: tick the keys each query may attend to", expanded=True):
        return grid.custom_grid(view, tokens, others, **given)


PARAMETER_CONTROLS: Mapping[str, ParameterControl] = MappingProxyType(
    {
        "padding": padding_positions,
        "window": length_slider(
            "Window width w (each query sees itself and the w − 1 keys before it)", "window", 1, 2
        ),
        "prefix_len": length_slider(
            "Prefix length (seen by every token; causal after it)", "prefix", 0, 2
        ),
        "custom": custom_grid,
    }
)


def mask_parameters(
    view: PageState, container: Any, n: int, kinds: Sequence[str]
) -> dict[str, object]:
    """`lab_mask`'s keyword arguments for the chosen kinds, each parameter's control drawn once.

    In the table's order, so the custom grid comes after the others and can offer them as a fill.
    """
    given: dict[str, object] = {}
    for kind in MASK_KINDS.values():
        for name in kind.parameters:
            if kind.name in kinds and name not in given:
                given[name] = PARAMETER_CONTROLS[name](view, container, n, kinds, given)
    return given


def position_picker(container: Any, label: str, tokens: Sequence[str], key: str) -> int:
    """A selectbox of the 1-based positions of `tokens`, shown as `3 · sat`."""
    return container.selectbox(
        label,
        list(range(1, len(tokens) + 1)),
        format_func=lambda p: f"{p} · {tokens[p - 1]}",
        key=key,
    )
