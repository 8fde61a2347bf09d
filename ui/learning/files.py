"""The trained model in and out of the page: the .npz TransformerLens loads, a file uploaded to
inspect or to train further, and a head sent to the step-by-step page's editors.

An upload is the reader's own: it stays in their session (not in the link, which cannot carry
a model), and the sizes of the model it holds replace the size controls'.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from attention_core import AttentionInputError
from attention_core.training.model_file import MAX_FILE_BYTES, ModelFile, from_npz, to_npz
from attention_core.training.run import TrainingSettings
from ui.models import head_link, toy
from ui.pages import PAGES
from ui.widgets.byte_cache import MB, bounded_by_bytes
from ui.widgets.state import PageState

UPLOAD_KEY = "learning.upload"
MODES = {"inspect": "Inspect it", "train": "Train it further"}
EDITOR_PAGE = next(page.path for page in PAGES if page.url_path == "scaled-dot-product")
WHY_PAGE = next(page.path for page in PAGES if page.url_path == "attends")


def uploaded_model(view: PageState) -> tuple[ModelFile | None, str]:
    """The "your own model" expander: the model a reader uploaded (None: none, or a file that
    is not one, said under the uploader) and what to do with it ("inspect" or "train")."""
    # Open while it holds a file: what the page says of that file is in it.
    holding = st.session_state.get(UPLOAD_KEY) is not None
    with st.expander(
        "Go on from a downloaded model", icon=":material/upload_file:", expanded=holding
    ):
        st.markdown(
            "Upload an `.npz` that this page's **Download the model** gave (or one saved the "
            "same way from TransformerLens): inspect its heads, or train it further with the "
            "settings above. Its own sizes replace the model's controls."
        )
        upload = st.file_uploader(
            "A trained attention-only model (.npz)", type=["npz"], key=UPLOAD_KEY,
            max_upload_size=MAX_FILE_BYTES // MB,
        )  # fmt: skip
        mode = st.radio(
            "With it", list(MODES), format_func=MODES.get, horizontal=True,
            key=view.choice_key("upload_mode", "inspect", list(MODES)),
        )  # fmt: skip
        if upload is None:
            return None, mode
        try:
            model = from_npz(upload.getvalue())
        except AttentionInputError as error:
            st.error(f"“{upload.name}”: {error}", icon=":material/error:")
            return None, mode
        config = model.config
        st.success(
            f"“{upload.name}”: {config.n_layers} layer{'s' if config.n_layers > 1 else ''} of "
            f"{config.n_heads} heads, d_model {config.d_model}, vocabulary {config.d_vocab}, "
            f"context {config.n_ctx}"
            + (
                f", trained {model.about['steps']:,} steps."
                if isinstance(model.about.get("steps"), int)
                else "."
            ),
            icon=":material/check_circle:",
        )
        return model, mode


def with_model_sizes(settings: TrainingSettings, model: ModelFile) -> TrainingSettings:
    """The page's training settings on the uploaded model's sizes."""
    config = model.config
    return replace(
        settings, n_layers=config.n_layers, n_heads=config.n_heads, d_model=config.d_model,
        d_vocab=config.d_vocab, n_ctx=config.n_ctx,
    )  # fmt: skip


@bounded_by_bytes(8 * MB, name="learning.downloads", lane=None, max_entries=8)
def _file(key: str, step: int, _params: dict, settings: TrainingSettings) -> bytes:
    about = {"settings": vars(settings), "steps": step, "made_by": "Attention Explorer"}
    return to_npz(settings.config, _params, about)


def download(run: toy.TrainingRun) -> None:
    """The run's last good model as an .npz, with the recipe that loads it."""
    final = run.final
    data = _file(run.key, final.step, final.params, run.settings)
    st.download_button(
        "Download the model (.npz)",
        data,
        file_name=f"attention-only-{toy.run_code(run.settings)}-step{final.step}.npz",
        mime="application/octet-stream",
        icon=":material/download:",
        key="learning.download",
        help="TransformerLens's state-dict names and shapes, with its config as JSON.",
    )
    st.code(
        "import io, json, numpy as np, torch\n"
        "from transformer_lens import HookedTransformer, HookedTransformerConfig\n"
        f'file = np.load("attention-only-{toy.run_code(run.settings)}-step{final.step}.npz")\n'
        'config = HookedTransformerConfig(**json.loads(str(file["config.json"])))\n'
        "model = HookedTransformer(config)\n"
        "model.load_state_dict({k: torch.from_numpy(file[k]) for k in file.files\n"
        '                       if not k.endswith(".json")})',
        language="python",
        wrap_lines=True,  # a phone's screen holds it without a sideways scroll
    )


def editor_link(run: toy.TrainingRun, layer: int, head: int, *, uploaded: bool) -> None:
    """The step-by-step page's link that opens head (layer, head) of this run in its editors."""
    if uploaded:
        st.caption(
            "A link carries a run's settings, not a file's weights: an uploaded model's heads "
            "cannot be sent to the step-by-step page."
        )
        return
    st.page_link(
        EDITOR_PAGE,
        label=f"Open head {layer}.{head} in the step-by-step editor",
        icon=":material/edit_note:",
        query_params=head_link.learning_params(toy.run_code(run.settings), layer, head),
        help="Its q, k and v on the held-out example go into the editable tables: change one "
        "number of the trained head and see what moves.",
    )
    st.page_link(
        WHY_PAGE,
        label=f"Why does head {layer}.{head} attend where it does?",
        icon=":material/manage_search:",
        query_params={
            "model": "learning",
            "run": toy.run_code(run.settings),
            "layer": str(layer + 1),
            "head": str(head + 1),
        },
        help="Its scores split by what wrote the stream it reads: the embeddings and each "
        "earlier head (that page counts layers and heads from 1).",
    )
