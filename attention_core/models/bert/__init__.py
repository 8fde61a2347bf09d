"""A pretrained BERT encoder (all-MiniLM-L6-v2) run by our own NumPy attention code.

A module per job, like Hugging Face's ``models/bert`` folder:

    config     BertConfig: the architecture numbers of ``config.json``, checked
    weights    BertWeights (embeddings, layers, LayerNormParams): the state dict, checked
    tokenizer  TokenizedText, tokenize, leading_words: the exact tokens the model reads
    forward    BertModel, run_bert, run_bert_ids -> BertTrace of BertLayerSteps: the encoder
    load       load_bert: a checkpoint directory -> BertModel

The shared pieces (erf, gelu, layer_norm) are in ``models/layers.py``. Loading needs
``safetensors`` and ``tokenizers`` (imported when a model is loaded, see ``loading.py``); torch
and transformers are never imported here.
"""

from .config import BertConfig
from .forward import BertLayerSteps, BertModel, BertTrace, run_bert, run_bert_ids
from .load import load_bert
from .tokenizer import TokenizedText
from .weights import BertEmbeddingWeights, BertLayerWeights, BertWeights, LayerNormParams

__all__ = [
    "BertConfig",
    "BertEmbeddingWeights",
    "BertLayerSteps",
    "BertLayerWeights",
    "BertModel",
    "BertTrace",
    "BertWeights",
    "LayerNormParams",
    "TokenizedText",
    "load_bert",
    "run_bert",
    "run_bert_ids",
]
