"""A tiny checkpoint of each family, built by transformers (or, for BERT, written as
transformers' files) in a folder as ``save_pretrained`` leaves it: what a teacher's own model
looks like to the app, in a few kilobytes.

    write_tiny(family, folder)   "llama", "qwen2", "gpt2" or "bert": config.json,
                                 model.safetensors and tokenizer.json in ``folder``
"""

from __future__ import annotations

from pathlib import Path

FAMILIES = ("llama", "qwen2", "gpt2", "bert")


def write_tiny(family: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if family == "bert":
        from tests.test_bert import write_tiny_checkpoint

        return write_tiny_checkpoint(folder)
    if family == "gpt2":
        from tests.test_gpt2 import write_tiny_gpt2

        return write_tiny_gpt2(folder)
    from tests.test_decoder_families import _hf_model, _tokenizer

    case = {"llama": "llama_untied", "qwen2": "qwen2_tied"}[family]
    _hf_model(case).save_pretrained(folder)
    _tokenizer().save_pretrained(folder)
    return folder
