"""Rerun one `st.fragment` in AppTest, as the browser does when a widget inside it changes.

`AppTest.run()` always reruns the whole script; in the browser, a widget inside a fragment
reruns only that fragment, so the page's closing `sync_url()` does not run and whatever the
fragment needs must already be in it. `run_fragment(at, "why.chain_or_pairs")` sends the rerun
request the frontend sends (the fragment's id with the widget states) for the fragment
declared with `@st.fragment(key=...)`. Afterwards `at` holds only what the fragment drew.
"""

from __future__ import annotations

import functools
from unittest import mock

from streamlit.testing.v1 import AppTest, local_script_runner


def run_fragment(at: AppTest, key: str) -> AppTest:
    (fragment_id,) = at._fragment_storage.resolve_target(key)
    rerun = functools.partial(local_script_runner.RerunData, fragment_id=fragment_id)
    with mock.patch.object(local_script_runner, "RerunData", rerun):
        return at.run()
