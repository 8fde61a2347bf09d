"""What the pretrained page calls each head-pattern label, and what each score measures.

The detectors themselves are `attention_core.head_patterns`; these are only their names.
"""

from __future__ import annotations

PATTERN_TITLES = {
    "previous": "previous token",
    "next": "next token",
    "self": "itself",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "broad": "broad",
    "mixed": "mixed",
}


# Shorter names for the cells of the head-role grid.
ROLE_TITLES = {**PATTERN_TITLES, "previous": "previous", "next": "next"}


PATTERN_MEANINGS = {
    "previous": "mean weight a query gives the token just before it",
    "next": "mean weight a query gives the token just after it",
    "self": "mean weight a query gives its own token",
    "cls": "mean weight a query gives [CLS] (the first token)",
    "sep": "mean weight a query gives [SEP] (the last token)",
    "broad": "mean entropy of a row over log(number of tokens): 1 = spread evenly",
}
