"""The page's example run by torch.nn.MultiheadAttention, beside ours.

torch is imported only when a viewer asks for the comparison, once per process; a plain visit
never pays for it, and a server without torch says how to install it.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import numpy as np
import streamlit as st

from attention_core import causal_mask, init_multi_head_params, multi_head_attention
from attention_core.reference import (
    TORCH_INSTALL_COMMAND,
    TorchComparison,
    TorchNotInstalledError,
    compare_with_torch,
)
from ui.widgets.byte_cache import MB, SMALL_ENTRY_BYTES, bounded_by_bytes
from ui.widgets.state import PageState


def torch_installed() -> bool:
    """Whether torch can be imported, found out without importing it (190 MB and seconds)."""
    return importlib.util.find_spec("torch") is not None


# A module, no array: SMALL_ENTRY_BYTES.
@bounded_by_bytes(16 * SMALL_ENTRY_BYTES, name="multi_head.torch", lane=None,
                  spinner="Importing torch, once for the whole server…")  # fmt: skip
def load_torch() -> ModuleType:
    """torch, imported once per process while other sessions asking wait for it: no session can
    meet it half imported, and a plain visit to the page never pays for it."""
    try:
        import torch
    except ImportError:
        raise TorchNotInstalledError() from None
    return torch


# Two differences and two strings, no array, so SMALL_ENTRY_BYTES (1 KiB) each: 64 examples.
@bounded_by_bytes(MB // 16, name="multi_head.torch_parity", lane=None)
def torch_comparison(
    x_q: np.ndarray,
    x_kv: np.ndarray | None,
    d_model: int,
    num_heads: int,
    seed: int,
    causal: bool,
) -> TorchComparison:
    """The page's example run by torch.nn.MultiheadAttention and compared with ours (cached).

    Raises TorchNotInstalledError (not cached) when torch is missing.
    """
    load_torch()
    params = init_multi_head_params(d_model, num_heads, seed)
    k_len = (x_q if x_kv is None else x_kv).shape[0]
    mask = causal_mask(x_q.shape[0], k_len) if causal else None
    computed = multi_head_attention(x_q, x_kv, params=params, num_heads=num_heads, mask=mask)
    return compare_with_torch(computed, params, num_heads, mask)


@st.fragment
def panel(
    view: PageState,
    x_q: np.ndarray,
    x_kv: np.ndarray | None,
    sizes: tuple[int, int, int],
    causal: bool,
) -> None:
    """Our output and weights beside torch.nn.MultiheadAttention's, once the reader asks for it
    (`sizes` = d_model, heads, seed); how to install torch when it is missing."""
    if not torch_installed():
        _show_torch_missing(TorchNotInstalledError())
        return
    asked = st.toggle(
        "Compare with torch.nn.MultiheadAttention",
        key=view.key("torch"),
        help="Runs this example through torch. The server imports torch the first time anyone "
        "asks (a few seconds).",
    )
    if not asked:
        return
    try:
        comparison = torch_comparison(x_q, x_kv, *sizes, causal)
    except TorchNotInstalledError as error:
        _show_torch_missing(error)
        return
    st.markdown(
        "`torch.nn.MultiheadAttention(batch_first=True)` loaded with the same W_Q, W_K, W_V, "
        f"W_O and biases, run in {comparison.dtype} (torch {comparison.torch_version}), "
        "per-head weights with `average_attn_weights=False`:"
    )
    left, right = st.columns(2)
    left.metric("largest |ours − torch|, output", f"{comparison.output_difference:.1e}")
    right.metric("largest |ours − torch|, weights", f"{comparison.weights_difference:.1e}")
    st.caption("Differences near 1e-7 are float32 rounding: our NumPy code computes in float64.")


def _show_torch_missing(error: TorchNotInstalledError) -> None:
    st.info(str(error), icon=":material/download:")
    st.code(TORCH_INSTALL_COMMAND, language="bash")
