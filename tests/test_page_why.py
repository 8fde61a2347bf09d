"""The "Why attention?" page in AppTest: its token slider, the counts and the diagram it drives,
its link, and its links to every other page.

Expected counts are written here from their definitions: n tokens take n − 1 hops along an RNN's
chain, one step between any pair with attention, and n × n query·key scores.
"""

import json

import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT, registered_pages
from tests.app_fragments import run_fragment

PAGES = registered_pages()
SENTENCE = "The cat sat on the mat because it was warm".split()
RNN_STEPS = "RNN: sequential steps, first → last token"
PAIR_STEPS = "Attention: steps between any pair"
SCORES = "Attention: query·key scores computed"


def open_page(**params: str) -> AppTest:
    """The app as a link opens it: the why page is the one it opens on."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def diagram(at: AppTest) -> list[dict]:
    """The traces of the RNN-against-attention diagram."""
    return json.loads(at.main.get("plotly_chart")[0].proto.spec)["data"]


def test_home_slider_changes_the_counts():
    at = open_page()
    assert metrics(at)[RNN_STEPS] == "5"
    assert metrics(at)[SCORES] == "36"
    at.slider(key="why.n").set_value(9).run()
    assert metrics(at)[RNN_STEPS] == "8"
    assert metrics(at)[SCORES] == "81"
    assert at.query_params["n"] == "9"


@pytest.mark.parametrize("n", [2, 4, 7, 10])
def test_each_length_shows_its_three_counts_and_a_diagram_of_n_tokens(n):
    at = open_page()
    at.slider(key="why.n").set_value(n).run()
    assert not at.exception, [e.value for e in at.exception]
    assert metrics(at) == {RNN_STEPS: str(n - 1), PAIR_STEPS: "1", SCORES: str(n * n)}
    traces = diagram(at)
    # Two rows of the same n tokens (the RNN's and attention's), and one arc per pair.
    rows = [trace for trace in traces if trace["mode"] == "markers+text"]
    assert [row["text"] for row in rows] == [SENTENCE[:n], SENTENCE[:n]]
    assert all(len(row["x"]) == n for row in rows)
    assert sum(trace["mode"] == "lines" for trace in traces) == n * (n - 1) // 2


def test_home_reads_its_state_from_the_link_and_refuses_bad_values():
    at = open_page(n="4")
    assert at.slider(key="why.n").value == 4

    at = open_page(n="1000000000")
    assert at.slider(key="why.n").value == 6
    assert any("n=1000000000" in w.value for w in at.warning)
    assert not at.exception


def test_the_home_slider_reruns_only_its_fragment_and_keeps_the_link():
    at = open_page()
    at.slider(key="why.n").set_value(3)
    run_fragment(at, "why.chain_or_pairs")
    assert not at.exception, [e.value for e in at.exception]
    # 3 tokens: 2 hops along the chain, 3 × 3 query·key scores.
    assert metrics(at)[RNN_STEPS] == "2"
    assert metrics(at)[SCORES] == "9"
    assert at.query_params["n"] == "3"
    # Only the fragment ran: the page's intro and its links were not drawn again.
    assert not at.latex and not at.get("page_link")
    arcs = diagram(at)
    assert sum(trace["mode"] == "lines" for trace in arcs) == 3  # pairs of 3 tokens


def test_home_links_to_every_other_page_from_the_one_list():
    at = open_page()
    links = {link.proto.page: link for link in at.get("page_link")}
    others = [page for page in PAGES if not page.default]
    assert len(links) == len(others)
    for page in others:  # each link leads to the page's url_path, which the router registered
        link = links[page.url_path]
        assert link.value == (page.label or page.title) and link.proto.help == page.help
