"""server.frames: a value written as a frame comes back equal, its arrays read-only and each on a
cache line of one buffer; frames back to back on one stream each come back whole; a frame cut
short is an error, not zeros."""

import io

import numpy as np
import pytest

from server.frames import read_frame, read_result, write_frame, write_result


def test_arrays_come_back_equal_read_only_and_aligned(tmp_path):
    sent = {
        "embed": np.arange(7 * 3, dtype=np.uint16).reshape(7, 3),  # bfloat16 bits, odd bytes
        "norm": np.linspace(-1, 1, 5, dtype=np.float32),
        "rows": [np.full((2, 2), 7.5), np.zeros(0, dtype=np.int64)],
        "text": "kept in the pickle",
    }
    write_result(tmp_path / "result", sent)
    back = read_result(tmp_path / "result")
    for name in ("embed", "norm"):
        np.testing.assert_array_equal(back[name], sent[name])
        assert back[name].dtype == sent[name].dtype
        assert not back[name].flags.writeable and back[name].flags.aligned
        # Each array on a cache line of one buffer, as far from the first as a multiple of 64.
        assert (back[name].ctypes.data - back["embed"].ctypes.data) % 64 == 0
    np.testing.assert_array_equal(back["rows"][0], sent["rows"][0])
    assert back["rows"][1].shape == (0,) and back["text"] == "kept in the pickle"


def test_a_result_file_cut_short_is_an_error_not_zeros(tmp_path):
    write_result(tmp_path / "result", {"weights": np.ones(1000, dtype=np.float32)})
    whole = (tmp_path / "result").read_bytes()
    (tmp_path / "result").write_bytes(whole[:-100])
    with pytest.raises(EOFError, match="ended before its arrays did"):
        read_result(tmp_path / "result")


def test_frames_back_to_back_on_one_stream_each_come_back_whole_and_aligned():
    stream = io.BytesIO()
    first = {"odd": np.arange(5, dtype=np.uint8), "rows": np.ones((3, 7), np.float32)}
    write_frame(stream, first)
    write_frame(stream, ("no arrays", 3))
    write_frame(stream, np.arange(10_000, dtype=np.float64))
    stream.seek(0)
    back = read_frame(stream)
    np.testing.assert_array_equal(back["odd"], first["odd"])
    np.testing.assert_array_equal(back["rows"], first["rows"])
    assert (back["rows"].ctypes.data - back["odd"].ctypes.data) % 64 == 0
    assert read_frame(stream) == ("no arrays", 3)
    np.testing.assert_array_equal(read_frame(stream), np.arange(10_000, dtype=np.float64))
    with pytest.raises(EOFError):
        read_frame(stream)
