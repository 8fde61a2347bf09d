"""A tiny checkpoint of each family, built by transformers (or, for BERT, written as
transformers' files) in a folder as ``save_pretrained`` leaves it: what a teacher's own model
looks like to the app, in a few kilobytes.

    write_tiny(family, folder)   "llama", "qwen2", "gpt2", "bert" or one of
                                 ``tiny_decoders.RECENT`` ("qwen3" …): config.json,
                                 model.safetensors and tokenizer.json in ``folder``; also
                                 "gpt2-other": a GPT-2 as transformers initialises one from a
                                 config none of our tests chose its numbers for (three layers
                                 of three heads, exact GELU, layer-scaled scores, an untied
                                 head, no end token, 32 positions)
"""

from __future__ import annotations

from pathlib import Path

FAMILIES = ("llama", "qwen2", "gpt2", "bert")
# transformers' own GPT2Config defaults but for these: small, and off GPT-2's beaten track.
OTHER_GPT2 = {
    "vocab_size": 300,
    "n_positions": 32,
    "n_embd": 24,
    "n_layer": 3,
    "n_head": 3,
    "n_inner": 56,
    "activation_function": "gelu",
    "scale_attn_by_inverse_layer_idx": True,
    "layer_norm_epsilon": 1e-4,
    "tie_word_embeddings": False,
    "bos_token_id": None,
    "eos_token_id": None,
}


def write_tiny(family: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if family == "bert":
        from tests.test_bert import write_tiny_checkpoint

        return write_tiny_checkpoint(folder)
    if family == "gpt2":
        from tests.test_gpt2 import write_tiny_gpt2

        return write_tiny_gpt2(folder)
    if family == "gpt2-other":
        return _other_gpt2(folder)
    from tests.tiny_decoders import RECENT, save_decoder, word_tokenizer

    if family in RECENT:
        save_decoder(family, folder)
        return folder
    from tests.test_decoder_families import _hf_model

    case = {"llama": "llama_untied", "qwen2": "qwen2_tied"}[family]
    _hf_model(case).save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    return folder


def _other_gpt2(folder: Path) -> Path:
    """OTHER_GPT2 with transformers' own initialisation (seeded), and the tiny GPT-2's
    byte-level tokenizer."""
    import torch
    import transformers

    from tests.test_gpt2 import _tiny_tokenizer

    torch.manual_seed(1)
    config = transformers.GPT2Config(**OTHER_GPT2)
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(folder)
    transformers.PreTrainedTokenizerFast(tokenizer_object=_tiny_tokenizer()).save_pretrained(folder)
    return folder
