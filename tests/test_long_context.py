"""attention_core.models.long_context: the perplexity by hand, each variant's mask by its
definition, and the three passes against transformers given the same masks, on a held-out text
(not the page's default)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_core import AttentionInputError, causal_mask
from attention_core.models.llama import load_llama
from attention_core.models.long_context import context_pass, perplexity, variant_mask
from tests.hf_models import smollm2_gguf_or_skip, smollm2_reference

# Jane Austen, "Pride and Prejudice" (1813), Chapter 1: public domain, held out from the page.
AUSTEN = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered the rightful property of some one or other of "
    "their daughters. My dear Mr. Bennet, said his lady to him one day, have you heard that "
    "Netherfield Park is let at last? Mr. Bennet replied that he had not. But it is, returned "
    "she; for Mrs. Long has just been here, and she told me all about it."
)


def test_perplexity_by_hand():
    # Losses log 2 and log 8 from query 1 on: the mean is log 4, the perplexity 4.
    losses = [5.0, math.log(2), math.log(8)]
    assert perplexity(losses, 1) == pytest.approx(4.0)
    assert perplexity([0.0, 0.0], 0) == 1.0  # every token certain
    with pytest.raises(AttentionInputError, match="from a query at position 3 or later"):
        perplexity(losses, 3)


def test_each_variant_is_its_mask():
    assert variant_mask("full", 6, 2, 1) is None
    i, j = np.arange(6)[:, None], np.arange(6)[None, :]
    np.testing.assert_array_equal(variant_mask("window", 6, 2, 1), (j <= i) & (i - j < 2))
    sinks = variant_mask("sinks", 6, 2, 1)
    np.testing.assert_array_equal(sinks, (j <= i) & ((i - j < 2) | (j < 1)))
    assert (sinks <= causal_mask(6)).all()
    with pytest.raises(AttentionInputError, match="not a variant"):
        variant_mask("ring", 6, 2, 1)


@pytest.fixture(scope="module")
def models():
    path = smollm2_gguf_or_skip()
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return load_llama(path), smollm2_reference(path)[0]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["full", "window", "sinks"])
def test_the_passes_match_transformers_given_the_same_mask(models, variant):
    import torch

    model, hf = models
    ids = np.asarray(model.encode(AUSTEN))
    window, sinks = 24, 2
    ours = context_pass(model, ids, variant, window, sinks)
    allowed = variant_mask(variant, len(ids), window, sinks)
    kwargs = {}
    if allowed is not None:
        kwargs["attention_mask"] = torch.where(torch.from_numpy(allowed), 0.0, -torch.inf)[
            None, None
        ]
    with torch.no_grad():
        logits = hf(torch.from_numpy(ids)[None], use_cache=False, **kwargs).logits[0].double()
    expected = torch.nn.functional.cross_entropy(
        logits[:-1], torch.from_numpy(ids[1:]), reduction="none"
    ).numpy()
    # float32 sums of ~50,000 logits: a loss of 15 nats agrees to ~4e-4 (rtol 3e-5).
    np.testing.assert_allclose(ours.losses, expected, atol=1e-4, rtol=1e-4)
    assert perplexity(ours.losses, window) == pytest.approx(
        math.exp(expected[window:].mean()), rel=1e-4
    )
    assert ours.first_weights.shape == (30, 9, 16)
