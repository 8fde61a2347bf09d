"""Attention Explorer: the router. Every page lives in pages/; see README.md to add one."""

import streamlit as st

from ui import warmup
from ui.layout import app_frame, initial_sidebar_state

st.set_page_config(
    page_title="Attention Explorer",
    page_icon=":material/center_focus_strong:",
    layout="wide",
    initial_sidebar_state=initial_sidebar_state(),
    menu_items={"About": "Attention Explorer: see every step of attention, from 3 tokens to BERT."},
)

# url_path never equals a file's stem: a deep link must reach this router, not a bare page file.
PAGES = {
    "Start": [
        st.Page(
            "pages/why_attention.py",
            title="Why attention?",
            icon=":material/lightbulb:",
            url_path="why",
            default=True,
        ),
    ],
    "The mechanism": [
        st.Page(
            "pages/sdpa_steps.py",
            title="Scaled dot-product attention",
            icon=":material/calculate:",
            url_path="scaled-dot-product",
        ),
        st.Page(
            "pages/masking_lab.py",
            title="Masking lab",
            icon=":material/visibility_off:",
            url_path="masking",
        ),
        st.Page(
            "pages/multi_head.py",
            title="Multi-head attention",
            icon=":material/view_column:",
            url_path="multi-head",
        ),
        st.Page(
            "pages/positional_encoding.py",
            title="Positional encoding",
            icon=":material/waves:",
            url_path="positional",
        ),
    ],
    "In practice": [
        st.Page(
            "pages/real_model.py",
            title="A real pretrained model",
            icon=":material/smart_toy:",
            url_path="pretrained",
        ),
        st.Page(
            "pages/decoder_llm.py",
            title="A decoder LLM",
            icon=":material/forum:",
            url_path="decoder",
        ),
        st.Page(
            "pages/attention_cost.py",
            title="The cost of attention",
            icon=":material/timer:",
            url_path="cost",
        ),
    ],
}

warmup.ready()
page = st.navigation(PAGES)
app_frame(page)
page.run()
