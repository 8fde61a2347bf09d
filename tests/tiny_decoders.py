"""Tiny decoders of today's small-LLM families, built by ``transformers`` inside the tests.

Each case's config makes its family's attention choices matter on the tests' short prompts:
a window shorter than the prompt, scores and logits well past their soft caps, NoPE layers
between RoPE ones, a query scale other than 1/√d_head, QK-norm gains far from 1.

    word_tokenizer()          a WordLevel tokenizer over WORDS, VOCAB_SIZE ids, as
                              transformers' PreTrainedTokenizerFast (saved as tokenizer.json)
    RECENT                    case -> (transformers' config class name, model class name, config)
    hf_decoder(case)          the case's transformers model, random weights from a fixed seed
    save_decoder(case, folder, dtype)   saved with its tokenizer; transformers' float32 model
                              read back from the saved numbers
"""

from __future__ import annotations

from pathlib import Path

WORDS = (
    "the a cat dog sat on mat rug and then ran far away home quickly slowly big small red blue "
    "green bird sang song of morning night sun moon rose over hill river flows to sea under "
    "bridge old man woman child read book wrote letter friend was is will be happy sad"
).split()
VOCAB_SIZE = 160
PROMPTS = (
    "the cat sat on the mat",
    "a big red dog ran far away and then ran home quickly",
    "the old man read a book under the bridge while the river flows to the sea and the sun "
    "rose over the green hill",
    "bird",
)

_SHAPE = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              intermediate_size=64, rms_norm_eps=1e-6)  # fmt: skip
RECENT = {
    # QK-norm per head; layer 1 slides a window of 3 (use_sliding_window, max_window_layers 1).
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        _SHAPE, num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 1e4},
        use_sliding_window=True, sliding_window=3, max_window_layers=1,
        tie_word_embeddings=False,
    )),
    # NoPE in layers 1 and 3 (every second), RoPE in 0 and 2.
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(
        _SHAPE, num_hidden_layers=4, no_rope_layer_interval=2,
        rope_parameters={"rope_type": "default", "rope_theta": 5e4}, tie_word_embeddings=True,
    )),
    # QK-norm over the whole projection, norms after each block only.
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(
        _SHAPE, num_hidden_layers=2, rope_parameters={"rope_type": "default", "rope_theta": 1e4},
        tie_word_embeddings=False,
    )),
    # Local, global, local; scores capped at 2, logits at 3; q·k scaled by 24^-½, not 16^-½.
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        _SHAPE, num_hidden_layers=3, sliding_window=3, query_pre_attn_scalar=24,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4},
    )),
    # Two local layers (window 3, base 10⁴) before a global one (base 10⁶), QK-norm per head.
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        _SHAPE, num_hidden_layers=3, sliding_window=3, query_pre_attn_scalar=20,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        },
    )),
}  # fmt: skip


def word_tokenizer():
    """A WordLevel tokenizer over WORDS, padded with filler tokens to VOCAB_SIZE, wrapped as
    transformers' PreTrainedTokenizerFast (which saves the tokenizer.json our loader reads)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokens = ["<unk>", "<eos>", *WORDS]
    tokens += [f"filler{i}" for i in range(VOCAB_SIZE - len(tokens))]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()  # joins words with spaces
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>"
    )


def hf_decoder(case: str):
    """The case's transformers model, float32, eager attention, random weights from a fixed
    seed: matrices N(0, 0.3²), so attention is far from uniform and the caps bite; norm gains
    near 1 (Gemma stores γ − 1, so its near 0)."""
    import torch
    import transformers

    config_name, model_name, spec = RECENT[case]
    config = getattr(transformers, config_name)(
        vocab_size=VOCAB_SIZE,
        max_position_embeddings=256,
        bos_token_id=None,
        eos_token_id=1,
        pad_token_id=0,
        attn_implementation="eager",  # returns the weights, as output_attentions needs
        **spec,
    )
    torch.manual_seed(sum(map(ord, case)))
    model = getattr(transformers, model_name)(config)
    stored_minus_one = case.startswith("gemma")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_((0 if stored_minus_one else 1) + 0.2 * torch.randn_like(param))
            else:
                param.normal_(0.0, 0.3)
    return model.eval()


def save_decoder(case: str, folder: Path, dtype: str = "float32"):
    """Save the case's model in ``dtype`` with the tokenizer into ``folder``; returns
    transformers' float32 model read back from the saved numbers."""
    import torch

    model = hf_decoder(case)
    model.to(getattr(torch, dtype)).save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    # Not `model.float()`: `.to` rounded its RoPE frequency buffers to 16 bits as well, which
    # no checkpoint stores.
    reference = type(model).from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    )
    return reference.eval()
