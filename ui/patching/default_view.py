"""What the patching page's default link shows, prepared once SmolLM2 is loaded
(ui.models.smollm.default_view): the default pair's two passes, its residual map and its head
maps, computed before a talk's audience opens the link."""

from __future__ import annotations

from attention_core.models.decoder import DecoderModel
from ui.models import smollm
from ui.patching import data, inputs


@smollm.default_view
def prepare(model: DecoderModel) -> None:
    read = inputs.read_pair(model, inputs.DEFAULTS)
    data.pair_runs(model, read.pair)
    data.stream_map(model, read.pair, "resid")
    for last_only in (False, True):
        data.head_map(model, read.pair, last_only)
