"""What the long-context page's default link shows, prepared once SmolLM2 is loaded
(ui.models.smollm.default_view): the default passage read three ways and its KV experiments,
the page's seven passes, computed before a talk's audience opens the link."""

from __future__ import annotations

from attention_core.lessons.passages import ALICE
from attention_core.models.decoder import DecoderModel
from ui.long_context import data, inputs, kv_cache
from ui.models import smollm


@smollm.default_view
def prepare(model: DecoderModel) -> None:
    ids, _ = inputs.text_ids(model, ALICE)
    data.three_passes(model, ids, inputs.DEFAULT_WINDOW, inputs.DEFAULT_SINKS)
    kv_cache.experiment(model, ids)
