"""The probe page's controls: their defaults (a link without parameters opens on a telling
example) and the ways of ablating."""

from __future__ import annotations

from ui.models import minilm

DEFAULT_TEXT = minilm.DEFAULT_TEXT
# Layer 4, head 2 sends "it" (token 11) to "animal"; replacing "tired" (token 14) by "wide"
# takes 0.40 of that weight away, and "street" gains 0.07: the model's reading of "it" moves.
DEFAULT_LAYER, DEFAULT_HEAD, DEFAULT_TOKEN = 4, 2, 11
DEFAULT_ABLATE, DEFAULT_MODE, DEFAULT_REPLACEMENT = 14, "replace", "wide"
# Removing layer 3, head 2 moves layer 4, head 2's weights by up to 0.22 (the most of any head
# in layers 1 to 3), while the sentence embedding keeps a cosine of 0.997.
DEFAULT_ABLATED_LAYER, DEFAULT_ABLATED_HEAD = 3, 2
MODES = {
    "remove": "Remove it",
    "mask": "Hide it (mask)",
    "replace": "Replace it",
    "head": "Remove a head",
}
