"""The positional-encoding page, driven through AppTest; values checked against formulas here.

Every expected number is computed in this file from its definition (PE[p, 2i] =
sin(p / base^(2i/d)), PE[p, 2i+1] = cos(...), ALiBi slopes 2^(-8h/H), ...), not by the code the
page uses.
"""

import math

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness.app_pages import ROOT
from tests.fragment_reruns import change_in_fragment, torch_after_a_plain_visit
from tests.plotly_json import figures, plotly_array, title_text

APP = str(ROOT / "app.py")
PAGE = "pages/positional_encoding.py"


def reference_pe(n, d, base=10000.0):
    p = np.arange(n)[:, None]
    i = np.arange(d)[None, :] // 2
    angle = p / base ** (2 * i / d)
    return np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))


def open_page(params=None):
    """The page as a link opens it: the app starts, the link's parameters arrive, the page runs."""
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.query_params.clear()
    at.query_params.update(params or {})
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def title(fig):
    return fig["layout"].get("title", {}).get("text", "")


def figure(at, title_start, *, exact=False):
    found = [
        f
        for f in figures(at)
        if title(f) == title_start or (not exact and title(f).startswith(title_start))
    ]
    assert found, [title(f) for f in figures(at)]
    return found[0]


def metric(at, label_start):
    found = [m for m in at.metric if m.label.startswith(label_start)]
    assert len(found) == 1, [m.label for m in at.metric]
    return float(found[0].value)


def dataframe(at, column):
    return next(df.value for df in at.dataframe if column in df.value.columns)


def test_heatmap_lines_and_table_follow_d_model_positions_and_base():
    at = open_page()
    z = plotly_array(figure(at, "PE: 128 positions × 64 dimensions")["data"][0]["z"])
    np.testing.assert_allclose(z, reference_pe(128, 64), atol=1e-6)  # float32 in the figure

    at.slider(key="positional.d_model").set_value(16).run()
    at.slider(key="positional.positions").set_value(50).run()
    at.select_slider(key="positional.base").set_value(100).run()
    assert not at.exception
    z = plotly_array(figure(at, "PE: 50 positions × 16 dimensions")["data"][0]["z"])
    assert z.shape == (50, 16)
    np.testing.assert_allclose(z, reference_pe(50, 16, base=100.0), atol=1e-6)

    # Default dimensions 0, 1, 8 (32 no longer exists at d_model 16), each across 50 positions.
    lines = figure(at, "Chosen dimensions")["data"]
    assert [line["name"].split(" (")[0] for line in lines] == ["dim 0", "dim 1", "dim 8"]
    np.testing.assert_allclose(plotly_array(lines[2]["y"]), np.sin(np.arange(50) / 100 ** (8 / 16)))
    # Dimension 8 is pair i = 4: wavelength 2π·100^(8/16) = 20π ≈ 62.83.
    assert "wavelength 2π·100^(8/16) = 62.83" in lines[2]["name"]

    table = dataframe(at, "PE[p, dimension]")
    np.testing.assert_allclose(table["PE[p, dimension]"], reference_pe(2, 16, base=100.0)[1])
    assert at.query_params["d_model"] == "16"
    assert at.query_params["positions"] == "50"
    assert at.query_params["base"] == "100"


def test_hand_calculation_position_1_with_d_model_4():
    at = open_page({"d_model": "4"})
    table = dataframe(at, "PE[p, dimension]")
    # ω_0 = 1, ω_1 = 10000^(-2/4) = 0.01.
    expected = [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]
    np.testing.assert_allclose(table["PE[p, dimension]"], expected, rtol=1e-15)
    assert table["function"].tolist() == ["sin", "cos", "sin", "cos"]
    np.testing.assert_allclose(table["angle p·ω_i"], [1, 1, 0.01, 0.01])


def test_order_blindness_difference_is_zero_without_positions_and_not_with_them():
    at = open_page()
    assert at.text_input(key="positional.sentence").value == "I love AI"
    assert any("**I love AI** → **AI love I**" in m.value for m in at.markdown)
    assert metric(at, "max |difference|") < 1e-12
    at.button_group(key="positional.family").set_value("sinusoidal").run()
    assert metric(at, "max |difference|") > 1e-3
    assert at.query_params["family"] == "sinusoidal"
    at.button_group(key="positional.family").set_value("learned").run()
    assert metric(at, "max |difference|") > 1e-3

    # The sinusoidal rows added to the sentence, d_model = 4, base 10000.
    pe_rows = plotly_array(figure(at, "PE", exact=True)["data"][0]["z"])
    np.testing.assert_allclose(pe_rows, reference_pe(3, 4), atol=1e-6)


def test_sentence_errors_are_shown_not_raised():
    at = open_page()
    at.text_input(key="positional.sentence").set_value("   ").run()
    assert any("empty" in e.value for e in at.error)
    nine_words = "one two three four five six seven eight nine"
    at.text_input(key="positional.sentence").set_value(nine_words).run()
    assert any("first 8 words" in e.value for e in at.error)
    assert not at.exception


def test_similarity_depends_on_distance_and_the_shift_is_exact():
    at = open_page({"d_model": "16", "positions": "40"})
    omega = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    gram = plotly_array(figure(at, "PE·PEᵀ")["data"][0]["z"])
    offsets = np.arange(40)[:, None] - np.arange(40)[None, :]
    np.testing.assert_allclose(
        gram, np.cos(offsets[..., None] * omega).sum(-1), atol=1e-5
    )  # Σ_i cos(ω_i (m - n))
    profile = figure(at, "PE(p)·PE(p+k)")["data"]
    by_distance = np.cos(np.arange(40)[:, None] * omega).sum(1)
    for line in profile:  # mean, smallest and largest over p coincide
        np.testing.assert_allclose(plotly_array(line["y"]), by_distance, atol=1e-12)

    assert metric(at, "Largest |PE(p+4) − M·PE(p)|") < 1e-12
    at.slider(key="positional.pair").set_value(1).run()
    at.slider(key="positional.offset").set_value(3).run()
    latex = next(e.value for e in at.latex if "bmatrix" in e.value)
    w = 10000.0 ** (-2 / 16)  # pair 1
    assert f"{math.cos(3 * w):.6f} & {math.sin(3 * w):.6f}" in latex
    assert f"{3 * w:.6f}" in latex
    assert metric(at, "Largest |PE(p+3) − M·PE(p)|") < 1e-12


def _diagonal_spread(matrix):
    n = matrix.shape[0]
    spreads = []
    for k in range(-n + 1, n):
        diagonal = np.diagonal(matrix, k)
        finite = diagonal[np.isfinite(diagonal)]
        if finite.size:
            spreads.append(finite.max() - finite.min())
    return max(spreads)


def test_rope_is_toeplitz_and_the_added_encodings_are_not():
    at = open_page({"d_model": "8"})
    rope = plotly_array(figure(at, "Rotary (RoPE)")["data"][0]["z"]).astype(np.float64)
    sinusoidal = plotly_array(figure(at, "Sinusoidal (added)")["data"][0]["z"]).astype(np.float64)
    assert rope.shape == (16, 16)
    assert _diagonal_spread(rope) < 1e-5  # float32 in the figure
    assert _diagonal_spread(sinusoidal) > 0.1
    assert metric(at, "Rotary (RoPE): largest spread") < 1e-12
    assert metric(at, "Sinusoidal (added): largest spread") > 0.1
    assert metric(at, "Learned table (added): largest spread") > 0.1
    assert metric(at, "ALiBi (score bias): largest spread") == 0.0
    # NoPE: one score for every key a query sees, c·c/√d with the page's content vector c.
    nope = plotly_array(figure(at, "NoPE (no positions)")["data"][0]["z"]).astype(np.float64)
    c = np.random.default_rng(0).normal(0.0, 1.0, size=8)
    visible = np.tril(np.ones((16, 16), dtype=bool))
    np.testing.assert_allclose(nope[visible], c @ c / math.sqrt(8), rtol=1e-6)
    assert np.all(np.isnan(nope[~visible]))
    assert metric(at, "NoPE (no positions): largest spread") == 0.0
    # The RoPE score by offset: one line for every pair of positions at that offset.
    lines = figure(at, "RoPE score by offset")["data"]
    np.testing.assert_allclose(plotly_array(lines[1]["y"]), plotly_array(lines[2]["y"]), atol=1e-12)


def test_alibi_slopes_and_biases():
    at = open_page()
    slopes = dataframe(at, "slope m")
    np.testing.assert_allclose(slopes["slope m"], [1 / 2**h for h in range(1, 9)], rtol=1e-15)
    # Head 3 (slope 1/8): query 5, key 1 is 4 back -> -4/8; the later keys are masked.
    (panel,) = [f for f in figures(at) if title_text(f) == "head 3: m = 0.125"]
    head3 = plotly_array(panel["data"][0]["z"])
    assert head3[5, 1] == pytest.approx(-0.5)
    assert np.isnan(head3[1, 5])
    at.slider(key="positional.heads").set_value(4).run()
    slopes = dataframe(at, "slope m")
    np.testing.assert_allclose(slopes["slope m"], [2 ** (-8 * h / 4) for h in range(1, 5)])


def test_extrapolation_learned_stops_at_the_training_length():
    at = open_page({"d_model": "16", "train": "10"})
    families = {
        "Sinusoidal (added)",
        "Learned table (added)",
        "Rotary (RoPE)",
        "ALiBi (score bias)",
    }
    extrapolation = [f for f in figures(at) if f["layout"].get("shapes") and title(f) in families]
    sizes = {title(f): plotly_array(f["data"][0]["z"]).shape for f in extrapolation}
    assert sizes == {
        "Sinusoidal (added)": (20, 20),
        "Learned table (added)": (10, 10),
        "Rotary (RoPE)": (20, 20),
        "ALiBi (score bias)": (20, 20),
    }
    share = plotly_array(figure(at, "Angles never seen")["data"][0]["y"])
    assert share.shape == (80,)
    # Pair i is new at p iff (L-1)ω_i < 2π and (p ω_i mod 2π) > (L-1)ω_i.
    omega = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    angle = np.mod(np.arange(80)[:, None] * omega, 2 * np.pi)
    expected = 100 * ((9 * omega < 2 * np.pi) & (angle > 9 * omega)).mean(1)
    np.testing.assert_allclose(share, expected)
    assert share[:10].max() == 0 and share[-1] > 50


def test_a_link_restores_the_view():
    at = open_page(
        {
            "d_model": "8",
            "positions": "20",
            "base": "100",
            "dims": "0,3",
            "position": "5",
            "family": "sinusoidal",
            "sentence": "the cat sat",
            "order": "rotate",
            "heads": "4",
            "train": "12",
            "width": "6",
        }
    )
    assert at.slider(key="positional.d_model").value == 8
    assert at.slider(key="positional.positions").value == 20
    assert at.select_slider(key="positional.base").value == 100
    assert at.multiselect(key="positional.dims").value == [0, 3]
    assert at.slider(key="positional.position").value == 5
    assert at.button_group(key="positional.family").value == "sinusoidal"
    assert at.selectbox(key="positional.order").value == "rotate"
    assert at.slider(key="positional.heads").value == 4
    assert at.slider(key="positional.train").value == 12
    assert at.slider(key="positional.width").value == 6
    assert any("**the cat sat** → **cat sat the**" in m.value for m in at.markdown)
    table = dataframe(at, "PE[p, dimension]")
    np.testing.assert_allclose(table["PE[p, dimension]"], reference_pe(6, 8, base=100.0)[5])
    assert not at.warning
    # The URL keeps exactly the non-default part of the view.
    assert at.query_params["position"] == "5"
    assert at.query_params["dims"] == "0,3"
    assert "compare_n" not in at.query_params


def test_crafted_links_give_a_notice_and_the_defaults():
    at = open_page(
        {
            "d_model": "abc",
            "positions": "1000000000",
            "base": "7",
            "dims": "0,9999",
            "sentence": "x" * 5_000,
            "train": "-3",
        }
    )
    warnings = " ".join(w.value for w in at.warning)
    for part in ("d_model=abc", "positions=1000000000", "base=7", "dims=0,9999", "train=-3"):
        assert part in warnings, part
    assert "`sentence` is 5,000 characters long" in warnings
    assert at.slider(key="positional.d_model").value == 64
    assert at.slider(key="positional.positions").value == 128
    assert at.select_slider(key="positional.base").value == 10000
    assert at.text_input(key="positional.sentence").value == "I love AI"
    assert at.slider(key="positional.train").value == 32
    assert not at.exception


def test_a_10_mb_parameter_is_dropped_and_the_page_runs_with_its_defaults():
    # Streamlit itself ignores a query string this long; the page must still come up.
    at = open_page({"sentence": "x" * 10_000_000, "d_model": "8"})
    assert at.text_input(key="positional.sentence").value == "I love AI"
    assert at.slider(key="positional.d_model").value == 64
    assert not at.exception


def test_an_odd_d_model_in_a_link_is_rounded_down_with_a_notice():
    at = open_page({"d_model": "5"})
    assert at.slider(key="positional.d_model").value == 4
    assert any("d_model=5" in w.value and "rounded to 4" in w.value for w in at.warning)
    assert not at.exception


def test_the_largest_setting_is_block_averaged_and_still_exact_in_the_table():
    at = open_page({"d_model": "1024", "positions": "2048", "position": "2047"})
    heat = figure(at, "PE: 2048 positions × 1024 dimensions")
    assert "averaged over 4×4 blocks" in heat["layout"]["title"]["text"]
    z = plotly_array(heat["data"][0]["z"])
    assert z.shape == (512, 256)
    full = reference_pe(2048, 1024)
    np.testing.assert_allclose(z, full.reshape(512, 4, 256, 4).mean(axis=(1, 3)), atol=1e-6)
    table = dataframe(at, "PE[p, dimension]")
    np.testing.assert_allclose(table["PE[p, dimension]"], full[2047], atol=1e-12)
    assert metric(at, "Largest |PE(p+4) − M·PE(p)|") < 1e-11


def test_a_fragment_widget_in_apptest_updates_its_values_and_the_link():
    at = open_page({"d_model": "16"})
    at.slider(key="positional.offset").set_value(7).run()
    assert at.query_params["offset"] == "7"
    assert metric(at, "Largest |PE(p+7) − M·PE(p)|") < 1e-12
    at.slider(key="positional.train").set_value(40).run()
    assert at.query_params["train"] == "40"
    share = plotly_array(figure(at, "Angles never seen")["data"][0]["y"])
    assert share.shape == (320,)


def test_the_training_length_reruns_only_its_fragment_and_the_link_follows():
    full, moved, fragment_id = change_in_fragment(
        "positional", "", "Training length L", ("double_array_value", [40.0])
    )
    assert fragment_id  # the slider lives in a fragment...
    assert moved.elements < full.elements / 4  # ...so only that fragment was sent again
    assert moved.query_string == "train=40"  # the link follows without a full run
    # The share of pairs at a never-seen angle at position 8·40 − 1 = 319 (d_model 64):
    # pair i is new iff (L−1)ω_i < 2π and (319 ω_i mod 2π) > (L−1)ω_i.
    omega = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    new = (39 * omega < 2 * np.pi) & (np.mod(319 * omega, 2 * np.pi) > 39 * omega)
    assert any(f"{100 * new.mean():.0f}% of the pairs at position 319" in t for t in moved.texts)


def test_a_plain_visit_does_not_import_torch():
    assert torch_after_a_plain_visit(PAGE) is False
