"""What the tests of listed checkpoints on the real-model pages share: transformers on the same
files, and the checks of what a page shows against it.

    causal_lm(folder)                   transformers' model of the folder, float32, eager
    encode(folder, text, special)       transformers' tokens of `text` by the folder's
                                        tokenizer.json
    table(at, column)                   the page's table that has the column `column`
    check_next_tokens(at, p)            the decoder page's next-token table: p's likeliest
                                        tokens and their probabilities, rounded as shown
    open_heads_page(folder, name, prompt)   the heads page on a listed model, its lens's last
                                        stage checked against transformers' own prediction
    check_patching_lds(folder, name)    the patching page's LD of each prompt, transformers'
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.app_pages import open_model_page
from tests.plotly_json import chart, plotly_array


def causal_lm(folder: Path):
    import torch
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def encode(folder: Path, text: str, special: bool = False) -> list[int]:
    """transformers' tokens of `text` by the folder's tokenizer.json (AutoTokenizer would build
    the family's own tokenizer class around a tiny WordLevel vocabulary, and get it wrong)."""
    import transformers

    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    return tokenizer(text, add_special_tokens=special)["input_ids"]


def table(at, column: str):
    return next(frame.value for frame in at.dataframe if column in frame.value.columns)


def check_next_tokens(at, p: np.ndarray) -> None:
    """The page's next-token table lists the likeliest tokens of `p` `(vocab,)` float64, in
    order, with their probabilities to the shown 4 decimals."""
    shown = table(at, "probability")
    best = np.argsort(-p, kind="stable")[: len(shown)]
    assert shown["id"].tolist() == best.tolist()
    np.testing.assert_allclose(shown["probability"], np.round(p[best], 4), atol=1e-4)


def open_heads_page(folder: Path, name: str, prompt: str):
    """The heads page on the listed model `name` and transformers on `prompt`: (the page, the
    model, its outputs, the likeliest next token, the lens's probabilities of it by stage),
    the lens's last stage checked against transformers' own prediction."""
    import torch

    at = open_model_page("pages/what_heads_do.py", {"model": name, "prompt": prompt}, 240)
    assert not at.error, [e.value for e in at.error]
    hf = causal_lm(folder)
    ids = encode(folder, prompt)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    p = torch.softmax(out.logits[0, -1].double(), -1)
    top = int(p.argmax())
    lens = plotly_array(chart(at, "heads.lens")["data"][0]["y"])
    assert lens[-1] == pytest.approx(float(p[top]), abs=1e-4)  # the lens's last stage
    return at, hf, out, top, lens


def check_patching_lds(folder: Path, name: str) -> None:
    """The patching page's LD of each prompt on the listed model `name`: transformers'
    logit(" the") − logit(" a") (each answer's first token) after it."""
    import torch

    clean, corrupt = "the cat sat on the mat", "the dog sat on the mat"
    at = open_model_page("pages/carries_the_answer.py", {"model": name, "clean": clean,
                         "corrupt": corrupt, "answer": " the", "wrong": " a"}, 240)  # fmt: skip
    assert not at.error, [e.value for e in at.error]
    hf = causal_lm(folder)
    answer, wrong = (encode(folder, word)[0] for word in (" the", " a"))
    lds = []
    for text in (clean, corrupt):
        with torch.no_grad():
            logits = hf(torch.tensor([encode(folder, text)])).logits[0, -1]
        lds.append(float(logits[answer] - logits[wrong]))
    shown = table(at, "prompt")
    ld_column = next(c for c in shown.columns if c.startswith("LD"))
    np.testing.assert_allclose(shown[ld_column], np.round(lds, 3), atol=1e-3)
