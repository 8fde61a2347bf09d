"""A llama-style decoder run by our own NumPy attention code: SmolLM2-135M-Instruct (the app's
model), and any Llama, Qwen2, Mistral, Qwen3, SmolLM3, OLMo 2, Gemma 2 or Gemma 3 checkpoint in
a Hugging Face directory (one forward pass: each family is llama with a few pieces switched on in
its ``LlamaConfig``; ``config.model_type`` names the family). A module per job, in the order a
pass needs them:

    files       find and read the checkpoint: a GGUF file or a Hugging Face directory
    config      the architecture numbers (``LlamaConfig``), what is refused, ``parameter_count``
    weights     the tensors, named and shaped as ``LlamaForCausalLM``'s, stored bfloat16
    prompt      a text tokenized, raw or in the chat template, within the prompt limits
    model       the loaded model (config, weights, tokenizer) and ``load_llama``
    steps       what a pass returns: the KV cache, each layer's steps, the trace
    forward     the forward pass, its formula in the docstring: ``run_llama``, ``read_text``
    choices     one head's last query through its layer's choices (QK-norm, rotation or none,
                scale, soft cap, window), for the decoder page

The shared pieces (RMSNorm, SiLU) are in ``attention_core.models.layers``. Importing this
package needs NumPy only.
"""

from ..layers import rms_norm, silu
from .config import SUPPORTED_FAMILIES, LlamaConfig, parameter_count
from .forward import MAX_CONTEXT_TOKENS, MAX_SCORED_TOKENS, read_text, run_llama
from .model import LlamaModel, load_llama
from .prompt import (
    DEFAULT_SYSTEM_PROMPT,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKENS,
    Prompt,
    chat_text,
)
from .steps import KeptSteps, LlamaCache, LlamaLayerSteps, LlamaTrace
from .weights import LlamaWeights

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "MAX_CONTEXT_TOKENS",
    "MAX_PROMPT_CHARS",
    "MAX_PROMPT_TOKENS",
    "MAX_SCORED_TOKENS",
    "SUPPORTED_FAMILIES",
    "KeptSteps",
    "LlamaCache",
    "LlamaConfig",
    "LlamaLayerSteps",
    "LlamaModel",
    "LlamaTrace",
    "LlamaWeights",
    "Prompt",
    "chat_text",
    "load_llama",
    "parameter_count",
    "read_text",
    "rms_norm",
    "run_llama",
    "silu",
]
