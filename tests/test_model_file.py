"""attention_core.training.model_file: a trained model goes into TransformerLens's
HookedTransformer by `load_state_dict` and gives its logits; a file that is not one is refused in
a sentence; and (slow) the default run, downloaded, holds an induction head by TransformerLens's
own numbers, which one layer never does."""

import io
import json
import zipfile

import numpy as np
import pytest
import torch

from attention_core import AttentionInputError
from attention_core.training.attn_only import AttnOnlyConfig, init_params, run_attn_only
from attention_core.training.model_file import from_npz, to_npz
from attention_core.training.run import TrainingSettings, train

transformer_lens = pytest.importorskip("transformer_lens")

CONFIG = AttnOnlyConfig(n_layers=2, n_heads=4, d_model=32, d_vocab=20, n_ctx=12)


def load_into_transformer_lens(data: bytes):
    """What a TransformerLens user does with the downloaded file (the module docstring's
    recipe): the config from config.json, the state dict from the arrays, strict."""
    file = np.load(io.BytesIO(data))
    cfg = transformer_lens.HookedTransformerConfig(**json.loads(str(file["config.json"])))
    model = transformer_lens.HookedTransformer(cfg)
    model.load_state_dict(
        {k: torch.from_numpy(file[k]) for k in file.files if not k.endswith(".json")}, strict=True
    )
    return model.eval()


def test_the_file_loads_into_transformer_lens_and_gives_our_logits():
    rng = np.random.default_rng(2)
    params = {
        k: v + rng.normal(0, 0.1, v.shape).astype(np.float32)
        for k, v in init_params(CONFIG, 4).items()
    }
    data = to_npz(CONFIG, params, {"steps": 0})
    model = load_into_transformer_lens(data)
    tokens = rng.integers(0, 20, size=(3, 12))
    with torch.no_grad():
        theirs = model(torch.from_numpy(tokens)).numpy()
    ours = run_attn_only(CONFIG, params, tokens).logits
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5 * np.abs(theirs).max())


def test_a_file_round_trips_with_its_config_and_what_the_app_knows():
    params = init_params(CONFIG, 1)
    model = from_npz(to_npz(CONFIG, params, {"settings": {"seed": 1}, "steps": 40}))
    assert model.config == CONFIG and model.about == {"settings": {"seed": 1}, "steps": 40}
    assert all(np.array_equal(model.params[k], params[k]) for k in params)
    assert list(model.params) == list(params)


def npz(**arrays) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def good_arrays():
    with np.load(io.BytesIO(to_npz(CONFIG, init_params(CONFIG, 0), {}))) as file:
        return {name: file[name] for name in file.files}


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"a,b,c\n1,2,3\n", "not an .npz archive"),
        (npz(x=np.zeros(3)), "no config.json"),
        (npz(**{**good_arrays(), "config.json": np.array("{not json")}), "not an attention-only"),
        (
            npz(**{**good_arrays(), "config.json": np.array(json.dumps({"n_layers": 2}))}),
            "attn_only",
        ),
        (npz(**{k: v for k, v in good_arrays().items() if k != "unembed.b_U"}), "no unembed.b_U"),
        (npz(**{**good_arrays(), "embed.W_E": np.zeros((20, 31))}), "embed.W_E has shape (20, 31)"),
        (npz(**{**good_arrays(), "embed.W_E": np.full((20, 32), np.nan)}), "NaN"),
        (
            npz(**{**good_arrays(), "embed.W_E": np.array([None] * 640).reshape(20, 32)}),
            "not an .npz",
        ),
        (b"x" * (33 * 2**20), "more than the 32 MB"),
        (b"x" * (32 * 2**20), "not an .npz archive"),  # 32 MB exactly: not too large
        (npz(**{**good_arrays(), "about.json": np.array("[1, 2]")}), "config.json is not an"),
    ],
    ids=[
        "csv",
        "no-config",
        "bad-json",
        "not-attn-only",
        "missing",
        "shape",
        "nan",
        "pickle",
        "huge",
        "32-mb",
        "about-not-a-dict",
    ],
)
def test_a_file_that_is_not_such_a_model_is_refused_in_a_sentence(data, words):
    with pytest.raises(
        AttentionInputError, match="not an attention-only model saved by this page"
    ) as refused:
        from_npz(data)
    assert words in str(refused.value)


@pytest.mark.parametrize(
    "config",
    [AttnOnlyConfig(1, 1, 8, 4, 4), AttnOnlyConfig(3, 8, 128, 256, 64)],
    ids=["smallest", "largest"],
)
def test_the_smallest_and_the_largest_model_of_the_page_are_read(config):
    assert from_npz(to_npz(config, init_params(config, 0), {})).config == config


def test_a_config_past_the_pages_limits_is_refused():
    config = {**CONFIG.transformer_lens(), "n_layers": 4}
    with pytest.raises(AttentionInputError, match="n_layers = 4"):
        from_npz(npz(**{**good_arrays(), "config.json": np.array(json.dumps(config))}))


def test_the_archive_holds_only_arrays_and_text():
    with zipfile.ZipFile(io.BytesIO(to_npz(CONFIG, init_params(CONFIG, 0), {}))) as archive:
        names = archive.namelist()
    assert "config.json.npy" in names and "blocks.1.attn.IGNORE.npy" in names
    np.load(io.BytesIO(to_npz(CONFIG, init_params(CONFIG, 0), {})), allow_pickle=False)[
        "config.json"
    ]


def score_with_transformer_lens(model, seed: int):
    """Held-out repeated random sequences scored by TransformerLens alone: 64 segments of
    n_ctx / 2 tokens, drawn here, each followed by its copy. The prefix-matching score is the mean
    weight a second-copy token gives the token after its earlier copy; losses by torch."""
    n_ctx, vocab = model.cfg.n_ctx, model.cfg.d_vocab
    half = n_ctx // 2
    rng = np.random.default_rng(seed)
    segments = np.stack([rng.permutation(vocab)[:half] for _ in range(64)])
    tokens = torch.from_numpy(np.concatenate([segments, segments], axis=1))
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1), reduction="none"
    ).reshape(64, n_ctx - 1)
    first_half, repeated = losses[:, : half - 1].mean().item(), losses[:, half:].mean().item()
    queries = torch.arange(half, n_ctx)
    prefix = np.array([
        [cache["pattern", layer][:, head, queries, queries - half + 1].mean().item()
         for head in range(model.cfg.n_heads)]
        for layer in range(model.cfg.n_layers)
    ])  # fmt: skip
    return prefix, first_half, repeated


@pytest.mark.slow
def test_the_default_run_downloaded_holds_an_induction_head_and_one_layer_never_does():
    for layers in (2, 1):
        settings = TrainingSettings(n_layers=layers)
        final = list(train(settings))[-1]
        model = load_into_transformer_lens(to_npz(settings.config, final.params, {}))
        prefix, first_half, repeated = score_with_transformer_lens(model, seed=12345)
        chance = np.mean(1 / np.arange(17, 33))  # uniform causal attention on these queries
        if layers == 2:
            assert np.unravel_index(prefix.argmax(), prefix.shape)[0] == 1
            assert prefix.max() > 0.6 > 10 * chance
            assert repeated < 0.1 * first_half
        else:
            assert prefix.max() < 0.25
            assert repeated > 0.3 * first_half
