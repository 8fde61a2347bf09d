"""Real pretrained models run by attention_core's own NumPy attention.

`load_bert()` finds and loads all-MiniLM-L6-v2 (see `loading.find_model_dir` for where it looks);
`run_bert(model, text)` returns a `BertTrace` with every layer's q/k/v, attention weights
`(layer, head, q_pos, k_pos)` and hidden states. Importing this package needs NumPy only;
safetensors and tokenizers are imported when a model is loaded.
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
    "ModelFileError",
    "ModelLocation",
    "ModelNotFoundError",
    "TokenizedText",
    "find_model_dir",
    "load_bert",
    "run_bert",
    "run_bert_ids",
]
