"""Independent references for what the browser tests read off the pages."""

from __future__ import annotations

from functools import cache


@cache
def _bert_tokenizer():
    # transformers' pure-Python WordPiece tokenizer over the model's vocab.txt: a different
    # implementation from the `tokenizers` library the app reads tokenizer.json with.
    from transformers import BertTokenizer

    from attention_core.models.loading import find_model_dir

    vocab = find_model_dir().path / "vocab.txt"
    return BertTokenizer(str(vocab), do_lower_case=True)


def bert_tokens(text: str) -> list[str]:
    """The tokens all-MiniLM-L6-v2 reads for `text`, with [CLS] and [SEP] around them."""
    return ["[CLS]", *_bert_tokenizer().tokenize(text), "[SEP]"]


@cache
def _bert_reference():
    from transformers import BertModel

    from attention_core.models.loading import find_model_dir

    path = find_model_dir().path
    return BertModel.from_pretrained(str(path), attn_implementation="eager").eval()


def bert_attention(text: str):
    """transformers' attention weights `(layer, head, n, n)` of all-MiniLM-L6-v2 for `text`."""
    import numpy as np
    import torch

    tokenizer = _bert_tokenizer()
    ids = torch.tensor([tokenizer.convert_tokens_to_ids(bert_tokens(text))])
    with torch.inference_mode():
        out = _bert_reference()(ids, output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])
