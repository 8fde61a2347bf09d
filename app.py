"""Attention Explorer: the router. Every page lives in pages/ and is listed in ui/pages.py."""

import streamlit as st

from server import warmup
from ui import pages
from ui.widgets.byte_cache import what_caches_hold
from ui.widgets.layout import app_frame, initial_sidebar_state

st.set_page_config(
    page_title="Attention Explorer",
    page_icon=":material/center_focus_strong:",
    layout="wide",
    initial_sidebar_state=initial_sidebar_state(),
    menu_items={"About": "Attention Explorer: see every step of attention, from 3 tokens to BERT."},
)

# The menu, by section, from the one list of pages (ui/pages.py).
PAGES = {
    section: [
        st.Page(p.path, title=p.title, icon=p.icon, url_path=p.url_path, default=p.default)
        for p in records
    ]
    for section, records in pages.sections().items()
}


def preload_model() -> None:
    """A talk's server loads the LLM at the first visit (ATTENTION_EXPLORER_LLM_PRELOAD=1)."""
    # Imported after the warm-up has imported the pages' packages, which import it.
    from ui.models import smollm

    smollm.preload()


warmup.ready(pages.page_modules, what_caches_hold, preload_model)
# Every page in the menu: past twelve, Streamlit would fold the last behind "View more".
page = st.navigation(PAGES, expanded=True)
app_frame(page)
page.run()
