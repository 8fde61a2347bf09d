"""The cost page in AppTest: measured values, the online softmax, the KV cache, deep links.

Sizes are the smallest the page offers; timings are never asserted, only values derived from
them (FLOPs, GFLOP/s = FLOPs / time, speed-ups) and memory bounds that must hold on any machine.
"""

import json
import math
import sys

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT
from tests.fragment_reruns import change_in_fragment, torch_after_a_plain_visit
from tests.plotly_json import plotly_array
from ui.cost import measurements

PAGE = "pages/attention_cost.py"
MB = 1e6


def open_page(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def decode(array) -> np.ndarray:
    """A plotly array as floats (None, a gap in a line, becomes NaN)."""
    return plotly_array(array).astype(float)


def figure(at: AppTest, title_start: str) -> dict:
    for chart in at.main.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"].get("title", {}).get("text", "").startswith(title_start):
            return spec
    raise AssertionError(f"no figure titled {title_start!r}")


def table_with(at: AppTest, column: str):
    for frame in at.dataframe:
        if column in frame.value.columns:
            return frame.value
    raise AssertionError(f"no table with a {column!r} column")


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def demo_inputs(n_keys: int, seed: int):
    """The page's example: standard normal (3, n, 2) from the seed; the query is Q's row 0."""
    q, k, v = np.random.default_rng(seed).standard_normal((3, n_keys, 2))
    return q[0], k, v


def test_a_plain_visit_does_not_import_torch():
    assert torch_after_a_plain_visit(PAGE) is False


def test_default_view_shows_backends_and_waits_for_a_click():
    at = open_page()
    badges = next(m.value for m in at.markdown if m.value.startswith("**Backends"))
    assert "NumPy" in badges and "torch" not in badges
    assert at.multiselect(key="cost.backends").value == ["numpy"]
    at.toggle(key="cost.torch").set_value(True).run()
    assert at.query_params["torch"] == "1"
    badges = " ".join(m.value for m in at.markdown)
    assert "NumPy" in badges and "torch CPU: torch" in badges
    import torch

    if not torch.cuda.is_available():
        assert "torch CUDA: no CUDA" in badges
    assert at.multiselect(key="cost.backends").value == ["numpy", "torch-cpu"]
    assert any("Press **Measure**" in i.value for i in at.info)
    assert not any("GFLOP/s" in frame.value.columns for frame in at.dataframe)
    assert not at.error


def test_online_softmax_table_and_figure_match_a_hand_computation():
    at = open_page(keys="7", block="3", seed="5")
    q, k, v = demo_inputs(7, 5)
    s = k @ q / math.sqrt(2)  # the query's scaled scores against the 7 keys
    table = table_with(at, "running max m")
    assert list(table["keys"]) == ["k1–k3", "k4–k6", "k7"]
    for t, stop in enumerate((3, 6, 7)):
        m = s[:stop].max()
        assert table["running max m"][t] == pytest.approx(m, abs=1e-12)
        assert table["block max"][t] == pytest.approx(s[stop - 3 if stop < 7 else 6 : stop].max())
        assert table["running sum l"][t] == pytest.approx(np.exp(s[:stop] - m).sum(), rel=1e-12)
    # The rescale of block 2 re-bases block 1's sum: exp(m_1 - m_2).
    assert table["rescale exp(m_old − m)"][1] == pytest.approx(
        math.exp(s[:3].max() - s[:6].max()), rel=1e-12
    )
    weights = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    output = weights @ v
    outputs = table_with(at, "output").set_index("output")
    np.testing.assert_allclose(outputs.loc["chunked, o_T / l_T"], output, rtol=1e-12)
    np.testing.assert_allclose(outputs.loc["full softmax"], output, rtol=1e-12)
    assert float(metrics(at)["Largest difference"]) < 1e-12

    z = decode(figure(at, "The weights the running state implies")["data"][0]["z"])
    assert z.shape == (4, 7)  # 3 blocks + the full softmax row
    np.testing.assert_allclose(
        z[0, :3], np.exp(s[:3] - s[:3].max()) / np.exp(s[:3] - s[:3].max()).sum()
    )
    assert np.isnan(z[0, 3:]).all() and np.isnan(z[1, 6:]).all()
    np.testing.assert_allclose(z[2], weights, rtol=1e-12)
    np.testing.assert_allclose(z[3], weights, rtol=1e-12)


def test_block_slider_changes_the_blocks_and_the_link():
    at = open_page()
    at.slider(key="cost.block").set_value(1).run()
    assert len(table_with(at, "running max m")) == 8  # 8 keys, one block each
    assert at.query_params["block"] == "1"
    at.slider(key="cost.keys").set_value(4).run()
    assert len(table_with(at, "running max m")) == 4
    assert at.query_params["keys"] == "4"


def test_measure_fills_the_table_with_consistent_values_and_plain_reruns_do_not_remeasure():
    at = open_page(n_max="256", d="16", torch="1")
    at.button(key="cost.measure").click().run()
    assert not at.exception and not at.error
    table = table_with(at, "GFLOP/s")
    assert sorted(zip(table["backend"], table["n"], strict=True)) == [
        ("NumPy", 128),
        ("NumPy", 256),
        ("torch CPU", 128),
        ("torch CPU", 256),
    ]
    n = table["n"].to_numpy()
    np.testing.assert_array_equal(table["FLOPs"], 4 * n * n * 16)  # 2n²d for QKᵀ + 2n²d for PV
    np.testing.assert_allclose(table["n×n matrix (MB)"], n * n * 4 / MB)
    np.testing.assert_allclose(
        table["GFLOP/s"], table["FLOPs"] / (table["median time (ms)"] / 1e3) / 1e9, rtol=1e-9
    )
    # Full attention stores the n×n float32 scores, so its peak is at least that.
    assert (table["peak memory (MB)"] >= table["n×n matrix (MB)"]).all()
    for size in (128, 256):
        rows = table[table["n"] == size].set_index("backend")
        assert rows.loc["NumPy", "speed-up vs NumPy (×)"] == 1.0
        assert rows.loc["torch CPU", "speed-up vs NumPy (×)"] == pytest.approx(
            rows.loc["NumPy", "median time (ms)"] / rows.loc["torch CPU", "median time (ms)"]
        )
    spec = figure(at, "Time against n")
    traces = {trace["name"]: decode(trace["y"]) for trace in spec["data"]}
    assert set(traces) == {"NumPy", "torch CPU", "n² reference"}
    slowest = table[table["n"] == 256]["median time (ms)"].max()
    np.testing.assert_allclose(traces["n² reference"], [slowest / 4, slowest], rtol=1e-9)
    assert spec["layout"]["xaxis"]["type"] == "log" and spec["layout"]["yaxis"]["type"] == "log"

    # A plain rerun (another control) shows the same numbers: nothing was measured again.
    before = table.copy()
    at.slider(key="cost.keys").set_value(5).run()
    after = table_with(at, "GFLOP/s")
    np.testing.assert_array_equal(after["median time (ms)"], before["median time (ms)"])
    # A second click is served from the cache (per backend and size): identical timings.
    at.button(key="cost.measure").click().run()
    np.testing.assert_array_equal(
        table_with(at, "GFLOP/s")["median time (ms)"], before["median time (ms)"]
    )
    # A longer range keeps the measured sizes and says the new ones wait for a click.
    at.select_slider(key="cost.n_max").set_value(512).run()
    assert len(table_with(at, "GFLOP/s")) == 4
    assert any("2 of the 6 runs" in c.value for c in at.caption)
    at.button(key="cost.forget").click().run()
    assert any("Press **Measure**" in i.value for i in at.info)


def test_peak_memory_full_versus_chunked_on_numpy_and_torch():
    # n = 1024 and d = 64: the n×n matrix (4.2 MB) dwarfs the n×d accumulators (0.26 MB each).
    at = open_page(n="1024", chunk="32", torch="1")
    at.button(key="cost.measure_memory").click().run()
    assert not at.exception and not at.error
    shown = metrics(at)
    full = float(shown["full (n×n matrix)"].removesuffix(" MB").replace(",", ""))
    chunked = float(shown["chunked (online softmax)"].removesuffix(" MB").replace(",", ""))
    matrix = 1024 * 1024 * 4 / MB
    assert full >= matrix
    assert chunked < matrix / 2
    at.selectbox(key="cost.backend").set_value("torch-cpu").run()
    assert at.query_params["backend"] == "torch-cpu"
    at.button(key="cost.measure_memory").click().run()
    shown = metrics(at)
    assert float(shown["full (n×n matrix)"].removesuffix(" MB")) >= matrix
    assert float(shown["chunked (online softmax)"].removesuffix(" MB")) < matrix / 2
    assert float(shown["torch fused SDPA kernel"].removesuffix(" MB")) < matrix / 2


def test_kv_cache_section_counts_and_matches_full_causal_attention():
    at = open_page()
    at.slider(key="cost.decode").set_value(5).run()
    shown = metrics(at)
    assert shown["q·k products with the cache"] == str(1 + 2 + 3 + 4 + 5)
    assert shown["without it (whole prefix every step)"] == str(1 + 4 + 9 + 16 + 25)
    assert float(shown["Largest difference from full causal attention"]) < 1e-12
    z = decode(figure(at, "Weights built one decoding step")["data"][0]["z"])
    q, k, _ = np.random.default_rng(0).standard_normal((3, 5, 4))
    s = q @ k.T / 2  # √4 = 2
    for t in range(5):
        row = np.exp(s[t, : t + 1] - s[t, : t + 1].max())
        np.testing.assert_allclose(z[t, : t + 1], row / row.sum(), rtol=1e-5)
        assert np.isnan(z[t, t + 1 :]).all()  # not in the cache yet: drawn as blocked
    assert at.query_params["decode"] == "5"


def test_deep_link_restores_every_control():
    at = open_page(
        backends="numpy",
        n_max="512",
        d="32",
        keys="5",
        block="2",
        seed="3",
        backend="torch-cpu",
        torch="1",
        n="1024",
        chunk="64",
        decode="4",
    )
    assert at.multiselect(key="cost.backends").value == ["numpy"]
    assert at.select_slider(key="cost.n_max").value == 512
    assert at.selectbox(key="cost.d").value == 32
    assert at.slider(key="cost.keys").value == 5
    assert at.slider(key="cost.block").value == 2
    assert at.number_input(key="cost.seed").value == 3
    assert at.selectbox(key="cost.backend").value == "torch-cpu"
    assert at.select_slider(key="cost.n").value == 1024
    assert at.select_slider(key="cost.chunk").value == 64
    assert at.slider(key="cost.decode").value == 4
    assert not at.warning
    # The restored seed and sizes drive the numbers.
    q, k, _ = demo_inputs(5, 3)
    s = k @ q / math.sqrt(2)
    assert table_with(at, "running max m")["running max m"].iloc[-1] == pytest.approx(s.max())
    assert any("3 runs" in i.value for i in at.info)  # 128, 256, 512 on NumPy only
    at.selectbox(key="cost.d").set_value(64).run()
    assert "d" not in at.query_params  # back to the default: not in the link
    assert at.query_params["backends"] == "numpy"


def test_crafted_links_get_notices_and_defaults_and_never_allocate():
    at = open_page(
        n="1000000000", n_max="1000000000", d="abc", keys="99", backends="gpu9", torch="1"
    )
    warnings = " ".join(w.value for w in at.warning)
    for part in ("n=1000000000", "n_max=1000000000", "d=abc", "keys=99", "gpu9"):
        assert part in warnings, part
    assert at.select_slider(key="cost.n").value == 2048
    assert at.select_slider(key="cost.n_max").value == 1024
    assert at.selectbox(key="cost.d").value == 64
    assert at.slider(key="cost.keys").value == 8
    assert at.multiselect(key="cost.backends").value == ["numpy", "torch-cpu"]
    assert not at.error
    # Nothing is measured from a link: only a click measures, and only the offered sizes.
    assert any("Press **Measure**" in i.value for i in at.info)


def test_without_torch_the_page_says_why_and_measures_numpy(monkeypatch):
    # None in sys.modules makes `import torch` fail exactly as on a machine without torch.
    monkeypatch.setitem(sys.modules, "torch", None)
    measurements.torch_backend_statuses.clear()  # the process-wide probe, made afresh
    at = open_page(n_max="256", torch="1")
    measurements.torch_backend_statuses.clear()
    badges = " ".join(m.value for m in at.markdown)
    assert "torch CPU: torch is not installed (pip install torch)" in badges
    assert at.multiselect(key="cost.backends").options == ["NumPy"]
    assert at.multiselect(key="cost.backends").value == ["numpy"]
    at.button(key="cost.measure").click().run()
    assert not at.exception and not at.error
    assert list(table_with(at, "GFLOP/s")["backend"]) == ["NumPy", "NumPy"]


def test_the_kv_cache_slider_reruns_only_its_fragment_and_the_link_follows():
    full, moved, fragment_id = change_in_fragment(
        "cost", "", "Tokens generated", ("double_array_value", [5.0])
    )
    assert fragment_id
    assert moved.elements < full.elements / 4
    assert moved.query_string == "decode=5"
    # Step t reads t cached keys: 1 + 2 + … + 5; without the cache, t² scores per step.
    assert "q·k products with the cache: 15" in moved.texts
    assert "without it (whole prefix every step): 55" in moved.texts


def test_a_new_seed_redraws_the_kv_cache_section_below_its_fragment():
    # The seed sits in the online-softmax fragment but also draws the KV-cache example.
    at = open_page()
    at.number_input(key="cost.seed").set_value(7).run()
    assert at.query_params["seed"] == "7"
    z = decode(figure(at, "Weights built one decoding step")["data"][0]["z"])
    q, k, _ = np.random.default_rng(7).standard_normal((3, 6, 4))
    s = q[2] @ k[:3].T / 2
    np.testing.assert_allclose(z[2, :3], np.exp(s - s.max()) / np.exp(s - s.max()).sum(), rtol=1e-5)
    # On a server the seed's fragment reruns the whole page, so the KV-cache section follows.
    full, moved, fragment_id = change_in_fragment("cost", "", "Seed", ("double_value", 7.0))
    assert fragment_id
    assert moved.elements > full.elements / 2  # not only its fragment: the whole page again
    assert moved.query_string == "seed=7"
