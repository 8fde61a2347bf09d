"""GPT-2 (OpenAI 2019; ``openai-community/gpt2`` and its sizes) run by our own NumPy code, a
module per job, in the order a pass needs them:

    config   the architecture numbers (``GPT2Config``), checked; ``parameter_count``
    weights  the tensors in float32, Conv1D's `(in, out)` turned to nn.Linear's `(out, in)`
    model    the loaded model (config, weights, tokenizer) and ``load_gpt2``
    steps    what a pass returns: the KV cache, each block's steps, the trace
    forward  the forward pass, its formula in the docstring: ``run_gpt2`` (with run_llama's
             keep, start and tokens), and ``read_text``, a text read keeping no steps

A Hugging Face folder is read by ``attention_core.models.folder`` (``check_folder``,
``read_tensors``) and ``loading.read_tokenizer``, as every family's is. The shared pieces
(LayerNorm, GELU and its tanh form) are in ``attention_core.models.layers``; the attention is
``attention_core.decoding.decode_step`` over the one SDPA. Importing this package needs NumPy
only.
"""

from .config import GPT2Config, parameter_count
from .forward import read_text, run_gpt2
from .model import GPT2Model, load_gpt2
from .steps import GPT2Cache, GPT2LayerSteps, GPT2Trace
from .weights import GPT2LayerWeights, GPT2Weights

__all__ = [
    "GPT2Cache",
    "GPT2Config",
    "GPT2LayerSteps",
    "GPT2LayerWeights",
    "GPT2Model",
    "GPT2Trace",
    "GPT2Weights",
    "load_gpt2",
    "parameter_count",
    "read_text",
    "run_gpt2",
]
