"""What the tests and the benchmarks both drive the app with: one harness, imported by both.

    app_pages   the registered pages (from ui/pages.py) and opening a model page in AppTest
    stream      a websocket viewer that speaks Streamlit's protocol (`/_stcore/stream`,
                BackMsg / ForwardMsg), and an audience of them arriving together
    browser     a Streamlit server on a free port, Debian's Chromium under Playwright, and
                waiting for a page's script runs and charts
    references  what independent references (transformers) say about the real models' inputs

`bench/` and `tests/` import from here; nothing here imports either of them.
"""
