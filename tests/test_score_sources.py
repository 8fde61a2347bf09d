"""A real decoder's score split by source (attention_core.models.score_sources) against the same
split read from transformers: forward hooks take each piece where transformers computes it (the
embeddings, each head's output before o_proj / c_proj, each MLP's output, the stream the norm
reads), and torch carries each piece through transformers' own weights, norm gain and rotation.

Three-layer models built by transformers inside the test, so that layer 2 reads heads of two
earlier layers: a Qwen2 (biases on q, k and v, 4 query heads over 2 KV heads, RoPE) and a GPT-2
(LayerNorm, learned positions, biases on every projection, scores scaled by 1/(layer + 1)).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from attention_core.models.families import open_checkpoint
from attention_core.models.forward import run_decoder
from attention_core.models.score_sources import (
    CONSTANT,
    attn_only_split,
    encoder_split,
    head_split,
    split_score,
    stream_sources,
)
from attention_core.training.attn_only import AttnOnlyConfig, init_params, run_attn_only
from attention_core.validation import AttentionInputError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

IDS = [5, 9, 13, 5, 9, 21, 30, 13, 5, 9, 2, 40]
LAYERS = 3


def _qwen2(folder: Path):
    from tests.tiny_decoders import VOCAB_SIZE, word_tokenizer

    config = transformers.Qwen2Config(
        vocab_size=VOCAB_SIZE, hidden_size=32, intermediate_size=48, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0}, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=1, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(58)
    model = transformers.Qwen2ForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1 + 0.1 * torch.randn_like(param))
            else:
                param.normal_(0.0, 0.3)
    model.eval().save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    return model


def _gpt2(folder: Path):
    from tests.tiny_checkpoints import OTHER_GPT2, write_tiny

    write_tiny("gpt2-other", folder)
    assert OTHER_GPT2["n_layer"] == LAYERS
    model = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager")
    # transformers starts every bias at 0: given some, a bias left out or added twice shows.
    torch.manual_seed(58)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    return model.eval()


@pytest.fixture(scope="module", params=["qwen2", "gpt2"])
def models(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    hf = {"qwen2": _qwen2, "gpt2": _gpt2}[request.param](folder).requires_grad_(False)
    ours = open_checkpoint(str(folder), weights_dtype=np.float32)
    return request.param, hf, ours


def _hooked(family: str, hf, ids=IDS) -> dict:
    """Each piece of the pass as transformers computes it, for ``ids``, float64 afterwards
    (family "gpt2", or a Llama-like one: Llama, Qwen2)."""
    pieces: dict = {"heads": {}, "mlp": {}}
    handles = []
    llama_like = family != "gpt2"
    blocks = hf.model.layers if llama_like else hf.transformer.h

    def keep(store, key, output):
        store[key] = output[0].detach().double()

    for index, block in enumerate(blocks):
        projection = block.self_attn.o_proj if llama_like else block.attn.c_proj
        handles.append(projection.register_forward_pre_hook(
            lambda m, args, i=index: keep(pieces["heads"], i, args[0])
        ))  # fmt: skip
        handles.append(
            block.mlp.register_forward_hook(lambda m, a, out, i=index: keep(pieces["mlp"], i, out))
        )
        norm = block.input_layernorm if llama_like else block.ln_1
        handles.append(norm.register_forward_pre_hook(
            lambda m, args, i=index: keep(pieces.setdefault("stream", {}), i, args[0])
        ))  # fmt: skip
    if llama_like:
        handles.append(hf.model.embed_tokens.register_forward_hook(
            lambda m, a, out: pieces.update(token=out[0].detach().double())
        ))  # fmt: skip
    else:
        handles.append(hf.transformer.wte.register_forward_hook(
            lambda m, a, out: pieces.update(token=out[0].detach().double())
        ))  # fmt: skip
        handles.append(hf.transformer.wpe.register_forward_hook(
            lambda m, a, out: pieces.update(position=out[0].detach().double())
        ))  # fmt: skip
    with torch.no_grad():
        out = hf(torch.tensor([list(ids)]), output_attentions=True)
    for handle in handles:
        handle.remove()
    pieces["weights"] = [a[0].double() for a in out.attentions]
    return pieces


def _reference_parts(family: str, hf, pieces: dict, layer: int):
    """(names, parts `(C, n, d_model)`) of resid.layer from the hooked pieces and
    transformers' own output matrices."""
    names, parts = ["token embedding"], [pieces["token"]]
    if family == "gpt2":
        names.append("position embedding")
        parts.append(pieces["position"])
    config = hf.config
    heads = config.n_head if family == "gpt2" else config.num_attention_heads
    biases = torch.zeros_like(pieces["token"])
    for earlier in range(layer):
        if family != "gpt2":
            w_o = hf.model.layers[earlier].self_attn.o_proj.weight.double()  # (d, H·dh)
        else:
            attn = hf.transformer.h[earlier].attn.c_proj
            w_o = attn.weight.double().T  # Conv1D stores (in, out)
            biases = biases + attn.bias.double()
        z = pieces["heads"][earlier]  # (n, H·dh)
        dh = z.shape[-1] // heads
        for h in range(heads):
            names.append(f"layer {earlier + 1} head {h + 1}")
            parts.append(z[:, h * dh : (h + 1) * dh] @ w_o[:, h * dh : (h + 1) * dh].T)
        names.append(f"layer {earlier + 1} MLP")
        parts.append(pieces["mlp"][earlier])
    if family == "gpt2" and layer > 0:
        names.append("output biases")
        parts.append(biases)
    return names, torch.stack(parts)


def _bias(linear):
    """A projection's bias in float64, zeros where it has none (Llama)."""
    if linear.bias is None:
        return torch.zeros(linear.out_features, dtype=torch.float64)
    return linear.bias.double()


def _reference_terms(family: str, hf, pieces: dict, layer: int, head: int, query: int):
    """`(C + 1, C + 1, n)` the split of the head's score, every part carried through
    transformers' norm gain, q/k projections and rotation in float64."""
    names, parts = _reference_parts(family, hf, pieces, layer)
    stream = pieces["stream"][layer]
    n = stream.shape[0]
    if family != "gpt2":
        block = hf.model.layers[layer]
        norm, attn = block.input_layernorm, block.self_attn
        r = torch.rsqrt(stream.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
        normed = parts * r * norm.weight.double()
        constant = torch.zeros(stream.shape[-1], dtype=torch.float64)
        dh = attn.head_dim
        kv = head // (hf.config.num_attention_heads // hf.config.num_key_value_heads)
        w_q = attn.q_proj.weight.double()[head * dh : (head + 1) * dh]
        b_q = _bias(attn.q_proj)[head * dh : (head + 1) * dh]
        w_k = attn.k_proj.weight.double()[kv * dh : (kv + 1) * dh]
        b_k = _bias(attn.k_proj)[kv * dh : (kv + 1) * dh]
        scale = dh**-0.5
    else:
        block = hf.transformer.h[layer]
        norm = block.ln_1
        centred = stream - stream.mean(-1, keepdim=True)
        r = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps)
        normed = (parts - parts.mean(-1, keepdim=True)) * r * norm.weight.double()
        constant = norm.bias.double()
        d = hf.config.n_embd
        dh = d // hf.config.n_head
        w = block.attn.c_attn.weight.double().T  # (3d, d)
        b = block.attn.c_attn.bias.double()
        w_q, b_q = w[head * dh : (head + 1) * dh], b[head * dh : (head + 1) * dh]
        w_k, b_k = w[d + head * dh : d + (head + 1) * dh], b[d + head * dh : d + (head + 1) * dh]
        scale = dh**-0.5 / (layer + 1)  # scale_attn_by_inverse_layer_idx
    q = torch.cat([normed @ w_q.T, (w_q @ constant + b_q).expand(1, n, dh)])
    k = torch.cat([normed @ w_k.T, (w_k @ constant + b_k).expand(1, n, dh)])
    if family != "gpt2":
        from transformers.models.qwen2.modeling_qwen2 import apply_rotary_pos_emb

        cos, sin = hf.model.rotary_emb(stream[None].float(), torch.arange(n)[None])
        q, k = apply_rotary_pos_emb(q, k, cos[0].double(), sin[0].double(), unsqueeze_dim=0)
    terms = scale * torch.einsum("ad,bkd->abk", q[:, query], k)
    return names, terms.numpy()


@pytest.mark.parametrize("layer", range(LAYERS))
def test_the_sources_are_the_pieces_transformers_computed(models, layer):
    family, hf, ours = models
    trace = run_decoder(ours, np.array(IDS))
    pieces = _hooked(family, hf)
    names, parts = _reference_parts(family, hf, pieces, layer)
    sources = stream_sources(ours, trace, layer)
    assert sources.names == tuple(names)
    np.testing.assert_allclose(sources.parts, parts.numpy(), rtol=1e-4, atol=2e-5)
    # They sum to the stream the layer's norm read, in transformers and in ours.
    np.testing.assert_allclose(
        sources.parts.sum(axis=0), pieces["stream"][layer].numpy(), rtol=1e-4, atol=5e-5
    )


@pytest.mark.parametrize(("layer", "query"), [(0, 5), (1, 8), (2, 11), (2, 3)])
def test_every_term_equals_the_one_carried_through_transformers(models, layer, query):
    family, hf, ours = models
    trace = run_decoder(ours, np.array(IDS))
    pieces = _hooked(family, hf)
    for head in range(trace.layers[layer].q.shape[0]):
        split = split_score(ours, trace, layer, head, query)
        names, reference = _reference_terms(family, hf, pieces, layer, head, query)
        assert split.names == (*names, CONSTANT)
        keys = slice(0, query + 1)  # the causal keys; later ones are masked anyway
        scale = np.abs(reference[:, :, keys]).max()
        np.testing.assert_allclose(
            split.terms[:, :, keys], reference[:, :, keys], rtol=1e-4, atol=1e-5 * scale
        )
        # The terms' sum is the model's score: softmax over the causal keys gives transformers'
        # own attention weights.
        summed = split.terms.sum(axis=(0, 1))[keys]
        np.testing.assert_allclose(summed, split.scores[keys], rtol=1e-4, atol=1e-5 * scale)
        weights = np.exp(summed - summed.max())
        np.testing.assert_allclose(
            weights / weights.sum(), pieces["weights"][layer][head, query, keys].numpy(),
            rtol=1e-4, atol=1e-6,
        )  # fmt: skip


def test_every_querys_key_side_at_once_is_each_querys_own(models):
    _, _, ours = models
    split = head_split(ours, run_decoder(ours, np.array(IDS)), 2, 2)
    sides = split.key_sides()
    assert sides.shape == (len(IDS), len(split.names), len(IDS))
    for query in (0, 6, 11):
        np.testing.assert_allclose(sides[query], split.at(query).key_side, rtol=1e-5, atol=1e-6)


def test_rope_pairs_and_content_sum_to_their_scores(models):
    family, _, ours = models
    trace = run_decoder(ours, np.array(IDS))
    split = split_score(ours, trace, 2, 1, 10)
    if family == "gpt2":
        assert split.pairs is None and split.content is None  # positions came with the tokens
        return
    np.testing.assert_allclose(split.pairs.sum(axis=0), split.scores, rtol=1e-4, atol=1e-5)
    # Without the rotation the same q and k meet at a zero angle offset: another score.
    steps = trace.layers[2]
    q, k = steps.q[1, 10], steps.k[0]  # query head 1 reads KV head 0 (two per KV head)
    np.testing.assert_allclose(split.content, k @ q / np.sqrt(q.shape[-1]), rtol=1e-4, atol=1e-5)
    assert not np.allclose(split.content, split.scores, atol=1e-3)


def test_a_position_or_head_outside_the_model_is_refused(models):
    _, _, ours = models
    trace = run_decoder(ours, np.array(IDS))
    for args, words in [((3, 0, 0), "the layer must be below 3"),
                        ((0, 9, 0), "the head must be below"),
                        ((0, 0, 12), "the query position must be below 12")]:  # fmt: skip
        with pytest.raises(AttentionInputError, match=words):
            split_score(ours, trace, *args)


@pytest.mark.slow
def test_the_shipped_decoders_induction_head_attends_because_of_a_previous_token_head():
    """SmolLM2 on repeated random tokens: its strongest induction head's score of the token
    after the current token's earlier copy comes, more than from any other source, from what a
    previous-token head (by the heads page's probe) wrote at that key: K-composition."""
    from attention_core import head_roles, score_parts
    from attention_core.models.llama import load_llama
    from attention_core.training.formation import PREVIOUS_TOKEN_HEAD

    model = load_llama()
    period = 24
    ids = head_roles.repeated_tokens(range(1000, 20000), period, seed=0)
    trace = run_decoder(model, ids)
    roles = head_roles.head_roles(trace.attention_weights, period)
    (layer, head, _), *_ = head_roles.strongest_heads(roles.induction, 1)
    by_probe = np.argwhere(roles.previous > PREVIOUS_TOKEN_HEAD)
    previous = {f"layer {at_layer + 1} head {at_head + 1}" for at_layer, at_head in by_probe}
    split = head_split(model, trace, layer, head)
    induced = 0
    for query in range(period + 1, 2 * period):
        target = query - period + 1  # the token after this one's first copy
        at = split.at(query)
        # Where it does its job: the target is its most attended key after the first (where
        # every head parks spare weight).
        if int(np.argmax(at.weights[1:])) + 1 != target:
            continue
        induced += 1
        above = score_parts.above_average(at.key_side, np.arange(ids.shape[0]) <= query)
        assert at.names[int(np.argmax(above[:, target]))] in previous, query
    assert induced >= period // 2


def test_the_attention_only_models_split_is_transformer_lenss_pieces():
    """The learning page's model: each source from TransformerLens's hooks (hook_embed,
    hook_pos_embed, each earlier head's hook_z through its W_O, the b_O's), each term through
    TransformerLens's W_Q, W_K and biases, and their sum its hook_attn_scores."""
    pytest.importorskip("transformer_lens")
    from tests.test_attn_only import hooked

    config = AttnOnlyConfig(n_layers=3, n_heads=2, d_model=8, d_vocab=12, n_ctx=10)
    rng = np.random.default_rng(57)
    params = {name: value + rng.normal(0, 0.3, value.shape)
              for name, value in init_params(config, seed=1, dtype=np.float64).items()}  # fmt: skip
    tokens = rng.integers(0, config.d_vocab, size=(2, config.n_ctx))
    steps = run_attn_only(config, params, tokens)
    model = hooked(params, config)
    _, cache = model.run_with_cache(torch.from_numpy(tokens))
    # The first sequence by default; its first layers' names: no earlier head, no bias at 0.
    first = attn_only_split(config, params, steps, 0, 1)
    np.testing.assert_array_equal(first.weights, steps.blocks[0].attention.weights[0, 1])
    assert first.names == ("token embedding", "position embedding", CONSTANT)
    assert attn_only_split(config, params, steps, 1, 0).names[-2:] == ("output biases", CONSTANT)
    sequence, layer = 1, 2
    pieces = [cache["hook_embed"][sequence], cache["hook_pos_embed"][0]]
    for earlier in range(layer):
        z = cache[f"blocks.{earlier}.attn.hook_z"][sequence]  # (pos, head, d_head)
        w_o = model.blocks[earlier].attn.W_O  # (head, d_head, d_model)
        pieces += [z[:, h] @ w_o[h] for h in range(config.n_heads)]
    pieces.append(model.blocks[0].attn.b_O + model.blocks[1].attn.b_O)
    pieces = torch.stack(torch.broadcast_tensors(*pieces)).detach()
    attn = model.blocks[layer].attn
    for head in range(config.n_heads):
        split = attn_only_split(config, params, steps, layer, head, sequence)
        assert split.names == ("token embedding", "position embedding", "layer 1 head 1",
                               "layer 1 head 2", "layer 2 head 1", "layer 2 head 2",
                               "output biases", CONSTANT)  # fmt: skip
        with torch.no_grad():
            q = torch.cat([pieces @ attn.W_Q[head], attn.b_Q[head].expand(1, config.n_ctx, -1)])
            k = torch.cat([pieces @ attn.W_K[head], attn.b_K[head].expand(1, config.n_ctx, -1)])
        scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][sequence, head].numpy()
        for query in (0, 4, 9):
            reference = torch.einsum("ad,bkd->abk", q[:, query], k).numpy() / np.sqrt(4)
            at = split.at(query)
            assert at.pairs is None and at.content is None  # positions are learned, not turned
            np.testing.assert_allclose(at.terms, reference, rtol=1e-10, atol=1e-12)
            visible = slice(0, query + 1)
            np.testing.assert_allclose(
                at.terms.sum(axis=(0, 1))[visible], scores[query, visible], rtol=1e-10
            )


def test_an_encoders_split_carries_each_part_through_every_post_norm():
    """A three-layer BERT (post-LN): word, position and token-type embeddings from
    transformers' hooks, each head's output before its dense layer, each FFN's output, every
    LayerNorm's own input giving its held scale, β's and output biases in one part; each term
    through transformers' query and key layers, and the terms' softmax its attention weights."""
    from attention_core.models.bert import load_bert, run_bert_ids
    from tests.test_bert import TINY_CONFIG, write_tiny_checkpoint

    config = dict(TINY_CONFIG, num_hidden_layers=3)
    folder = write_tiny_checkpoint(Path(tempfile.mkdtemp()), config, seed=58)
    ours = load_bert(folder)
    hf = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager")
    hf = hf.eval().requires_grad_(False).double()
    ids = np.array([2, 7, 9, 11, 7, 9, 30, 3])
    seen: dict = {}
    handles = []

    def grab(module, name, pre=False):
        def hook(m, args, out=None):
            seen[name] = (args[0] if pre else out)[0]

        register = module.register_forward_pre_hook if pre else module.register_forward_hook
        handles.append(register(hook))

    emb = hf.embeddings
    for piece in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        grab(getattr(emb, piece), piece)
    grab(emb.LayerNorm, "ln_emb", pre=True)
    for index, block in enumerate(hf.encoder.layer):
        grab(block.attention.output.dense, f"z{index}", pre=True)
        grab(block.attention.output.LayerNorm, f"ln1_{index}", pre=True)
        grab(block.output.dense, f"ffn{index}")
        grab(block.output.LayerNorm, f"ln2_{index}", pre=True)
    with torch.no_grad():
        out = hf(torch.from_numpy(ids[None]), output_attentions=True)
    for handle in handles:
        handle.remove()

    def through(parts, stream, norm):
        centred = stream - stream.mean(-1, keepdim=True)
        r = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps)
        parts = (parts - parts.mean(-1, keepdim=True)) * r * norm.weight
        parts[-1] += norm.bias
        return parts

    zeros = torch.zeros_like(seen["word_embeddings"])
    parts = torch.stack([seen["word_embeddings"], seen["position_embeddings"],
                         seen["token_type_embeddings"], zeros])  # fmt: skip
    parts = through(parts, seen["ln_emb"], emb.LayerNorm)
    heads, dh = (
        config["num_attention_heads"],
        config["hidden_size"] // config["num_attention_heads"],
    )
    trace = run_bert_ids(ours, ids)
    for layer, block in enumerate(hf.encoder.layer):
        split = encoder_split(ours, trace, layer, 1)
        assert len(split.names) == 5 + layer * (heads + 1)
        attention = block.attention.self
        rows = slice(dh, 2 * dh)
        q = torch.cat([parts @ attention.query.weight[rows].T,
                       attention.query.bias[rows].expand(1, len(ids), dh)])  # fmt: skip
        k = torch.cat([parts @ attention.key.weight[rows].T,
                       attention.key.bias[rows].expand(1, len(ids), dh)])  # fmt: skip
        for query in (0, 5):
            reference = (torch.einsum("ad,bkd->abk", q[:, query], k) / np.sqrt(dh)).numpy()
            at = split.at(query)
            assert at.pairs is None and at.content is None
            np.testing.assert_allclose(at.terms, reference, rtol=1e-3, atol=2e-4)
            summed = at.terms.sum(axis=(0, 1))
            weights = np.exp(summed - summed.max())
            np.testing.assert_allclose(
                weights / weights.sum(), out.attentions[layer][0, 1, query].numpy(), atol=1e-5
            )
        # The stream on to the next layer: each head's write, then the FFN's.
        z, w_o = seen[f"z{layer}"], block.attention.output.dense.weight
        writes = torch.stack([z[:, h * dh : (h + 1) * dh] @ w_o[:, h * dh : (h + 1) * dh].T
                              for h in range(heads)])  # fmt: skip
        biases = parts[-1] + block.attention.output.dense.bias
        parts = torch.cat([parts[:-1], writes, biases[None]])
        parts = through(parts, seen[f"ln1_{layer}"], block.attention.output.LayerNorm)
        parts = torch.cat([parts[:-1], seen[f"ffn{layer}"][None], parts[-1:]])
        parts = through(parts, seen[f"ln2_{layer}"], block.output.LayerNorm)


def test_a_heads_reading_is_its_split_boiled_down(models):
    """read_head's arrays against the split they come from: the parts' sum is the score, the
    largest terms are the largest, the sides are above the visible keys' average, the bands
    keep the score's excess, the map sums the sharpest queries."""
    from attention_core import score_parts
    from attention_core.models.score_reading import (
        FOCUSED,
        TOP_TERMS,
        decoder_head_split,
        read_head,
    )

    family, _, ours = models
    query = 9
    reading = read_head(decoder_head_split(ours, np.array(IDS), 2, 1), query)
    split = head_split(ours, run_decoder(ours, np.array(IDS)), 2, 1)
    at = split.at(query)
    visible = np.arange(len(IDS)) <= query
    np.testing.assert_array_equal(reading.visible, visible)
    np.testing.assert_allclose(reading.summed[visible], reading.scores[visible], atol=1e-4)
    np.testing.assert_allclose(reading.key_above, score_parts.above_average(at.key_side, visible))
    np.testing.assert_allclose(reading.key_above.sum(axis=0)[visible],
                               (reading.summed - reading.summed[visible].mean())[visible],
                               atol=1e-4)  # fmt: skip
    key = reading.attended
    assert key == 1 + int(np.argmax(at.weights[1 : query + 1]))
    (a, b), value = reading.top_terms[key][0], reading.top_values[key][0]
    assert abs(value) == pytest.approx(np.abs(at.terms[:, :, key]).max())
    assert at.terms[a, b, key] == value
    assert reading.top_terms.shape == (len(IDS), TOP_TERMS, 2)
    assert np.all(np.diff(np.abs(reading.top_values[key])) <= 0)
    if family == "gpt2":
        assert reading.bands is None and reading.content is None
        token, position = reading.names.index("token embedding"), 1
        np.testing.assert_allclose(reading.positional[0, 1], at.terms[token, position], rtol=1e-6)
    else:
        assert reading.positional is None
        assert reading.bands.shape == (4, len(IDS))  # d_head 8: four pairs, one a band
        np.testing.assert_allclose(
            reading.bands.sum(axis=0)[visible], reading.key_above.sum(axis=0)[visible], atol=1e-4
        )
    focused = [i for i in range(len(IDS)) if split.weights[i, 1:].max(initial=0) >= FOCUSED]
    assert focused and list(reading.pattern_queries) == focused
    np.testing.assert_allclose(reading.pattern_totals, reading.pattern_map[:, 1:].sum(axis=1))
    # The first query sees only the first key, the second two keys: it attends the second.
    assert read_head(split, 0).attended == 0 and read_head(split, 1).attended == 1
    expected = score_parts.source_map(split.key_sides(), split.weights,
                                      np.tril(np.ones((len(IDS), len(IDS)), dtype=bool)),
                                      reading.pattern_queries)  # fmt: skip
    np.testing.assert_allclose(reading.pattern_map, expected, rtol=1e-6)


def test_a_pattern_where_no_query_attends_is_read_at_its_sharpest_query():
    """Weights spread evenly (under FOCUSED everywhere): the whole pattern's map falls back to
    the one sharpest query, the first of equals."""
    from attention_core import score_parts
    from attention_core.models.score_reading import read_head
    from attention_core.models.score_sources import HeadSplit

    rng = np.random.default_rng(4)
    values = rng.normal(size=(3, 5, 2))
    parts = score_parts.HeadParts(values, values.sum(axis=0))
    weights = np.full((5, 5), 0.2)
    split = HeadSplit(("a", "b", CONSTANT), parts, parts, 1.0, np.ones(5), np.zeros((5, 5)),
                      weights, rotated=False)  # fmt: skip
    reading = read_head(split, 2, causal=False)
    assert list(reading.pattern_queries) == [0]
    np.testing.assert_allclose(
        reading.pattern_map,
        score_parts.source_map(split.key_sides(), weights, np.ones((5, 5), bool), [0]),
    )


def test_an_encoders_reading_sees_every_key(tmp_path):
    from attention_core.models.bert import load_bert
    from attention_core.models.score_reading import encoder_head_split, read_head
    from tests.test_bert import write_tiny_checkpoint

    model = load_bert(write_tiny_checkpoint(tmp_path))
    split = encoder_head_split(model, np.array([2, 5, 6, 7, 3]), 1, 0)
    reading = read_head(split, 1, causal=False)
    assert reading.visible.all()
    np.testing.assert_allclose(reading.summed, reading.scores, atol=1e-5)
    assert reading.positional.shape == (2, 2, 5) and reading.bands is None
    with pytest.raises(AttentionInputError, match="query position must be below 5"):
        read_head(split, 5, causal=False)


@pytest.mark.slow
def test_minilms_previous_token_head_is_positional_by_its_sources():
    """The kind the page gives a head agrees with the role the heads page's probe finds: MiniLM's
    strongest previous-token head attends where it does because of the position embedding."""
    from attention_core.head_roles import repeated_tokens, strongest_heads
    from attention_core.lessons.attends import head_kind
    from attention_core.models import load_bert, readouts
    from attention_core.models.score_reading import encoder_head_split, read_head

    model = load_bert()
    _, roles = readouts.encoder_roles(model, repeated_tokens(readouts.ENCODER_PROBE_POOL, 20, 0))
    (layer, head, score), *_ = strongest_heads(roles.previous, 1)
    assert score > 0.9
    text = "the quick brown fox jumps over the lazy dog and then the cat sat on the mat"
    split = encoder_head_split(model, model.tokenize(text).input_ids, layer, head)
    reading = read_head(split, 5, causal=False)
    assert head_kind(reading.names, reading.pattern_totals, ())[0] == "positional"
