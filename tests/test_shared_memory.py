"""server.shared_memory: a value written into a memfd comes back from every mapping of it equal,
its arrays read-only views of the mapping on cache lines, and stays readable once the descriptor
is closed."""

import os

import numpy as np
import pytest

from server.shared_memory import (
    map_shared,
    new_shared_memory,
    shared_memory_available,
    write_shared,
)

pytestmark = pytest.mark.skipif(not shared_memory_available(), reason="no memfd (not Linux)")


def test_every_mapping_reads_the_value_in_place_read_only_and_aligned():
    sent = {"odd": np.arange(5, dtype=np.uint8), "rows": np.ones((3, 7), np.float32), "n": 3}
    descriptor = new_shared_memory()
    try:
        write_shared(descriptor, sent)
        first, second = map_shared(descriptor), map_shared(descriptor)
    finally:
        os.close(descriptor)  # the mappings keep the memory
    for back in (first, second):
        assert back["n"] == 3
        for name in ("odd", "rows"):
            np.testing.assert_array_equal(back[name], sent[name])
            assert not back[name].flags.writeable and back[name].ctypes.data % 64 == 0
        assert not back["rows"].flags.owndata  # a view of the mapping, not a copy
