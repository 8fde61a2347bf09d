"""The masking lab's running example: the sentence its tokens come from, the pad token that
stands in for a padded position, and the width of its random Q, K and V."""

from __future__ import annotations

from collections.abc import Collection

SENTENCE = ("the", "cat", "sat", "on", "the", "mat", "and", "slept")
PAD = "<pad>"
D_K = 4


def tokens(n: int, padding: Collection[int] = ()) -> list[str]:
    """The first `n` words of SENTENCE, with PAD at the 0-based positions in `padding`."""
    return [PAD if i in padding else SENTENCE[i] for i in range(n)]
