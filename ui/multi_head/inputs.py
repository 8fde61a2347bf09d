"""The multi-head page's controls: its tokens (a sentence or a count), the sizes, and the input
matrices X and X_kv, typed in when small enough, all kept in the page's link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention_core.reference import token_embeddings
from ui.multi_head.labels import shape_text
from ui.widgets import heatmaps, layout, render
from ui.widgets.editors import MatrixInput, matrix_editor
from ui.widgets.state import PageState

DEFAULT_SENTENCE = "the cat sat on the mat"
DEFAULT_KV_SENTENCE = "a dog slept there"
# 12 tokens keep every pattern readable as a small multiple; 64 features is a small real model.
MAX_TOKENS = 12
MAX_SEED = 9_999
D_MODELS = (4, 8, 12, 16, 24, 32, 48, 64)
# X can be typed in when it fits in a link (ui.widgets.state.MAX_URL_MATRIX_CELLS) and a screen.
MAX_EDITABLE_TOKENS = 8
MAX_EDITABLE_D_MODEL = 8
TOKEN_SOURCES = {"sentence": "from a sentence", "count": "a number of tokens"}
ATTENTION_KINDS = {"self": "self-attention", "cross": "cross-attention"}


def tokens_from_sentence(
    sentence: str, fallback: str = DEFAULT_SENTENCE
) -> tuple[list[str], str | None]:
    """The words of `sentence` and, if it had to be changed, a message saying how."""
    words = str(sentence).split()
    if not words:
        return fallback.split(), (
            f"The sentence is empty: type a few words separated by spaces. Showing “{fallback}” "
            "meanwhile."
        )
    if len(words) > MAX_TOKENS:
        return words[:MAX_TOKENS], (
            f"The sentence has {len(words)} words; this page shows at most {MAX_TOKENS}, so only "
            f"the first {MAX_TOKENS} are used."
        )
    return words, None


@dataclass(frozen=True)
class TokenInput:
    """The widgets of one token list: a sentence box, or a count slider of numbered tokens."""

    sentence_name: str
    sentence_label: str
    default_sentence: str
    count_name: str
    count_label: str
    default_count: int
    prefix: str


QUERY_TOKENS = TokenInput(
    "sentence", "Sentence (queries)", DEFAULT_SENTENCE, "n", "Number of tokens", 6, "t"
)
KV_TOKENS = TokenInput(
    "kv_sentence",
    "Second sentence (keys and values)",
    DEFAULT_KV_SENTENCE,
    "n_kv",
    "Number of key/value tokens",
    4,
    "s",
)


def token_input(view: PageState, source: str, spec: TokenInput) -> list[str]:
    """The tokens typed as a sentence or counted (`source`), any problem shown under the box."""
    if source == "sentence":
        sentence = st.text_input(
            spec.sentence_label,
            key=view.text_key(spec.sentence_name, spec.default_sentence, max_chars=200),
            max_chars=200,
        )
        tokens, problem = tokens_from_sentence(sentence, spec.default_sentence)
    else:
        count = st.slider(
            spec.count_label,
            1,
            MAX_TOKENS,
            key=view.int_key(spec.count_name, spec.default_count, lo=1, hi=MAX_TOKENS),
        )
        tokens, problem = numbered_tokens(count, spec.prefix), None
    if problem:
        st.error(problem, icon=":material/edit_off:")
    return tokens


def numbered_tokens(count: int, prefix: str) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(count)]


def labelled_radio(
    view: PageState, label: str, name: str, labels: dict[str, str], default: str
) -> str:
    """A horizontal radio over `labels` (value → what it shows), kept in the link as `name`."""
    return layout.labelled_radio(label, labels, view.choice_key(name, default, list(labels)))


def head_counts(d_model: int) -> list[int]:
    """The numbers of heads that split d_model evenly: its divisors."""
    return [h for h in range(1, d_model + 1) if d_model % h == 0]


def keep_heads_valid(view: PageState, name: str, options: Sequence[int]) -> None:
    """After d_model changes, move a head count that no longer divides it to the nearest one."""
    current = st.session_state.get(view.key(name))
    if current is not None and current not in options:
        view.set(name, min(options, key=lambda h: (abs(h - current), h)))


def head_count(view: PageState, name: str, d_model: int) -> int:
    """The number of heads, kept in the link as `name`, chosen among the divisors of d_model."""
    options = head_counts(d_model)
    keep_heads_valid(view, name, options)
    return st.select_slider(
        "Number of heads (divisors of d_model)",
        options,
        key=view.choice_key(name, 4, options),
    )


def editable(num_tokens: int, d_model: int) -> bool:
    return num_tokens <= MAX_EDITABLE_TOKENS and d_model <= MAX_EDITABLE_D_MODEL


def linked_matrix_editor(
    view: PageState,
    url_name: str,
    tokens: Sequence[str],
    d_model: int,
    seed: int,
    *,
    name: str,
) -> MatrixInput:
    """The input matrix: token_embeddings(tokens, d_model, seed), typed over when small enough
    to edit (`editable`).

    A hand-edited matrix goes into the link as `url_name`; a link's matrix is used while the
    tokens, d_model and seed are the ones it was made for (other values start from the
    embeddings again).
    """
    generated = token_embeddings(tokens, d_model, seed)  # (tokens, d_model)
    labels = tuple(tokens)
    if not editable(len(tokens), d_model):
        view.put_matrix(url_name, None)
        render.show(
            render.cached(
                heatmaps.heatmap,
                generated,
                row_labels=list(tokens),
                col_labels=[f"f{j + 1}" for j in range(d_model)],
                kind="values",
                title=f"{name} {shape_text(generated.shape)}",
                col_title="feature",
            ),
            filename=f"multi-head-{url_name}",
        )
        st.caption(
            f"{name} can be typed in for up to {MAX_EDITABLE_TOKENS} tokens and d_model up to "
            f"{MAX_EDITABLE_D_MODEL}."
        )
        return MatrixInput(generated, labels, None, stale=False)
    context = (labels, d_model, seed)
    link_key = f"{view.key(url_name)}.link"
    if link_key not in st.session_state:
        linked = view.matrix_from_url(
            url_name, max_rows=MAX_EDITABLE_TOKENS, max_cols=MAX_EDITABLE_D_MODEL
        )
        if linked is not None and linked.shape != generated.shape:
            view.notices.append(
                f"The link's `{url_name}` has shape {shape_text(linked.shape)} but {name} here is "
                f"{shape_text(generated.shape)} (tokens, d_model): it was ignored."
            )
            linked = None
        st.session_state[link_key] = (context, linked)
    linked_context, linked = st.session_state[link_key]
    default = linked if linked is not None and linked_context == context else generated
    st.caption(
        f"{name} {shape_text(generated.shape)}: type over any number; the link keeps your "
        "values. Reset goes back to the example's."
    )
    typed = matrix_editor(
        view.key(url_name),
        default,
        labels=list(tokens),
        name=name,
        column_prefix="f",
        editable_labels=False,
    )
    values = typed.values
    view.put_matrix(url_name, None if np.array_equal(values, generated) else values)
    return typed
