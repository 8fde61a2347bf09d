"""The masking lab page, driven through AppTest and checked against independent NumPy formulas.

Q, K, V are `default_rng(seed).standard_normal((3, n, 4))`, so every expected number here is
recomputed from that and the one-line formulas softmax(QKᵀ/√4 masked with −∞) and weights @ V.
"""

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.lessons.mask_experiments import MASK_KINDS
from harness.app_pages import ROOT
from tests.plotly_json import plotly_array, tick_labels
from ui.masking.inputs import PARAMETER_CONTROLS

PAGE = "pages/masking_lab.py"
D = 4


def open_page(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    # Open the page directly, as a link to /masking does: the home page never runs first.
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figures(at: AppTest) -> dict[str, dict]:
    """Every plotly figure on the page, by title."""
    out = {}
    for chart in at.main.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def heatmap_z(spec: dict) -> np.ndarray:
    """The first trace's z matrix, one row per y and one column per x."""
    trace = spec["data"][0]
    return decode(trace["z"]).reshape(len(decode(trace["y"])), len(decode(trace["x"])))


def decode(array) -> np.ndarray:
    return plotly_array(array).astype(float)


def qkv(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, k, v = np.random.default_rng(seed).standard_normal((3, n, D))
    return q, k, v


def reference_weights(q, k, allowed) -> np.ndarray:
    scores = np.where(allowed, q @ k.T / np.sqrt(D), -np.inf)
    weights = np.zeros_like(scores)
    for i, row in enumerate(scores):
        if np.isfinite(row).any():
            e = np.exp(row - row[np.isfinite(row)].max())
            weights[i] = e / e.sum()
    return weights


def dataframe_with(at: AppTest, column: str):
    for frame in at.dataframe:
        if column in frame.value.columns:
            return frame.value
    raise AssertionError(f"no table with a column {column!r}")


def badges(at: AppTest) -> str:
    return next(m.value for m in at.markdown if "Each row of the masked weights" in m.value)


# -- each mask kind ------------------------------------------------------------------------------


def test_default_is_causal_with_the_right_zeros_and_values():
    at = open_page()
    n = 6
    q, k, _ = qkv(n)
    causal = np.tril(np.ones((n, n), bool))
    shown = figures(at)
    with_mask = heatmap_z(shown["Weights with the mask"])
    assert (with_mask[~causal] == 0).all() and (with_mask[causal] > 0).all()
    np.testing.assert_allclose(with_mask, reference_weights(q, k, causal), rtol=1e-6, atol=1e-7)
    without = heatmap_z(shown["Weights without the mask"])
    np.testing.assert_allclose(without, reference_weights(q, k, True), rtol=1e-6, atol=1e-7)
    scores = heatmap_z(shown["Masked scores (−∞ where blocked)"])
    assert np.isnan(scores[~causal]).all()  # drawn grey as −∞, not as a colour
    np.testing.assert_allclose(scores[causal], (q @ k.T / 2)[causal], rtol=1e-6)
    np.testing.assert_array_equal(heatmap_z(shown["Mask (1 = may attend)"]), causal)
    assert badges(at).count("Σ = 1.0000") == n
    assert not at.error


@pytest.mark.parametrize(
    ("kinds", "options", "expected"),
    [
        # Positions 2 and 5 (1-based) are padding: those key columns are blocked everywhere.
        (["padding"], {"masking.pad": [2, 5]}, lambda i, j: j not in (1, 4)),
        # Window 3: query i sees keys i-2 .. i.
        (["window"], {"masking.window": 3}, lambda i, j: 0 <= i - j < 3),
        # Prefix 2: keys 0, 1 visible to all; causal after that.
        (["prefix"], {"masking.prefix": 2}, lambda i, j: j < 2 or j <= i),
        # Combined: causal AND key 4 (1-based) padding.
        (["causal", "padding"], {"masking.pad": [4]}, lambda i, j: j <= i and j != 3),
        ([], {}, lambda i, j: True),
    ],
    ids=["padding", "window", "prefix", "causal+padding", "none"],
)
def test_each_mask_kind_blocks_exactly_its_cells(kinds, options, expected):
    at = open_page()
    at.multiselect(key="masking.kinds").set_value(kinds).run()
    for key, value in options.items():
        widget = at.multiselect(key=key) if key == "masking.pad" else at.slider(key=key)
        widget.set_value(value).run()
    assert not at.exception and not at.error
    n = 6
    allowed = np.array([[expected(i, j) for j in range(n)] for i in range(n)])
    q, k, _ = qkv(n)
    weights = heatmap_z(figures(at)["Weights with the mask"])
    assert (weights[~allowed] == 0).all() and (weights[allowed] > 0).all()
    np.testing.assert_allclose(weights, reference_weights(q, k, allowed), rtol=1e-6, atol=1e-7)
    assert at.query_params["kinds"] == ",".join(kinds)


def test_every_kind_at_once_with_only_padding_leaves_every_row_fully_masked():
    at = open_page(
        {"n": "2", "kinds": "causal,padding,window,prefix,custom", "pad": "1,2", "window": "1"}
    )
    assert not at.error and not at.warning
    np.testing.assert_array_equal(heatmap_z(figures(at)["Weights with the mask"]), 0.0)
    assert badges(at).count("fully masked") == 2


def test_every_mask_kind_is_offered_in_order_with_its_label_and_controls():
    at = open_page({"kinds": "causal,padding,window,prefix,custom"})
    kinds = at.multiselect(key="masking.kinds")
    assert kinds.options == ["Causal", "Padding", "Sliding window", "Prefix-LM", "Custom grid"]
    assert kinds.value == ["causal", "padding", "window", "prefix", "custom"]
    # Each parameter a chosen kind takes has its control on the page, drawn once.
    assert at.multiselect(key="masking.pad").value == [5, 6]
    assert at.slider(key="masking.window").value == 2
    assert at.slider(key="masking.prefix").value == 2
    assert grid_editor_key(at) in at.session_state
    assert {name for kind in MASK_KINDS.values() for name in kind.parameters} == set(
        PARAMETER_CONTROLS
    )


def test_encoder_and_decoder_masks_use_the_chosen_padding():
    at = open_page({"kinds": "padding", "pad": "2"})
    shown = figures(at)
    real_keys = np.arange(6) != 1
    encoder = np.broadcast_to(real_keys, (6, 6))
    decoder = encoder & np.tril(np.ones((6, 6), bool))
    np.testing.assert_array_equal(heatmap_z(shown["Encoder: padding mask"]), encoder)
    np.testing.assert_array_equal(heatmap_z(shown["Decoder: causal + padding mask"]), decoder)


def test_padding_positions_are_labelled_pad():
    at = open_page({"kinds": "padding", "pad": "1,3"})
    spec = figures(at)["Weights with the mask"]
    ticks = tick_labels(spec["layout"]["xaxis"])
    assert ticks == ["<pad>", "cat", "<pad>", "on", "the", "mat"]


# -- the custom grid -----------------------------------------------------------------------------


def grid_editor_key(at: AppTest) -> str:
    return f"masking.grid.editor.v{at.session_state['masking.grid.version']}"


def test_custom_grid_ticks_become_the_mask_and_the_link():
    at = open_page()
    at.multiselect(key="masking.kinds").set_value(["custom"]).run()
    # The grid starts causal; untick row 2's two keys (it becomes fully masked) and tick (1, 3).
    at.session_state[grid_editor_key(at)] = {
        "edited_rows": {1: {"k1": False, "k2": False}, 0: {"k3": True}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception
    allowed = np.tril(np.ones((6, 6), bool))
    allowed[1] = False
    allowed[0, 2] = True
    weights = heatmap_z(figures(at)["Weights with the mask"])
    q, k, _ = qkv(6)
    np.testing.assert_allclose(weights, reference_weights(q, k, allowed), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(weights[1], 0.0)
    assert "2 cat: Σ = 0, fully masked" in badges(at)
    assert badges(at).count("Σ = 1.0000") == 5
    assert at.query_params["grid"] == "101000.000000.111000.111100.111110.111111"


def test_custom_grid_preset_buttons_refill_the_grid():
    at = open_page({"kinds": "custom"})
    at.button(key="masking.grid.fill.All allowed").click().run()
    assert at.query_params["grid"] == ".".join(["111111"] * 6)
    q, k, _ = qkv(6)
    weights = heatmap_z(figures(at)["Weights with the mask"])
    np.testing.assert_allclose(weights, reference_weights(q, k, True), rtol=1e-6, atol=1e-7)
    at.button(key="masking.grid.fill.Causal").click().run()
    assert "grid" not in at.query_params  # the causal grid is the default


def test_custom_grid_from_the_link():
    at = open_page({"kinds": "custom", "n": "3", "grid": "100.010.011"})
    allowed = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]], bool)
    weights = heatmap_z(figures(at)["Weights with the mask"])
    q, k, _ = qkv(3)
    np.testing.assert_allclose(weights, reference_weights(q, k, allowed), rtol=1e-6, atol=1e-7)
    # Each of the first two queries sees only itself: weight exactly 1 there.
    assert weights[0, 0] == 1.0 and weights[1, 1] == 1.0
    assert at.slider(key="masking.n").value == 3


# -- deep links ----------------------------------------------------------------------------------


def test_link_restores_kinds_and_options():
    at = open_page(
        {
            "n": "5",
            "seed": "7",
            "kinds": "padding,window",
            "pad": "2",
            "window": "3",
            "scale": "6e4",
        }
    )
    assert at.multiselect(key="masking.kinds").value == ["padding", "window"]
    assert at.multiselect(key="masking.pad").value == [2]
    assert at.slider(key="masking.window").value == 3
    assert at.number_input(key="masking.seed").value == 7
    assert at.select_slider(key="masking.scale").value == "6e4"
    allowed = np.array([[0 <= i - j < 3 and j != 1 for j in range(5)] for i in range(5)])
    q, k, _ = qkv(5, seed=7)
    weights = heatmap_z(figures(at)["Weights with the mask"])
    np.testing.assert_allclose(weights, reference_weights(q, k, allowed), rtol=1e-6, atol=1e-7)
    assert not at.warning


def test_a_control_change_updates_the_link():
    at = open_page()
    assert dict(at.query_params) == {}
    at.slider(key="masking.n").set_value(4).run()
    at.multiselect(key="masking.kinds").set_value(["window"]).run()
    at.slider(key="masking.window").set_value(3).run()
    assert at.query_params["n"] == "4"
    assert at.query_params["kinds"] == "window"
    assert at.query_params["window"] == "3"


@pytest.mark.parametrize(
    ("params", "refused"),
    [
        ({"n": "1000000000"}, "n=1000000000"),
        ({"n": "abc"}, "n=abc"),
        ({"kinds": "causal,everything"}, "kinds=causal,everything"),
        ({"kinds": "custom", "grid": "12x.0"}, "grid=12x.0"),
        ({"kinds": "custom", "grid": "1" * 3000}, "`grid`"),
        ({"kinds": "custom", "grid": ".".join(["1" * 9] * 9)}, "grid="),
        ({"kinds": "custom", "grid": "111111111"}, "larger than 8×8"),
        ({"kinds": "custom", "grid": "10.1"}, "not square"),
        ({"scale": "1e300"}, "scale=1e300"),
        ({"kinds": "window", "window": "-4"}, "window=-4"),
    ],
)
def test_crafted_links_give_a_notice_and_the_defaults(params, refused):
    at = open_page(params)
    assert not at.exception
    assert any(refused in w.value for w in at.warning), [w.value for w in at.warning]
    n = at.slider(key="masking.n").value
    assert n == 6
    # The page still draws correct weights for whatever mask it fell back to.
    weights = heatmap_z(figures(at)["Weights with the mask"])
    assert weights.shape == (6, 6)
    np.testing.assert_allclose(weights.sum(axis=1)[weights.sum(axis=1) > 0], 1.0, rtol=1e-5)


def test_a_custom_grid_of_another_size_is_fitted_to_the_tokens():
    at = open_page({"kinds": "custom", "n": "4", "grid": "01.10"})
    # Kept top-left, the new cells causal.
    allowed = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], bool)
    q, k, _ = qkv(4)
    weights = heatmap_z(figures(at)["Weights with the mask"])
    np.testing.assert_allclose(weights, reference_weights(q, k, allowed), rtol=1e-6, atol=1e-7)


# -- the future cannot leak ----------------------------------------------------------------------


def test_changing_a_later_value_moves_only_later_rows_under_causal():
    at = open_page()
    at.selectbox(key="masking.change_at").set_value(3).run()
    at.slider(key="masking.delta").set_value(1.5).run()
    table = dataframe_with(at, "causal")
    q, k, _ = qkv(6)
    # output_i changes by w_i,2 · 1.5 in every feature (position 3 is index 2).
    causal_w = reference_weights(q, k, np.tril(np.ones((6, 6), bool)))
    full_w = reference_weights(q, k, True)
    np.testing.assert_allclose(table["causal"].to_numpy(), 1.5 * causal_w[:, 2], rtol=1e-9)
    np.testing.assert_allclose(table["no mask"].to_numpy(), 1.5 * full_w[:, 2], rtol=1e-9)
    assert (table["causal"].to_numpy()[:2] == 0).all()
    assert (table["causal"].to_numpy()[2:] > 0).all()
    assert (table["no mask"].to_numpy() > 0).all()


# -- batching with padding -----------------------------------------------------------------------


def batch_reference(pad_value: float, side: str, *, use_mask: bool, causal: bool) -> float:
    """max |batched − alone| for “the cat sat”, recomputed with NumPy from scratch."""
    q, k, v = qkv(3, seed=1)  # the short sentence uses seed + 1
    length = 5
    padded = [np.full((length, D), pad_value) for _ in range(3)]
    rows = slice(0, 3) if side == "right" else slice(2, 5)
    for full, part in zip(padded, (q, k, v), strict=True):
        full[rows] = part
    real = np.zeros(length, bool)
    real[rows] = True
    allowed = np.ones((length, length), bool)
    if use_mask:
        allowed &= real[None, :]
    if causal:
        allowed &= np.tril(np.ones((length, length), bool))
    batched = reference_weights(padded[0], padded[1], allowed) @ padded[2]
    alone_allowed = np.tril(np.ones((3, 3), bool)) if causal else True
    alone = reference_weights(q, k, alone_allowed) @ v
    return float(np.abs(batched[rows] - alone).max())


def metric(at: AppTest, start: str) -> float:
    return float(next(m.value for m in at.metric if m.label.startswith(start)))


def test_padding_mask_makes_the_batched_result_exactly_equal():
    at = open_page()
    assert metric(at, "max |batched − alone|, “the cat sat”") == 0.0
    assert metric(at, "max |batched − alone|, “my dog") == 0.0
    assert any("equal the ones computed alone" in s.value for s in at.success)
    at.toggle(key="masking.batch_mask").set_value(False).run()
    leaked = metric(at, "max |batched − alone|, “the cat sat”")
    expected = batch_reference(1.0, "right", use_mask=False, causal=False)
    assert expected > 1e-3
    assert leaked == float(f"{expected:.3g}")  # the metric shows 3 significant digits
    assert at.query_params["batch_mask"] == "0"


def test_right_padding_under_causal_needs_no_padding_mask_but_left_padding_does():
    at = open_page({"batch_mask": "0", "batch_causal": "1"})
    assert metric(at, "max |batched − alone|, “the cat sat”") == 0.0
    assert any("already hides the pad slots" in i.value for i in at.info)
    at.segmented_control(key="masking.batch_side").set_value("left").run()
    expected = batch_reference(1.0, "left", use_mask=False, causal=True)
    assert expected > 1e-3
    assert metric(at, "max |batched − alone|, “the cat sat”") == float(f"{expected:.3g}")


def test_float32_batch_differs_by_less_than_1e_6():
    at = open_page({"batch_dtype": "float32", "batch_side": "left", "batch_causal": "1"})
    assert metric(at, "max |batched − alone|, “the cat sat”") < 1e-6
    assert metric(at, "max |batched − alone|, “my dog") < 1e-6
    assert any("fully masked" in c.value for c in at.caption)


# -- a fully masked row --------------------------------------------------------------------------


def test_a_fully_masked_row_is_nan_naively_and_zero_here():
    at = open_page({"empty_row": "2"})
    table = dataframe_with(at, "1 the")
    table = table.loc[["masked scores", "weights, naive softmax", "weights, this package"]]
    assert (table.loc["masked scores"] == "−∞").all()
    assert (table.loc["weights, naive softmax"] == "NaN").all()
    assert (table.loc["weights, this package"] == "0.0000").all()
    text = next(m.value for m in at.markdown if "Output of query 2" in m.value)
    assert "naive **[NaN, NaN, NaN, NaN]**" in text
    assert "this package **[0.0000, 0.0000, 0.0000, 0.0000]**" in text
    assert "fully_masked = **True**" in text


# -- −∞ versus a large negative fill -------------------------------------------------------------

SCORES = np.array([-1.0, -0.5, 1.0, 0.5])
BLOCKED = np.array([False, False, True, True])


def float16_reference(scale: float, fill: float, blocked: np.ndarray) -> tuple[np.ndarray, float]:
    """Scores + bias and the softmax, every operation in NumPy float16."""
    with np.errstate(over="ignore"):
        biased = (SCORES * scale).astype(np.float16) + np.where(blocked, fill, 0.0).astype(
            np.float16
        )
    shifted = biased - biased.max()
    weights = np.exp(shifted) / np.exp(shifted).sum()
    return biased, float(weights[blocked].sum())


def leak_table(at: AppTest):
    """The weights table of the leak demo (one row per fill)."""
    return dataframe_with(at, "weight on blocked keys")


def biased_table(at: AppTest, dtype: str):
    """The scores-plus-mask table of the leak demo."""
    return dataframe_with(at, f"fill in {dtype}")


KEYS = ["1 the", "2 cat", "3 <pad> (blocked)", "4 <pad> (blocked)"]


def test_leak_demo_in_float16_matches_half_precision_arithmetic():
    at = open_page()  # float16, scale 1e4
    table, scores = leak_table(at), biased_table(at, "float16")
    assert at.segmented_control(key="masking.leak_dtype").value == "float16"
    for name, fill in {"−1e4 (original BERT)": -1e4, "float16 min (−65504)": -65504.0}.items():
        biased, leaked = float16_reference(1e4, fill, BLOCKED)
        np.testing.assert_array_equal(scores.loc[name, KEYS].to_numpy(dtype=float), biased)
        assert table.loc[name, "weight on blocked keys"] == pytest.approx(leaked, abs=1e-3)
    # By hand: blocked key 3 sits at 1e4 − 1e4 = 0, above the allowed −5000: it takes everything.
    assert table.loc["−1e4 (original BERT)", "weight on blocked keys"] == 1.0
    assert table.loc["float16 min (−65504)", "weight on blocked keys"] == 0.0
    assert table.loc["−∞", "weight on blocked keys"] == 0.0
    # float16 cannot store −1e9: it becomes −∞.
    assert scores.loc["−1e9", "fill in float16"] == -np.inf
    summary = next(m.value for m in at.markdown if m.value.startswith("Scale 1e4, float16"))
    assert "−1e4 (original BERT) leaves **1** of the weight" in summary
    assert "cannot store −1e9" in summary


def test_float16_minimum_leaks_at_scale_6e4():
    at = open_page({"scale": "6e4"})
    _, leaked = float16_reference(6e4, -65504.0, BLOCKED)
    assert leaked == 1.0
    table = leak_table(at)
    assert table.loc["float16 min (−65504)", "weight on blocked keys"] == 1.0
    # 60000 − 65504 = −5504, exact in float16.
    scores = biased_table(at, "float16")
    assert scores.loc["float16 min (−65504)", "3 <pad> (blocked)"] == -5504.0


def test_a_fully_blocked_row_leaks_everything_with_a_finite_fill():
    at = open_page({"leak_dtype": "float32", "all_blocked": "1", "scale": "1"})
    table = leak_table(at)
    weights = table.loc["−1e9", ["1 the (blocked)", "2 cat (blocked)", *KEYS[2:]]]
    # float32 spacing near 1e9 is 64: every s − 1e9 rounds to −1e9, so the row is uniform.
    np.testing.assert_array_equal(weights.to_numpy(dtype=float), [0.25] * 4)
    assert table.loc["−1e9", "weight on blocked keys"] == 1.0
    assert table.loc["−∞", "Σ weights"] == 0.0
    assert table.loc["−∞", "weight on blocked keys"] == 0.0


def test_leak_curve_is_drawn_with_one_line_per_fill():
    at = open_page({"leak_dtype": "float32"})
    spec = next(s for t, s in figures(at).items() if t.startswith("Weight leaked"))
    lines = {trace["name"]: decode(trace["y"]) for trace in spec["data"]}
    assert set(lines) == {"−∞", "−1e9", "−1e4 (original BERT)", "float16 min (−65504)"}
    x = decode(spec["data"][0]["x"])
    assert (lines["−∞"] == 0).all()
    # −1e4 leaks once 1.5 · scale > 1e4 by enough for exp to matter; far below, nothing leaks.
    assert (lines["−1e4 (original BERT)"][x < 1e3] == 0).all()
    assert (lines["−1e4 (original BERT)"][x > 1e4] == 1).all()


def test_cached_heatmaps_follow_presenter_mode():
    # The heatmaps are cached across sessions; presenter mode must still get its larger fonts.
    normal = figures(open_page())["Weights with the mask"]
    presenting = figures(open_page({"present": "1"}))["Weights with the mask"]
    assert presenting["layout"]["font"]["size"] > normal["layout"]["font"]["size"]

    def cell_font(spec: dict) -> int:
        return next(t for t in spec["data"] if t.get("name") == "values")["textfont"]["size"]

    assert cell_font(presenting) > cell_font(normal)


# -- fragments: a control of one experiment reruns that experiment and still updates the link -----


def test_a_control_inside_a_fragment_updates_its_numbers_and_the_link():
    at = open_page()
    at.select_slider(key="masking.scale").set_value("6e4").run()
    # By hand, float16: blocked key 3 sits at 60000 − 65504 = −5504, the best allowed key at
    # −0.5 · 60000 = −30000: exp(−24496) is 0, so the float16 minimum leaks everything.
    assert leak_table(at).loc["float16 min (−65504)", "weight on blocked keys"] == 1.0
    assert at.query_params["scale"] == "6e4"
    at.slider(key="masking.delta").set_value(-1.0).run()
    q, k, _ = qkv(6)
    causal_w = reference_weights(q, k, np.tril(np.ones((6, 6), bool)))
    # Position 4 (index 3) changed by −1 in every feature: row i moves by w_i,3.
    np.testing.assert_allclose(dataframe_with(at, "causal")["causal"], causal_w[:, 3], rtol=1e-9)
    assert at.query_params["delta"] == "-1" and at.query_params["scale"] == "6e4"
