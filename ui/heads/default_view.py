"""What the heads page's default link shows, prepared once SmolLM2 is loaded
(ui.models.smollm.default_view): the default prompt's logit lens and the attribution of its
likeliest next token, and SmolLM2's heads found by the default probe."""

from __future__ import annotations

from attention_core.models.llama import LlamaModel
from ui.heads import data, inputs
from ui.models import smollm


@smollm.default_view
def prepare(model: LlamaModel) -> None:
    ids, _ = inputs.prompt_ids(model, inputs.DEFAULT_PROMPT)
    readout = data.prompt_readout(model, ids, len(ids) - 1)
    data.attribution(model, readout, int(readout.next_logits.argmax()), None)
    data.probe_roles("smollm2", 0, inputs.DEFAULT_LENGTH, model)
