"""Watch attention learn: a small attention-only transformer trained here, on repeated random
segments, until an induction head forms."""

import streamlit as st

from attention_core import AttentionInputError
from ui.learning import after, data, files, inputs, live, questions
from ui.models import toy
from ui.widgets.layout import page_intro, what_to_try
from ui.widgets.state import PageState, write_url_after_fragment

view = PageState("learning")
page_intro(
    "Watch attention learn",
    "Every other page shows heads that arrive trained. Here a transformer of attention heads "
    "only starts from random weights and learns, step by step, on sequences where the only way "
    "to predict a token is to find its earlier copy, until one head attends to the token that "
    "followed that copy: an induction head. The gradient reaches its weights through the "
    "softmax, P times how much more each weight was wanted than the row's average:",
    r"\frac{\partial \ell}{\partial S_{ij}} = P_{ij}\Big(\frac{\partial \ell}{\partial P_{ij}}"
    r" - \sum_{j'} P_{ij'}\,\frac{\partial \ell}{\partial P_{ij'}}\Big),\qquad"
    r" P = \mathrm{softmax}\Big(\mathrm{causal}"
    r"\Big(\frac{QK^\top}{\sqrt{d_\mathrm{head}}}\Big)\Big)",
)
view.show_notices()
settings = inputs.settings_from_controls(view)
model_file, mode = files.uploaded_model(view)
if settings is None:
    st.info("Fix the settings marked above and the training starts.", icon=":material/info:")
    view.sync_url()
    st.stop()
if model_file is not None:
    settings = files.with_model_sizes(settings, model_file)
try:
    if model_file is not None and mode == "inspect":
        run = toy.inspected(model_file, settings)
    else:
        run = toy.training_run(settings, model_file if mode == "train" else None)
except AttentionInputError as error:
    st.error(str(error), icon=":material/error:")
    view.sync_url()
    st.stop()

# -- predict, then watch ---------------------------------------------------------------------

after.bind_link(view, settings)
curves = data.curves(run) if run.chunks else None
questions.ask_questions(view, settings.n_layers, curves, finished=run.finished)

st.header(":material/model_training: The run")
st.markdown(live.run_text(run, uploaded=model_file is not None))


every = live.poll_seconds(run.watchers)


@st.fragment(run_every=None if run.finished else every)
def growing(view: PageState, run: toy.TrainingRun) -> None:
    if not run.finished:
        # Run again every few seconds by Streamlit: read the run as it stands now.
        run = toy.training_run(run.settings, model_file if mode == "train" else None)
        # The whole page again: its questions and what a trained model can be asked once the
        # run has ended; a slower look once more viewers watch.
        if run.finished or live.poll_seconds(run.watchers) > every:
            st.rerun()
    live.progress(run)
    live.charts(run)
    write_url_after_fragment(view)


growing(view, run)
if not run.finished or curves is None:
    view.sync_url()
    st.stop()

# -- after training ---------------------------------------------------------------------------

st.header(":material/timeline: The induction stripe, step by step")
st.markdown(
    "Every head's weights on the held-out sequence at any kept step. Before the phase change a "
    "layer-1 head spreads its weight; after it, each query in the second copy looks at the key "
    "one place after its own token's first copy: a stripe just above the diagonal's echo."
)
after.stripe(view, run)

st.header(":material/school: How attention learns: one gradient step")
layer, head = after.head_choice(view, run, curves)
after.gradient_step(run, layer, head)

st.header(":material/hide_source: Remove a head")
st.markdown(
    "Each head's output set to zero in turn (its layer's bias stays), scored on the held-out "
    "sequences: the heads the loss on repeated tokens needs are the circuit."
)
after.ablation(view, run)

if settings.n_layers > 1:
    st.header(":material/account_tree: How the layers compose")
    st.markdown(
        "How much a later head reads what an earlier head writes (Elhage et al. 2021): "
        "‖W_OV W_QKᵀ‖ / (‖W_OV‖ ‖W_QK‖) for keys, the same with W_QK for queries and W_OV for "
        "values. An induction head reads a previous-token head through its keys."
    )
    after.composition(view, run)

st.header(f":material/hub: Head {layer}.{head}'s circuits")
st.markdown(
    "QK says what a query looks for (the weight before the softmax), OV what the head writes "
    "into the logits when it attends to a token, each read through the embeddings and the "
    "unembedding: over the vocabulary, or QK over the positions (a previous-token head is a "
    "line just below the diagonal there)."
)
after.circuits(view, run, curves, layer, head)

st.header(":material/compare: One layer against two")
if settings.n_layers == 1:
    st.markdown(
        "This model has one layer: the run above is the answer. Compare it with two layers:"
    )
other = 1 if settings.n_layers > 1 else 2
st.button(
    f"Train the same with {other} layer{'s' if other > 1 else ''}",
    icon=":material/swap_horiz:",
    key="learning.other_layers",
    on_click=view.set,
    args=("layers", other),
    help="The same settings and seed: only the number of layers changes (and the link with it).",
)

st.header(":material/download: Take it with you")
files.download(run)
files.editor_link(run, layer, head, uploaded=model_file is not None)

what_to_try(
    [
        "Set layers to 1: the loss on repeated tokens stays high and no head passes 0.4, "
        "whatever the steps.",
        "Change the seed: the phase change comes at another step, and other heads take the "
        "two roles.",
        "Halve the learning rate, or the batch: the phase change comes later. Raise it to 0.03: "
        "faster, or unstable.",
        "Remove the previous-token head in layer 0: the induction head loses what it reads, "
        "and the repeated tokens' loss jumps as if the head itself were gone.",
        "Open the induction head in the step-by-step editor and change one key: see the stripe "
        "move.",
    ]
)
view.sync_url()
