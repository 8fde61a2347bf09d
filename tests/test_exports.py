"""ui.exports: every export parses back to the same numbers; bad uploads give clear messages."""

import io
import json

import numpy as np
import pandas as pd
import pytest

from attention_core import AttentionInputError
from attention_core.lessons.presets import Example, attention_for, three_token_example
from ui.widgets.formats import (
    MAX_UPLOAD_BYTES,
    clean_settings,
    combine_upload,
    csv_to_matrix,
    example_to_json,
    json_to_example,
    matrix_file,
    matrix_role,
    matrix_to_csv,
    matrix_to_latex,
    matrix_to_npy,
    npy_to_matrix,
)

RNG = np.random.default_rng(0)


def test_csv_round_trip_is_exact_and_readable_by_pandas():
    m = RNG.standard_normal((3, 4)) * 1e3
    text = matrix_to_csv(m, row_labels=["the", "cat", "sat"], col_labels=["d1", "d2", "d3", "d4"])
    back, labels = csv_to_matrix(text, name="Q")
    np.testing.assert_array_equal(back, m)  # repr keeps every bit of a float64
    assert labels == ("the", "cat", "sat")
    # Another reader sees the same table: the header, the labels and the numbers.
    frame = pd.read_csv(io.StringIO(text))
    assert list(frame.columns) == ["token", "d1", "d2", "d3", "d4"]
    np.testing.assert_array_equal(frame.iloc[:, 1:].to_numpy(), m)


def test_csv_writes_masked_scores_as_minus_inf_and_integers_plainly():
    text = matrix_to_csv(
        np.array([[1.0, -np.inf], [0.5, 2.0]]), row_labels=["a", "b"], col_labels=["a", "b"],
        row_title="query",
    )  # fmt: skip
    assert text == "query,a,b\na,1,-inf\nb,0.5,2\n"
    back, _ = csv_to_matrix(text, name="scores", allow_neg_inf=True)
    assert np.isneginf(back[0, 1]) and back[1, 0] == 0.5


def test_csv_reader_accepts_bare_numbers_and_a_header_without_labels():
    values, labels = csv_to_matrix("1,2\n3,4\n", name="K")
    np.testing.assert_array_equal(values, [[1, 2], [3, 4]])
    assert labels is None
    values, labels = csv_to_matrix("d1,d2\n1,−2\n", name="K")  # a typographic minus too
    np.testing.assert_array_equal(values, [[1, -2]])
    assert labels is None
    values, labels = csv_to_matrix("token,d1\n1,5\n2,6\n", name="V")  # numeric token names
    np.testing.assert_array_equal(values, [[5], [6]])
    assert labels == ("1", "2")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("token,d1\n", "header but no rows"),
        ("1,2\n3\n", "different numbers of cells"),
        ("a,1,x\n", "holds “x” at row 1 \\(“a”\\), column 2: type a number"),
        ("1,nan\n", "finite"),
        ("1,inf\n", "finite"),
        ("1,-inf\n", "finite"),
        ("\n".join(["1"] * 17), "at most 16 rows"),
        (",".join(["1"] * 65), "at most 16 rows and 64 columns"),
    ],
)
def test_csv_reader_says_what_to_fix(text, message):
    with pytest.raises(AttentionInputError, match=message):
        csv_to_matrix(text, name="Q")


def test_npy_round_trip():
    m = RNG.standard_normal((2, 5))
    back = npy_to_matrix(matrix_to_npy(m))
    assert back.dtype == np.float64
    np.testing.assert_array_equal(back, m)
    np.testing.assert_array_equal(np.load(io.BytesIO(matrix_to_npy([[1, 2]]))), [[1.0, 2.0]])


def test_latex_bmatrix():
    assert matrix_to_latex(np.array([[1.0, 0.5], [-np.inf, 2.0 / 3.0]])) == (
        "\\begin{bmatrix}\n1 & 0.5 \\\\\n-\\infty & 0.6667\n\\end{bmatrix}"
    )
    assert matrix_to_latex(np.array([[-0.00001]]), decimals=2) == (
        "\\begin{bmatrix}\n0\n\\end{bmatrix}"
    )


def test_matrix_file_formats_parse_back():
    m = np.array([[0.25, -1.5]])
    csv_bytes = matrix_file(m, "CSV", row_labels=["x"], col_labels=["d1", "d2"])
    np.testing.assert_array_equal(csv_to_matrix(csv_bytes.decode(), name="Q")[0], m)
    np.testing.assert_array_equal(npy_to_matrix(matrix_file(m, "NumPy", row_labels=["x"],
                                                            col_labels=["a", "b"])), m)  # fmt: skip
    assert matrix_file(m, "LaTeX", row_labels=["x"], col_labels=["a", "b"]).decode() == (
        "\\begin{bmatrix}\n0.25 & -1.5\n\\end{bmatrix}"
    )
    with pytest.raises(ValueError, match="unknown format"):
        matrix_file(m, "xlsx", row_labels=["x"], col_labels=["a", "b"])


def test_json_round_trip_with_steps_and_settings():
    e = three_token_example()
    steps = attention_for(e.q, e.k, e.v, causal=True)
    settings = {"scoring": "dot_product", "causal": True, "tau": 0.5}
    text = example_to_json(e, settings=settings, steps=steps)
    back = json_to_example(text)
    for name in ("q", "k", "v"):
        np.testing.assert_array_equal(getattr(back.example, name), getattr(e, name))
    assert back.example.query_labels == e.query_labels
    assert back.settings == settings
    document = json.loads(text)
    # JSON has no infinity: masked scores are null, everything else is the exact step.
    assert document["steps"]["masked"][0][1] is None
    np.testing.assert_array_equal(document["steps"]["weights"], steps.weights)
    assert document["steps"]["scale"] == pytest.approx(2**-0.5)


def test_json_round_trip_of_random_floats_is_exact():
    e = Example(q=RNG.standard_normal((2, 3)), k=RNG.standard_normal((4, 3)),
                v=RNG.standard_normal((4, 2)), query_labels="ab", key_labels="wxyz")  # fmt: skip
    back = json_to_example(example_to_json(e)).example
    np.testing.assert_array_equal(back.k, e.k)
    np.testing.assert_array_equal(back.v, e.v)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must hold an object"),
        ('{"format": "other"}', "format is 'other'"),
        ('{"Q": [[1]], "K": [[1]]}', "no V matrix"),
        ('{"Q": [[1, "a"]], "K": [[1, 1]], "V": [[1]]}', "holds 'a' at row 1, column 2"),
        ('{"Q": [[1, true]], "K": [[1, 1]], "V": [[1]]}', "holds True"),
        ('{"Q": [[1], [1, 2]], "K": [[1]], "V": [[1]]}', "different lengths"),
        ('{"Q": [[1, 2]], "K": [[1]], "V": [[1]]}', "K has 1 columns but Q has 2"),
        ('{"Q": [[1]], "K": [[1]], "V": [[1]], "query_tokens": ["a", "b"]}', "one token per"),
        ('{"Q": [[1]], "K": [[1]], "V": [[1]], "settings": [1]}', "must be an object"),
        (json.dumps({"Q": [[1] * 65], "K": [[1]], "V": [[1]]}), "larger than 16×64"),
        ('{"Q": [[1]], "K": [[1]], "V": [[1e999]]}', "finite"),
        (" " * (MAX_UPLOAD_BYTES + 1), "at most"),
    ],
)
def test_json_reader_says_what_to_fix(document, message):
    with pytest.raises(AttentionInputError, match=message):
        json_to_example(document)


def test_matrix_role_from_file_names():
    assert matrix_role("q.csv") == "Q"
    assert matrix_role("sdpa-K.csv") == "K"
    assert matrix_role("my values_v.CSV") == "V"
    assert matrix_role("data/exercise 3 q.csv") == "Q"
    assert matrix_role("queries.csv") is None
    assert matrix_role("sdpa-weights.csv") is None


def test_combine_upload_replaces_only_the_uploaded_matrices():
    current = three_token_example()
    new_q = b"token,d1,d2\nx,2,0\ny,0,2\n"
    out = combine_upload([("q.csv", new_q)], current).example
    np.testing.assert_array_equal(out.q, [[2, 0], [0, 2]])
    np.testing.assert_array_equal(out.k, current.k)
    np.testing.assert_array_equal(out.v, current.v)
    assert out.query_labels == ("x", "y") and out.key_labels == current.key_labels

    k_and_v = [("k.csv", b"1,0\n0,1\n"), ("v.csv", b"token,d1\na,1\nb,2\n")]
    out = combine_upload(k_and_v, current).example
    np.testing.assert_array_equal(out.v, [[1], [2]])
    assert out.key_labels == ("a", "b")  # V's labels name the keys when K has none

    exported = example_to_json(current, settings={"causal": True}).encode()
    uploaded = combine_upload([("example.json", exported)], current)
    assert uploaded.settings == {"causal": True}
    np.testing.assert_array_equal(uploaded.example.v, current.v)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([], "No file"),
        ([("q.txt", b"1")], "neither a .csv nor a .json"),
        ([("x.csv", b"1")], "Is x.csv Q, K or V"),
        ([("q.csv", b"1"), ("Q.csv", b"2")], "Two files hold Q"),
        ([("a.json", b"{}"), ("q.csv", b"1")], "not both"),
        ([("q.csv", b"\xff\xfe\x00")], "not UTF-8"),
        ([("q.csv", b"1" * (MAX_UPLOAD_BYTES + 1))], "files up to"),
        ([("q.csv", b"1,2,3\n")], "K has 2 columns but Q has 3.*K, V kept from the page"),
    ],
)
def test_combine_upload_says_what_to_fix(files, message):
    with pytest.raises(AttentionInputError, match=message):
        combine_upload(files, three_token_example())


def test_clean_settings_keeps_valid_values_and_explains_the_rest():
    kept, refused = clean_settings(
        {"scoring": "cosine", "causal": True, "tau": 0.5, "scale": 3, "scaling": "yes",
         "extra": 1},
        choices={"scoring": ["dot_product", "cosine"]},
        flags=["causal", "scaling"],
        ranges={"tau": (0.1, 5.0)},
    )  # fmt: skip
    assert kept == {"scoring": "cosine", "causal": True, "tau": 0.5}
    assert refused == ["scaling='yes' is not true or false"]
    kept, refused = clean_settings(
        {"scoring": "evil", "tau": 1e9, "causal": 1},
        choices={"scoring": ["cosine"]},
        flags=["causal"],
        ranges={"tau": (0.1, 5.0)},
    )
    assert kept == {}
    assert len(refused) == 3 and "between 0.1 and 5" in refused[1]
