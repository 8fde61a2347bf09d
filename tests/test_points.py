"""The named points (attention_core/models/points.py): their names, checks and edits, by hand.

The forward passes that call these edits are compared with transformers' hooks in
tests/test_llama.py; here every name, message and edit is checked on small arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.models import points
from attention_core.validation import AttentionInputError


def test_names_are_built_by_functions():
    assert points.resid(0) == "resid.0"
    assert points.resid(30) == "resid.30"
    assert points.heads(3) == "layer.3.heads"
    assert points.attn_out(0) == "layer.0.attn_out"
    assert points.mlp_out(29) == "layer.29.mlp_out"
    assert points.heads(np.int64(2)) == "layer.2.heads"  # a NumPy index reads as its number


@pytest.mark.parametrize("build", [points.resid, points.heads, points.attn_out, points.mlp_out])
@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_a_layer_must_be_a_whole_number_from_0(build, bad):
    with pytest.raises(AttentionInputError):
        build(bad)


def test_every_point_in_the_order_the_forward_reaches_it():
    assert points.names(2) == (
        "resid.0",
        "layer.0.heads",
        "layer.0.attn_out",
        "layer.0.mlp_out",
        "resid.1",
        "layer.1.heads",
        "layer.1.attn_out",
        "layer.1.mlp_out",
        "resid.2",
    )
    assert points.names(0) == ("resid.0",)
    assert len(points.names(30)) == 4 * 30 + 1
    assert set(points.KINDS) == set(points.SHAPES)


def test_parse_gives_the_kind_and_index_of_every_point():
    assert points.parse("resid.0", 3) == ("resid", 0)
    assert points.parse("resid.3", 3) == ("resid", 3)  # after the last layer
    assert points.parse("layer.2.heads", 3) == ("heads", 2)
    assert points.parse("layer.1.attn_out", 3) == ("attn_out", 1)
    assert points.parse("layer.0.mlp_out", 3) == ("mlp_out", 0)
    for name in points.names(3):
        kind, index = points.parse(name, 3)
        assert kind in points.KINDS
        assert name == (points.resid(index) if kind == "resid" else f"layer.{index}.{kind}")


@pytest.mark.parametrize(
    "name",
    ["resid.4", "layer.3.heads", "resid.-1", "resid.01", "layer.0.attn", "hook_z", 5, None],
)
def test_an_unknown_point_names_the_valid_ones(name):
    with pytest.raises(AttentionInputError) as error:
        points.parse(name, 3)
    message = str(error.value)
    assert f"{name!r} is not a point of this model" in message
    assert "resid.0 to resid.3 (the residual stream before layer 0 to after layer 2)" in message
    assert "for each layer l from 0 to 2, layer.l.heads, layer.l.attn_out and" in message


def test_a_misspelt_point_gets_the_closest_name():
    with pytest.raises(AttentionInputError, match=r"Did you mean layer\.2\.heads\?"):
        points.parse("layer.2.head", 3)
    with pytest.raises(AttentionInputError, match=r"Did you mean resid\.3\?"):
        points.parse("resid3", 3)
    with pytest.raises(AttentionInputError) as error:
        points.parse("xyz", 3)
    assert "Did you mean" not in str(error.value)


def test_check_edits_keeps_good_edits_and_refuses_the_rest():
    assert points.check_edits(None, 3) is None
    assert points.check_edits({}, 3) is None  # nothing to edit: the fast path
    edits = {points.heads(1): np.negative, points.resid(3): np.abs}
    checked = points.check_edits(edits, 3)
    assert checked == edits
    edits[points.resid(0)] = np.abs
    assert points.resid(0) not in checked  # a copy: the caller's later changes do not leak in
    with pytest.raises(AttentionInputError, match="must map point names to functions"):
        points.check_edits([("resid.0", np.abs)], 3)
    with pytest.raises(AttentionInputError, match=r"'layer\.3\.heads' is not a point"):
        points.check_edits({points.heads(3): np.abs}, 3)
    with pytest.raises(AttentionInputError, match=r"The edit of resid\.1 must be a function"):
        points.check_edits({points.resid(1): np.zeros(3)}, 3)


def test_edit_applies_only_the_edit_at_that_point():
    z = np.arange(24, dtype=np.float32).reshape(2, 3, 4)  # (head, n, d_head)
    assert points.edit({}, points.heads(0), z) is z
    assert points.edit({points.heads(1): np.negative}, points.heads(0), z) is z
    out = points.edit({points.heads(0): np.negative}, points.heads(0), z)
    np.testing.assert_array_equal(out, -z)
    assert out.dtype == np.float32


def test_an_edit_sees_a_read_only_view_and_its_result_keeps_the_dtype():
    stream = np.ones((3, 4), dtype=np.float32)  # (n, d_model)

    def write_in_place(x):
        x[0] = 0.0
        return x

    with pytest.raises(ValueError, match="read-only"):
        points.edit({points.resid(2): write_in_place}, points.resid(2), stream)
    assert np.all(stream == 1.0)

    def one_position(x):
        y = x.astype(np.float64)  # a float64 result is passed on as float32
        y[1] = 7.0
        return y

    out = points.edit({points.resid(2): one_position}, points.resid(2), stream)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1.0] * 4, [7.0] * 4, [1.0] * 4])


@pytest.mark.parametrize(
    ("name", "shape", "text"),
    [
        (points.heads(0), (2, 3, 4), "(head, n, d_head)"),
        (points.attn_out(0), (3, 8), "(n, d_model)"),
        (points.resid(1), (3, 8), "(n, d_model)"),
    ],
)
def test_a_replacement_of_another_shape_is_refused(name, shape, text):
    x = np.zeros(shape, dtype=np.float32)
    with pytest.raises(AttentionInputError) as error:
        points.edit({name: lambda a: a[..., :-1]}, name, x)
    cut = (*shape[:-1], shape[-1] - 1)
    assert str(error.value) == (
        f"The edit of {name} returned an array shaped {cut}, but the point is shaped {shape} "
        f"{text}: return an array of the same shape."
    )
    with pytest.raises(AttentionInputError, match=r"shaped \(\)"):
        points.edit({name: lambda a: None}, name, x)


def test_read_takes_each_point_from_the_step_its_kind_names():
    from types import SimpleNamespace

    embeddings = np.zeros((2, 4))
    layers = [
        SimpleNamespace(
            hidden=np.full((2, 4), layer + 1.0),
            head_outputs=np.full((3, 2, 2), 10.0 + layer),
            attn_output=np.full((2, 4), 20.0 + layer),
            mlp_output=np.full((2, 4), 30.0 + layer),
        )
        for layer in range(2)
    ]
    fields = {"resid": "hidden", "heads": "head_outputs", "attn_out": "attn_output",
              "mlp_out": "mlp_output"}  # fmt: skip
    assert points.read(points.resid(0), embeddings, layers, fields) is embeddings
    # resid.{l + 1} is layer l's output: the stream between layers l and l + 1.
    assert points.read(points.resid(1), embeddings, layers, fields) is layers[0].hidden
    assert points.read(points.resid(2), embeddings, layers, fields) is layers[1].hidden
    assert points.read(points.heads(0), embeddings, layers, fields) is layers[0].head_outputs
    assert points.read(points.attn_out(1), embeddings, layers, fields) is layers[1].attn_output
    assert points.read(points.mlp_out(1), embeddings, layers, fields) is layers[1].mlp_output
    with pytest.raises(AttentionInputError, match="did not keep 'missing'"):
        points.read(points.mlp_out(0), embeddings, layers, {**fields, "mlp_out": "missing"})


def test_edit_at_builds_no_name_without_edits_and_applies_the_one_it_names():
    built = []

    def heads(layer: int) -> str:
        built.append(layer)
        return points.heads(layer)

    z = np.ones((2, 3, 4))
    assert points.edit_at(None, heads, 3, z) is z
    assert points.edit_at({}, heads, 3, z) is z
    assert built == []  # the common pass, without edits, never makes a name
    doubled = points.edit_at({points.heads(3): lambda a: 2 * a}, heads, 3, z)
    np.testing.assert_array_equal(doubled, 2 * z)
    assert built == [3]


def test_head_scaling_multiplies_each_head_and_leaves_unmasked_layers_alone():
    mask = np.ones((3, 2))
    mask[1] = [0.0, 0.5]
    edits = points.head_scaling(mask)
    assert list(edits) == [points.heads(1)]  # layers of ones get no edit (x · 1 = x anyway)
    z = np.arange(1, 13, dtype=np.float32).reshape(2, 3, 2)  # (head, n, d_head)
    out = edits[points.heads(1)](z)
    np.testing.assert_array_equal(out[0], np.zeros((3, 2)))
    np.testing.assert_array_equal(out[1], z[1] * 0.5)
    assert points.head_scaling(np.ones((4, 9))) == {}
    every = points.head_scaling(np.full((2, 2), 2.0))
    assert list(every) == [points.heads(0), points.heads(1)]


def test_head_scaling_checks_its_mask_against_the_heads():
    with pytest.raises(AttentionInputError, match=r"shaped \(layer, head\).*got shape \(9,\)"):
        points.head_scaling(np.ones(9))
    edits = points.head_scaling(np.zeros((1, 3)))
    with pytest.raises(AttentionInputError, match="3 multipliers a layer but the model has 2"):
        edits[points.heads(0)](np.ones((2, 3, 4), dtype=np.float32))
