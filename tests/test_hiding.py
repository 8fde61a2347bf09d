"""Tests for attention_core/models/hiding.py.

References, all independent of the code under test:
- ablation: two forward passes run here, and Hugging Face ``transformers.BertModel`` (eager) on
  the ablated input, pooled like sentence-transformers (mean over the attention mask, then L2);
  head ablation against transformers 4's ``head_mask`` (tests/hf_head_mask.py) and by hand;
- the decoder's next token: two forward passes of our own SmolLM2 run here (transformers'
  SmolLM2 is compared in test_llama.py);
- every key hidden in turn: one pass per key run here, the KL by torch's ``kl_div`` and the
  cosine written out, and one hidden key against transformers' SmolLM2 with its attention mask.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.models.hiding import (
    ablate_head,
    ablate_token,
    decoder_hiding_effects,
    encoder_hiding_effects,
    next_token_change,
    remove_head_mask,
    replacement_id,
    without_key,
)

# -- ablation on the real model ------------------------------------------------------------------

TIRED = "The animal didn't cross the street because it was too tired."
IT = 10  # "it": [CLS] the animal didn ' t cross the street because it ...


@pytest.fixture(scope="module")
def real():
    from attention_core.models import load_bert

    return load_bert()


@pytest.fixture(scope="module")
def real_hf(real):
    from transformers import BertModel as HFBertModel

    return HFBertModel.from_pretrained(str(real.location.path), attn_implementation="eager").eval()


def hf_pass(hf_model, ids: np.ndarray, mask: np.ndarray | None = None):
    """transformers' attentions `(layer, head, n, n)` and its sentence-transformers embedding."""
    import torch

    mask = np.ones_like(ids) if mask is None else mask.astype(np.int64)
    with torch.inference_mode():
        out = hf_model(
            torch.tensor(ids)[None], attention_mask=torch.tensor(mask)[None], output_attentions=True
        )
    hidden = out.last_hidden_state[0]
    m = torch.tensor(mask, dtype=hidden.dtype)[:, None]
    pooled = (hidden * m).sum(0) / m.sum()
    embedding = torch.nn.functional.normalize(pooled, dim=0)
    return np.stack([a[0].numpy() for a in out.attentions]), embedding.numpy().astype(np.float64)


@pytest.mark.slow
def test_ablation_difference_is_two_separate_forward_passes(real):
    from attention_core.models import run_bert_ids

    ablation = ablate_token(real, TIRED, IT, "remove")
    ids = real.tokenize(TIRED).input_ids
    full = run_bert_ids(real, ids).attention_weights.astype(np.float64)
    short = run_bert_ids(real, np.delete(ids, IT)).attention_weights.astype(np.float64)
    # Positions after "it" move up one; map them back by hand and subtract.
    old = [i for i in range(len(ids)) if i != IT]
    for a, i in enumerate(old):
        for b, j in enumerate(old):
            np.testing.assert_allclose(
                ablation.difference[:, :, i, j], short[:, :, a, b] - full[:, :, i, j], atol=1e-7
            )
    assert np.isnan(ablation.difference[:, :, IT, :]).all()
    assert np.isnan(ablation.difference[:, :, :, IT]).all()
    assert "it" not in ablation.tokens_after and len(ablation.tokens_after) == len(ids) - 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["remove", "mask", "replace"])
def test_ablated_pass_agrees_with_transformers(real, real_hf, mode):
    ablation = ablate_token(real, TIRED, IT, mode, replacement="dog")
    ids = real.tokenize(TIRED).input_ids
    n = len(ids)
    attend = np.ones(n, dtype=bool)
    if mode == "remove":
        ref_ids, kept = np.delete(ids, IT), np.delete(np.arange(n), IT)
        ref_weights, ref_embedding = hf_pass(real_hf, ref_ids)
    elif mode == "mask":
        attend[IT] = False
        kept = np.arange(n)
        ref_weights, ref_embedding = hf_pass(real_hf, ids, attend)
        assert np.all(ablation.weights_after[:, :, :, IT] == 0)  # nobody looks at it
    else:
        ref_ids = ids.copy()
        ref_ids[IT] = real.tokenizer.token_to_id("dog")
        kept = np.arange(n)
        ref_weights, ref_embedding = hf_pass(real_hf, ref_ids)
        assert ablation.tokens_after[IT] == "dog"
    np.testing.assert_allclose(
        ablation.weights_after[:, :, kept[:, None], kept[None, :]], ref_weights, atol=1e-4
    )
    np.testing.assert_allclose(ablation.embedding_after, ref_embedding, atol=1e-4)
    before_weights, before_embedding = hf_pass(real_hf, ids)
    np.testing.assert_allclose(ablation.weights_before, before_weights, atol=1e-4)
    np.testing.assert_allclose(ablation.embedding_before, before_embedding, atol=1e-4)
    assert ablation.cosine == pytest.approx(float(before_embedding @ ref_embedding), abs=1e-4)


@pytest.mark.slow
def test_the_first_token_may_be_hidden_and_one_word_removed(real):
    hidden = ablate_token(real, TIRED, 0, "mask")
    assert hidden.position == 0 and np.all(hidden.weights_after[:, :, :, 0] == 0)
    # "Hi" is [CLS] hi [SEP]: without the word, the two special tokens still run.
    removed = ablate_token(real, "Hi", 1, "remove")
    assert removed.tokens_after == ("[CLS]", "[SEP]")
    assert np.isfinite(removed.cosine)


@pytest.mark.slow
def test_ablation_rejects_bad_position_mode_and_replacement(real):
    with pytest.raises(AttentionInputError, match="has 16 tokens"):
        ablate_token(real, TIRED, 16)
    with pytest.raises(AttentionInputError, match="mode"):
        ablate_token(real, TIRED, 1, "drop")
    with pytest.raises(AttentionInputError, match="one word piece"):
        ablate_token(real, TIRED, 1, "replace", replacement="two words")


# -- head ablation -------------------------------------------------------------------------------


def test_without_key_lets_every_key_in_but_the_hidden_one():
    assert without_key(4, 2).tolist() == [True, True, False, True]
    assert without_key(1, 0).tolist() == [False]


def test_remove_head_mask_zeroes_one_entry_and_checks_it_exists():
    expected = np.ones((3, 4))
    expected[1, 2] = 0.0
    np.testing.assert_array_equal(remove_head_mask(3, 4, 1, 2), expected)
    corner = np.ones((2, 2))
    corner[0, 0] = 0.0
    np.testing.assert_array_equal(remove_head_mask(2, 2, 0, 0), corner)
    for layer, head in [(3, 0), (0, 4), (-1, 0), (0, -1)]:
        with pytest.raises(AttentionInputError, match="does not exist"):
            remove_head_mask(3, 4, layer, head)


LAYER, HEAD = 2, 3  # layer 3, head 4 (from 1): d_head 32, so features 96..127 of the concat


@pytest.mark.slow
def test_head_ablation_is_two_forward_passes_and_zeroes_the_head_by_hand(real):
    from attention_core.models import run_bert_ids

    ablation = ablate_head(real, TIRED, LAYER, HEAD)
    ids = real.tokenize(TIRED).input_ids
    plain = run_bert_ids(real, ids)
    mask = np.ones((6, 12))
    mask[LAYER, HEAD] = 0.0
    ablated = run_bert_ids(real, ids, head_mask=mask)
    expected = ablated.attention_weights.astype(np.float64) - plain.attention_weights
    np.testing.assert_allclose(ablation.difference, expected, atol=1e-7)
    # Nothing below the head's output changes: its own layer and the ones before are identical.
    assert np.all(ablation.difference[: LAYER + 1] == 0)
    assert np.abs(ablation.difference[LAYER + 1 :]).max() > 1e-3
    # By hand: the head's 32 features of the concat are 0, and the layer's output is the
    # unablated concat with those features zeroed, through W_o.
    steps = ablated.layers[LAYER].attention
    np.testing.assert_array_equal(steps.concat[:, 96:128], 0.0)
    concat = plain.layers[LAYER].attention.concat.copy()
    concat[:, 96:128] = 0.0
    w = real.weights.layers[LAYER].attention
    np.testing.assert_allclose(steps.output, concat @ w.w_o.T + w.b_o, atol=1e-5)
    assert (ablation.mode, ablation.position, ablation.head) == ("head", None, (LAYER, HEAD))
    assert ablation.tokens_after == ablation.tokens
    # Sentence embeddings and per-token turns, pooled by hand.
    before = plain.last_hidden_state.astype(np.float64).mean(0)
    after = ablated.last_hidden_state.astype(np.float64).mean(0)
    cosine = before @ after / np.linalg.norm(before) / np.linalg.norm(after)
    assert ablation.cosine == pytest.approx(cosine, abs=1e-9)
    a, b = plain.last_hidden_state, ablated.last_hidden_state
    turn = 1 - np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(ablation.token_change, turn, atol=1e-6)


@pytest.fixture(scope="module")
def real_hf_head_mask(real):
    from transformers import BertModel as HFBertModel

    from tests.hf_head_mask import use_head_mask

    hf = HFBertModel.from_pretrained(str(real.location.path), attn_implementation="eager").eval()
    use_head_mask(hf)
    return hf


@pytest.mark.slow
def test_head_ablation_matches_transformers_head_mask(real, real_hf_head_mask):
    import torch

    ablation = ablate_head(real, TIRED, LAYER, HEAD)
    ids = real.tokenize(TIRED).input_ids
    mask = torch.ones(6, 12)
    mask[LAYER, HEAD] = 0.0
    with torch.inference_mode():
        out = real_hf_head_mask(torch.tensor(ids)[None], output_attentions=True, head_mask=mask)
    hidden = out.last_hidden_state[0].numpy().astype(np.float64)
    expected = hidden.mean(0) / np.linalg.norm(hidden.mean(0))
    np.testing.assert_allclose(ablation.embedding_after, expected, atol=1e-4)
    reference = np.stack([a[0].numpy() for a in out.attentions])  # (layer, head, n, n)
    # transformers 4 returned the removed head's weights multiplied by 0; ours keep its
    # pattern (the head still computes it), which is the multiplier's only difference.
    assert np.all(reference[LAYER, HEAD] == 0)
    np.testing.assert_allclose(
        ablation.weights_after * mask.numpy()[:, :, None, None], reference, atol=1e-4
    )
    np.testing.assert_array_equal(
        ablation.weights_after[LAYER, HEAD], ablation.weights_before[LAYER, HEAD]
    )


@pytest.mark.slow
def test_head_ablation_rejects_a_missing_head(real):
    with pytest.raises(AttentionInputError, match="layers 1 to 6 and heads 1 to 12"):
        ablate_head(real, TIRED, 6, 0)


@pytest.fixture(scope="module")
def llm():
    from attention_core.models.llama import load_llama

    return load_llama()


PROMPT = "The capital of France is Paris. The capital of Italy is"


def softmax64(logits):
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.slow
def test_next_token_change_is_two_forward_passes_of_our_decoder(llm):
    from attention_core.models.llama import run_llama

    ids = np.asarray(llm.encode(PROMPT))
    n = len(ids)
    plain = run_llama(llm, ids).next_token_logits
    italy = n - 1  # " Italy" is the last word: without it the model cannot say " Rome"
    mask = np.ones((30, 9))
    mask[4, 2] = 0.0
    keep = np.arange(n) != italy
    afters = {
        "remove": run_llama(llm, ids[keep]).next_token_logits,
        "mask": run_llama(llm, ids, attend=keep).next_token_logits,
        "head": run_llama(llm, ids, head_mask=mask).next_token_logits,
    }
    for mode, after in afters.items():
        change = next_token_change(llm, ids, mode, position=italy, layer=4, head=2)
        np.testing.assert_allclose(change.logits_before, plain, atol=1e-6)
        np.testing.assert_allclose(change.logits_after, after, atol=1e-6)
        p, q = softmax64(plain), softmax64(after)
        np.testing.assert_allclose(change.probs_before, p, atol=1e-12)
        np.testing.assert_allclose(change.probs_after, q, atol=1e-12)
        assert change.kl == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-6)
        assert change.kl > 0
        assert change.top_before == int(np.argmax(plain))
        assert change.top_after == int(np.argmax(after))
        assert change.mode == mode
        assert change.position == (None if mode == "head" else italy)
        assert change.head == ((4, 2) if mode == "head" else None)
        expected_ids = ids[keep] if mode == "remove" else ids
        np.testing.assert_array_equal(change.input_ids_after, expected_ids)
    assert llm.token_text(change.top_before) == " Rome"
    removed = next_token_change(llm, ids, "remove", position=italy)
    assert llm.token_text(removed.top_after) != " Rome"


@pytest.mark.slow
def test_next_token_change_rejects_bad_input(llm):
    ids = llm.encode(PROMPT)
    n = len(ids)
    with pytest.raises(AttentionInputError, match=f"has {n} tokens"):
        next_token_change(llm, ids, "remove", position=n)
    with pytest.raises(AttentionInputError, match=f"has {n} tokens"):
        next_token_change(llm, ids, "mask", position=-1)
    with pytest.raises(AttentionInputError, match="mode"):
        next_token_change(llm, ids, "replace", position=0)
    with pytest.raises(AttentionInputError, match="heads 1 to 9"):
        next_token_change(llm, ids, "head", layer=0, head=9)
    with pytest.raises(AttentionInputError, match="one token cannot lose it"):
        next_token_change(llm, ids[:1], "remove", position=0)
    with pytest.raises(AttentionInputError, match="which token"):
        next_token_change(llm, ids, "mask", layer=0, head=0)
    with pytest.raises(AttentionInputError, match="which head"):
        next_token_change(llm, ids, "head", layer=0)
    with pytest.raises(AttentionInputError, match="which head"):
        next_token_change(llm, ids, "head", head=0)
    # Two tokens may lose one, one token may still lose a head, and the last position may go.
    assert next_token_change(llm, ids[:2], "remove", position=0).input_ids_after.tolist() == [
        ids[1]
    ]
    assert next_token_change(llm, ids[:1], "head", layer=0, head=0).kl > 0
    assert next_token_change(llm, ids, "mask", position=n - 1).position == n - 1


@pytest.mark.slow
def test_replacement_words_are_looked_up_as_typed_then_in_lower_case(real):
    # [MASK] exists only as typed (its lower case is no word piece); "Dog" only in lower case.
    assert replacement_id(real, " [MASK] ") == 103
    assert replacement_id(real, "Dog") == real.tokenizer.token_to_id("dog")
    with pytest.raises(AttentionInputError, match=r"“\(nothing\)” is not one word piece"):
        replacement_id(real, "   ")


# -- every key hidden in turn ---------------------------------------------------------------------


@pytest.mark.slow
def test_decoder_hiding_effects_are_the_kl_of_one_pass_per_hidden_key(llm):
    import torch

    from attention_core.models.llama import run_llama

    ids = np.asarray(llm.encode(PROMPT))
    query = 5
    effects = decoder_hiding_effects(llm, ids, query)
    assert effects.shape == (query + 1,)
    seen = ids[: query + 1]
    before = torch.log_softmax(torch.from_numpy(run_llama(llm, seen).next_token_logits).double(), 0)
    for key in range(query + 1):
        attend = np.arange(query + 1) != key
        after = run_llama(llm, seen, attend=attend).next_token_logits
        after = torch.log_softmax(torch.from_numpy(after).double(), 0)
        kl = torch.nn.functional.kl_div(after, before, reduction="sum", log_target=True)
        assert effects[key] == pytest.approx(float(kl), rel=1e-6, abs=1e-9)
    assert (effects > 0).all()
    with pytest.raises(AttentionInputError, match=f"Token {len(ids) + 1} does not exist"):
        decoder_hiding_effects(llm, ids, len(ids))


@pytest.mark.slow
def test_encoder_hiding_effects_are_one_minus_the_cosine_of_one_pass_per_hidden_key(real):
    from attention_core.models import run_bert_ids

    ids = real.tokenize(TIRED).input_ids
    n, query = len(ids), IT
    effects = encoder_hiding_effects(real, ids, query)
    assert effects.shape == (n,)
    before = run_bert_ids(real, ids).last_hidden_state[query].astype(np.float64)
    for key in (0, 3, query, n - 1):
        after = run_bert_ids(real, ids, attend=np.arange(n) != key).last_hidden_state[query]
        after = after.astype(np.float64)
        cosine = before @ after / np.sqrt((before @ before) * (after @ after))
        assert effects[key] == pytest.approx(1.0 - cosine, abs=1e-6)
    # Every key counts for something: hiding any of them turns the top vector of "it".
    assert (effects > 0).all()
    with pytest.raises(AttentionInputError, match=f"Token {n + 1} does not exist"):
        encoder_hiding_effects(real, ids, n)


@pytest.mark.slow
def test_hiding_a_token_matches_transformers_attention_mask(llm):
    import torch

    from attention_core.models.llama import files as llama_files
    from tests.hf_models import smollm2_reference

    reference = smollm2_reference(llama_files.package_gguf_path())[0]
    ids = np.asarray(llm.encode(PROMPT))
    query = len(ids) - 1
    effects = decoder_hiding_effects(llm, ids, query)
    assert effects.shape == (len(ids),)
    hidden = 3
    keep = (np.arange(len(ids)) != hidden).astype(np.int64)
    with torch.no_grad():
        before = reference(torch.from_numpy(ids)[None], use_cache=False).logits[0, -1].double()
        after = reference(
            torch.from_numpy(ids)[None], attention_mask=torch.from_numpy(keep)[None],
            use_cache=False,
        ).logits[0, -1].double()  # fmt: skip
    p, q = torch.log_softmax(before, 0), torch.log_softmax(after, 0)
    assert effects[hidden] == pytest.approx(float((p.exp() * (p - q)).sum()), abs=1e-4)
