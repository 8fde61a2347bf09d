"""The decoder page: the values it shows (tokens, top-k, cache, sinks, a head's weights) are
checked against the model run here outside the page's caches, and against formulas written out
in the test. The model's own parity with transformers is tests/test_llama.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.models.generation import generate
from attention_core.models.llama import files as llama_files
from attention_core.models.llama import load_llama, run_llama
from harness.app_pages import open_model_page
from server.idle import IdleRelease
from server.lane import QUICK_RUNS
from tests.hf_models import smollm2_gguf_or_skip
from tests.plotly_json import figures, plotly_array
from ui.decoder import branching, generation
from ui.decoder.generation import Sampling
from ui.models import smollm
from ui.widgets.byte_cache import MB, every_cache

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model():
    return load_llama(smollm2_gguf_or_skip())


@pytest.fixture(autouse=True)
def offline_package(monkeypatch):
    monkeypatch.delenv(llama_files.LLM_PATH_ENV_VAR, raising=False)


def open_page(params: dict[str, str] | None = None) -> AppTest:
    return open_model_page("pages/decoder_llm.py", params, timeout=240)


def metric(at: AppTest, label_start: str) -> str:
    (found,) = [m for m in at.metric if m.label.startswith(label_start)]
    return found.value


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def test_default_prompt_tokens_top_k_and_cache(model):
    at = open_page()
    ids = model.encode(generation.DEFAULT_PROMPT)
    tokens_md = [m.value for m in at.markdown if "`The`" in m.value]
    assert tokens_md and "` capital`" in tokens_md[0]
    table = at.dataframe[0].value
    logits = run_llama(model, ids).next_token_logits.astype(np.float64)
    p = softmax(logits)
    best = np.argsort(-p)[:10]
    assert table["id"].tolist() == best.tolist()
    np.testing.assert_allclose(table["probability"], np.round(p[best], 4), atol=1e-4)
    assert table["token"][0] == " Paris"
    n = len(ids)
    assert metric(at, "Cache shape") == str((30, 2, 3, n, 64))
    assert metric(at, "Bytes used") == f"{30 * 2 * 3 * n * 64 * 4:,}"
    # The packaged file is 4-bit: the caption says whose numbers these are.
    (about,) = [c.value for c in at.caption if "weights saved as" in c.value]
    assert "Q4_1 (4-bit) layers, Q8_0 (8-bit) embedding, held as bfloat16" in about


def test_next_token_grows_the_cache_and_the_link(model):
    at = open_page()
    n = len(model.encode(generation.DEFAULT_PROMPT))
    (button,) = [b for b in at.button if b.label == "Next token"]
    button.click().run()
    assert not at.exception
    assert at.query_params["step"] in ("1", ["1"])
    assert any("** Paris**" in m.value for m in at.markdown)
    assert metric(at, "Cache shape") == str((30, 2, 3, n + 1, 64))
    assert metric(at, "Bytes used") == f"{30 * 2 * 3 * (n + 1) * 64 * 4:,}"


def test_deep_link_shows_that_head_and_its_sink_share(model):
    prompt = "The cat sat on the mat because"
    at = open_page({"prompt": prompt, "layer": "3", "head": "5", "step": "2"})
    assert at.select_slider[0].value == 3 and at.select_slider[1].value == 5
    ids = model.encode(prompt)
    # Two greedy steps, computed here with our own decode loop (argmax of the last logits).
    for _ in range(2):
        ids.append(int(np.argmax(run_llama(model, ids).next_token_logits)))
    weights = run_llama(model, ids).layers[2].weights[4]  # (n, n)
    spec = next(
        s
        for s in figures(at)
        if (s["layout"].get("title") or {}).get("text", "").startswith("Layer 3, head 5")
    )
    assert "(KV head 2)" in spec["layout"]["title"]["text"]  # heads 4-6 share KV head 2
    shown = plotly_array(spec["data"][0]["z"]).astype(np.float64)
    lower = np.tril(np.ones_like(weights, dtype=bool))
    np.testing.assert_allclose(shown[lower], weights[lower], atol=1e-6)
    assert np.isnan(shown[~lower]).all()  # the future is masked, drawn grey
    share = weights[1:, 0].mean()
    assert metric(at, "Head 5 of layer 3") == f"{share:.0%}"


def test_timing_the_next_token_waits_for_the_lane_like_every_model_run(model):
    state = generation.continuation(model, tuple(model.encode("The capital of France is")), 0)[0]
    timed: list[dict[str, float]] = []
    with QUICK_RUNS.turn():  # another viewer's run
        timing = threading.Thread(
            target=lambda: timed.append(generation.time_next_token(model, state))
        )
        timing.start()
        time.sleep(0.5)
        assert not timed and QUICK_RUNS.waiting == 1
    timing.join(timeout=60)
    assert timed and 0 < timed[0]["with"] < timed[0]["without"]


def test_a_generated_text_is_shown_without_a_new_forward_pass_and_matches_one(model):
    """The page shows generated tokens from the prompt's pass plus the row each decode step
    computed; one full forward pass over the same tokens gives the same numbers."""
    prompt = tuple(model.encode("Attention lets every token look back at"))
    state, shown = generation.continuation(model, prompt, 3)
    n = len(state.ids)
    assert shown.weights.shape == (30, 9, n, n) and len(state.steps) == 3
    # Each generated row is the core's decode step's.
    core = generate(model, np.asarray(prompt), max_new_tokens=3, keep=("weights",))
    for i, step in enumerate(core.steps):
        np.testing.assert_array_equal(
            shown.weights[:, :, len(prompt) + i, : len(prompt) + i + 1],
            step.run.attention_weights[:, :, 0],
        )
    # float32 sums in another order (10 rows at once against 7, then 1 at a time): ~1e-5 apart.
    full = run_llama(model, np.asarray(state.ids))
    np.testing.assert_allclose(shown.weights, full.attention_weights, atol=2e-5)
    for name in ("q", "q_rot", "k", "k_rot"):
        expected = np.stack([getattr(layer, name) for layer in full.layers])
        np.testing.assert_allclose(getattr(shown, name), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        shown.sink, full.attention_weights[:, :, 1:, 0].mean(axis=-1), atol=2e-5
    )
    # It is a view of the kept chunk's trace, which the figures find by its digest.
    again, chunk = generation.continuation(model, prompt, 8)
    assert np.shares_memory(shown.weights, chunk.weights)
    assert shown.digest != chunk.digest and again.ids[: len(state.ids)] == state.ids


def test_the_page_generate_and_a_fork_sample_the_same_tokens_from_one_seed(model):
    """The page's continuation, the core's `generate` and a fork all run the core's one loop,
    step s drawing with the seed and s, so a seed and the filters write the same text in all
    three (sampled, not greedy: the draw itself must agree)."""
    prompt = tuple(model.encode("Once upon a time"))
    sampling = Sampling(temperature=1.3, top_k=50, top_p=0.95, min_p=0.02, seed=11)
    state = generation.continuation(model, prompt, 8, sampling)[0]
    ours = generate(model, np.asarray(prompt), sampling, max_new_tokens=8)
    assert ours.token_ids == list(state.ids[len(prompt) :]) and len(ours.steps) == 8
    # Greedy decoding would pass whatever the seeds: these settings draw a token the argmax
    # would not have taken.
    greedy = generation.continuation(model, prompt, 8)[0]
    assert greedy.ids != state.ids
    # Forked after 3 tokens, the branch that begins with the page's 4th continues as the page.
    at_three = generation.continuation(model, prompt, 3, sampling)[0]
    result = branching.fork(model, at_three, sampling, 5, 5)
    page_next = state.ids[len(prompt) + 3 : len(prompt) + 8]
    [same] = [b for b in result.branches if b.token_ids[0] == page_next[0]]
    assert same.token_ids == page_next
    assert at_three.next_token() == page_next[0]


def test_a_continuation_is_a_prefix_of_the_kept_generation_and_stays_exact(model):
    """Every step count of one prompt and setting is a prefix of one cached generation: its
    cache and logits are those the core's loop held after that step."""
    prompt = tuple(model.encode("The capital of France is"))
    greedy = generation.continuation(model, prompt, 6)[0]
    # The argmax ignores the filters and the seed: one entry for every greedy link.
    filtered = generation.continuation(model, prompt, 6, Sampling(0.0, 7, 0.5, 0.2, 123))[0]
    assert all(a is b for a, b in zip(filtered.steps, greedy.steps, strict=True))
    shorter = generation.continuation(model, prompt, 4)[0]
    assert shorter.steps == greedy.steps[:4] and shorter.cache is greedy.steps[3].run.cache
    assert shorter.cache.length == len(prompt) + 4
    full = run_llama(model, np.asarray(shorter.ids))
    np.testing.assert_allclose(shorter.logits, full.next_token_logits, atol=2e-4)
    sampled = generation.continuation(model, prompt, 6, Sampling(1.0, 20, seed=3))[0]
    # One pass over the prompt for every setting: only the tokens after it are drawn anew.
    read = [
        generation._generation(prompt, 0, setting, id(model), model).state
        for setting in (Sampling(), Sampling(1.0, 20, seed=3))
    ]
    assert read[1].prompt_run is read[0].prompt_run and read[1].sampling == Sampling(
        1.0, 20, seed=3
    )
    assert sampled.ids[len(prompt)] == greedy.ids[len(prompt)]  # both begin " Paris"
    assert sampled.ids != greedy.ids
    # The sampled text's cache gives the logits of one full pass over its tokens.
    full = run_llama(model, np.asarray(sampled.ids))
    np.testing.assert_allclose(sampled.logits, full.next_token_logits, atol=2e-4)
    assert sampled.cache.layers[0].keys.shape[-2] == len(sampled.ids)


def test_the_decoder_caches_hold_at_most_their_bytes_and_give_back_the_same_tokens(model):
    """Every decoder cache is bounded in bytes; a generation let go is made again from the
    chunks still held or from the prompt, token for token the same."""
    prompt = tuple(model.encode("The capital of France is"))
    first = [
        generation.continuation(model, prompt, 48, Sampling(1.0, 20, seed=s))[0] for s in range(3)
    ]
    held = every_cache()
    entries, held_bytes = held["decoder.generations"]
    # The bound the four caches it replaced had together (16 + 8 + 8 + 16 MB).
    assert 0 < held_bytes <= 48 * MB
    # Three settings' seven entries each (the prompt and six chunks) do not fit: the first
    # ones have been let go.
    assert entries < 3 * 7
    again = generation.continuation(model, prompt, 48, Sampling(1.0, 20, seed=0))[0]
    assert again is not first[0] and again.ids == first[0].ids
    np.testing.assert_array_equal(again.logits, first[0].logits)


def test_empty_prompt_and_missing_model(request):
    at = open_page({"prompt": " "})
    assert any("empty" in e.value for e in at.error)
    request.getfixturevalue("without_llm")
    at = open_page()
    assert any("neither a .gguf file" in e.value for e in at.error)
    assert any(smollm.INSTALL_COMMAND in c.value for c in at.code)


def test_a_loading_process_that_dies_is_explained_without_a_server_path(monkeypatch):
    # A real child process that dies (tests/test_process_load.py), as one killed for memory would.
    monkeypatch.setattr(smollm, "LOADER", "tests.test_process_load:die_without_an_answer")
    smollm.forget_decoder()
    try:
        at = open_page()
    finally:
        monkeypatch.undo()
        smollm.forget_decoder()
    assert not at.exception
    (shown,) = [e.value for e in at.error if "could not be loaded" in e.value]
    assert "ChildLoadError" in shown and "/" not in shown
    assert any(b.label == "Look for the model again" for b in at.button)


def test_autoplay_appends_one_token_per_tick(model):
    at = open_page({"prompt": "One, two, three,"})
    at.toggle(key="decoder.autoplay").set_value(True).run()
    assert not at.exception
    # Turning it on appends the first token at once (greedy: " four"); the timer does the rest.
    assert at.query_params["step"] in ("1", ["1"])
    ids = model.encode("One, two, three,")
    token = int(np.argmax(run_llama(model, ids).next_token_logits))
    assert any(f"**{model.token_text(token)}**" in m.value for m in at.markdown)


# -- what if: the next token after one ablation ---------------------------------------------------


def what_if_table(at: AppTest):
    (table,) = [d.value for d in at.dataframe if "p before" in d.value.columns]
    return table


def check_what_if(at: AppTest, model, before_logits: np.ndarray, after_logits: np.ndarray):
    """The table, sentence, KL and bars shown equal the two forward passes run here."""
    p, q = softmax(before_logits.astype(np.float64)), softmax(after_logits.astype(np.float64))
    top_p, top_q = np.argsort(-p)[:8], np.argsort(-q)[:8]
    rows = [*top_p, *[i for i in top_q if i not in top_p]]
    table = what_if_table(at)
    assert table["id"].tolist() == [int(i) for i in rows]
    np.testing.assert_allclose(table["p before"], np.round(p[rows], 4), atol=1e-4)
    np.testing.assert_allclose(table["p after"], np.round(q[rows], 4), atol=1e-4)
    np.testing.assert_allclose(table["change"], np.round(q[rows] - p[rows], 4), atol=2e-4)
    kl = float(np.sum(p * np.log(p / q)))
    assert metric(at, "KL divergence") == f"{kl:.4f} nats"
    b, a = int(p.argmax()), int(q.argmax())
    name = repr(model.token_text(b))[1:-1]
    if a == b:
        sentence = f"The top token stayed “{name}”, p {p[b]:.3f} → {q[b]:.3f}."
    else:
        new = repr(model.token_text(a))[1:-1]
        sentence = f"The top token changed from “{name}” (p={p[b]:.3f}) to “{new}” (p={q[a]:.3f})"
    assert any(m.value.startswith(sentence) for m in at.markdown)
    titled = {(f["layout"].get("title") or {}).get("text"): f for f in figures(at)}
    bars = titled["Next-token probabilities"]
    np.testing.assert_allclose(plotly_array(bars["data"][0]["y"]), p[rows], atol=1e-6)
    np.testing.assert_allclose(plotly_array(bars["data"][1]["y"]), q[rows], atol=1e-6)
    return p, q


def test_what_if_runs_only_when_opened(model):
    at = open_page()
    assert not at.exception and not at.error
    assert not [d for d in at.dataframe if "p before" in d.value.columns]
    assert not any(m.label.startswith("KL divergence") for m in at.metric)
    # The branches, too, run only when opened.
    assert not any(m.label.startswith("Shared prefix") for m in at.metric)


def test_what_if_removing_france_is_two_forward_passes(model):
    at = open_page({"whatif": "1"})
    assert not at.exception and not at.error
    ids = np.asarray(model.encode(generation.DEFAULT_PROMPT))
    before = run_llama(model, ids).next_token_logits
    after = run_llama(model, np.delete(ids, 3)).next_token_logits  # " France" is token 4
    p, q = check_what_if(at, model, before, after)
    assert model.token_text(int(p.argmax())) == " Paris" and q.argmax() != p.argmax()
    assert dict(at.query_params) == {"whatif": "1"}


def test_what_if_hiding_a_token_and_removing_a_head_follow_links(model):
    ids = np.asarray(model.encode(generation.DEFAULT_PROMPT))
    before = run_llama(model, ids).next_token_logits
    at = open_page({"whatif": "1", "what": "mask", "what_token": "1"})
    keep = np.arange(len(ids)) != 0
    check_what_if(at, model, before, run_llama(model, ids, attend=keep).next_token_logits)
    at = open_page({"whatif": "1", "what": "head", "layer": "5", "head": "2"})
    assert at.selectbox(key="decoder.what_token").disabled
    head_mask = np.ones((30, 9))
    head_mask[4, 1] = 0.0
    check_what_if(at, model, before, run_llama(model, ids, head_mask=head_mask).next_token_logits)
    assert any("Removes layer 5, head 2" in c.value for c in at.caption)
    assert dict(at.query_params) == {"whatif": "1", "what": "head", "layer": "5", "head": "2"}


def test_what_if_token_past_the_end_is_said_next_to_its_control(model):
    at = open_page({"whatif": "1", "what_token": "40"})
    n = len(model.encode(generation.DEFAULT_PROMPT))
    assert any(f"Token 40 does not exist: this text has {n} tokens" in w.value for w in at.warning)
    assert at.selectbox(key="decoder.what_token").value == n


# -- how the next token is chosen: temperature, top-k, top-p, min-p -------------------------------

# A prompt no other test uses, where every filter removes something at these settings.
HELD_OUT = "My favourite colour is"
SETTINGS = {"temperature": "0.8", "top_k": "50", "top_p": "0.9", "min_p": "0.05"}
BYTES_PER_POSITION = 30 * 2 * 3 * 64 * 4  # layers, K and V, KV heads, d_head, float32


def transformers_stages(logits: np.ndarray, temperature: float, k: int, p: float, min_p: float):
    """transformers' own warpers, one after another in generate's order: each stage's scores."""
    import torch
    from transformers import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = [TemperatureLogitsWarper(temperature), TopKLogitsWarper(k)]
    warpers += [TopPLogitsWarper(p), MinPLogitsWarper(min_p)]
    scores, stages = torch.tensor(logits, dtype=torch.float64)[None], []
    for warper in warpers:
        scores = warper(None, scores)
        stages.append(scores[0].numpy())
    return stages


def titled(at: AppTest, start: str) -> dict:
    (found,) = [f for f in figures(at) if _title(f).startswith(start)]
    return found


def _title(spec: dict) -> str:
    return (spec["layout"].get("title") or {}).get("text") or ""


def dataframe_with(at: AppTest, column: str):
    (table,) = [d.value for d in at.dataframe if column in d.value.columns]
    return table


def test_the_filters_shown_equal_transformers_processors_on_the_models_logits(model):
    at = open_page({"prompt": HELD_OUT, **SETTINGS})
    assert not at.error and not at.warning
    ids = model.encode(HELD_OUT)
    logits = run_llama(model, ids).next_token_logits.astype(np.float64)  # outside the page
    stages = transformers_stages(logits, 0.8, 50, 0.9, 0.05)
    after = [softmax(z) for z in stages]
    before = [softmax(logits), *after[:-1]]
    kept = [np.isfinite(z) for z in stages]
    counts = [int(k.sum()) for k in kept]
    assert counts[0] == 49152 and counts[1] == 50 > counts[2] > counts[3] > 1  # all four work
    table = dataframe_with(at, "tokens kept")
    assert table["tokens kept"].tolist() == counts
    assert table["removed here"].tolist() == [0, 49152 - 50, 50 - counts[2], counts[2] - counts[3]]
    shares = [b[k].sum() for b, k in zip(before, kept, strict=True)]
    np.testing.assert_allclose(table["share of its input kept"], np.round(shares, 4), atol=1e-4)
    assert metric(at, "Tokens that may be drawn") == f"{counts[3]:,} of 49,152"
    tempered = softmax(logits / 0.8)
    assert metric(at, "Their share of the tempered") == f"{tempered[kept[3]].sum():.1%}"
    # The bars: the 12 likeliest tokens, before and after each stage, to 1e-6.
    shown = np.argsort(-logits, kind="stable")[:12]
    (bars,) = [f for f in figures(at) if f["data"][0].get("name") == "before this stage"]
    assert len(bars["data"]) == 8
    for i in range(4):
        drawn_before = plotly_array(bars["data"][2 * i]["y"])
        drawn_after = plotly_array(bars["data"][2 * i + 1]["y"])
        np.testing.assert_allclose(drawn_before, before[i][shown], atol=1e-6)
        np.testing.assert_allclose(drawn_after, after[i][shown], atol=1e-6)
    # Top-p's line: the cumulative mass of what top-k left, and the nucleus marked.
    line = titled(at, f"Top-p, p = 0.9: the nucleus is {counts[2]} tokens")
    cumulative = np.cumsum(np.sort(after[1])[::-1])
    drawn = plotly_array(line["data"][0]["y"])
    np.testing.assert_allclose(drawn, cumulative[: drawn.size], atol=1e-6)
    assert len(plotly_array(line["data"][1]["x"])) == counts[2]
    # The next-token table: the model's ten likeliest, with the probabilities drawn from.
    table = at.dataframe[0].value
    assert table["id"].tolist() == shown[:10].tolist()
    np.testing.assert_allclose(table["probability"], np.round(after[3][shown[:10]], 4), atol=1e-4)


def test_the_token_said_to_be_drawn_is_the_one_generated(model):
    at = open_page({"prompt": HELD_OUT, **SETTINGS, "seed": "7"})
    (said,) = [m for m in at.metric if m.label == "Seed 7 draws, at step 1"]
    logits = run_llama(model, model.encode(HELD_OUT)).next_token_logits.astype(np.float64)
    final = softmax(transformers_stages(logits, 0.8, 50, 0.9, 0.05)[-1])
    (token,) = [i for i in np.flatnonzero(final) if said.value == f"“{model.token_text(i)}”"]
    assert said.delta == f"p = {final[token]:.4f} after the filters"
    (button,) = [b for b in at.button if b.label == "Next token"]
    button.click().run()
    assert any(f"**{model.token_text(token)}**" in m.value for m in at.markdown)
    assert at.query_params["step"] in ("1", ["1"])


def test_top_p_and_min_p_links_round_trip(model):
    link = {"temperature": "1", "top_p": "0.85", "min_p": "0.1", "seed": "4"}
    at = open_page(link)
    assert at.slider(key="decoder.top_p").value == 0.85
    assert at.slider(key="decoder.min_p").value == 0.1
    assert dict(at.query_params) == link
    at.slider(key="decoder.top_p").set_value(0.5).run()
    at.slider(key="decoder.min_p").set_value(0.0).run()
    assert dict(at.query_params) == {"temperature": "1", "top_p": "0.5", "seed": "4"}
    (row,) = [
        r for _, r in dataframe_with(at, "tokens kept").iterrows() if r["stage"].endswith("top-p")
    ]
    assert row["setting"] == "p = 0.5"


def test_bad_top_p_and_min_p_links_get_the_notice_and_the_default(model):
    at = open_page({"temperature": "1", "top_p": "1.5", "min_p": "-1"})
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("The link's `top_p=1.5` was ignored") for w in warnings), warnings
    assert any(w.startswith("The link's `min_p=-1` was ignored") for w in warnings), warnings
    assert at.slider(key="decoder.top_p").value == 1.0
    assert at.slider(key="decoder.min_p").value == 0.0
    assert dict(at.query_params) == {"temperature": "1"}
    at = open_page({"top_p": "0", "min_p": "nan"})
    warnings = [w.value for w in at.warning]
    assert sum("was ignored" in w for w in warnings) == 2, warnings
    # Greedy (the default temperature) takes the argmax whatever the filters say.
    assert any("Temperature 0 is greedy decoding" in i.value for i in at.info)
    assert metric(at, "Tokens that may be drawn") == "1 of 49,152"


# -- branches: one prefix, several continuations ---------------------------------------------------


def branch_rows(at: AppTest):
    table = dataframe_with(at, "p (model)")
    return [(r, [int(t) for t in r["token ids"].split()]) for _, r in table.iterrows()]


def full_pass_rows(model, ids: list[int], tokens: list[int]) -> np.ndarray:
    """`(len(tokens), vocab)` the logits that predicted each of `tokens` after `ids`, from one
    forward pass over the whole text (no cache shared with anything)."""
    full = run_llama(model, np.asarray([*ids, *tokens]), all_logits=True)
    return full.logits[len(ids) - 1 : len(ids) - 1 + len(tokens)].astype(np.float64)


def test_greedy_branches_and_their_probabilities_equal_full_passes(model):
    prompt = "The best thing about cats is"
    link = {"prompt": prompt, "branch": "1", "branches": "3", "branch_tokens": "3"}
    at = open_page(link)
    assert not at.error
    assert dict(at.query_params) == {k: v for k, v in link.items() if k != "branches"}  # default
    ids = model.encode(prompt)
    n = len(ids)
    first = np.argsort(-softmax(run_llama(model, ids).next_token_logits.astype(np.float64)))[:3]
    rows = branch_rows(at)
    assert [tokens[0] for _, tokens in rows] == first.tolist()
    for row, tokens in rows:
        logits = full_pass_rows(model, ids, tokens)
        assert tokens[1:] == [int(np.argmax(z)) for z in logits[1:]]  # greedy after the fork
        p = np.array([softmax(z)[t] for z, t in zip(logits, tokens, strict=True)])
        np.testing.assert_allclose(row["p (model)"], p.prod(), rtol=2e-3)
        np.testing.assert_allclose(row["log p (model)"], np.log(p).sum(), atol=2e-3)
        assert row["continuation"] == repr(model.decode(tokens))[1:-1]
        assert row["own positions"] == 3 and row["own K/V bytes"] == 3 * BYTES_PER_POSITION
    assert "p (sampler)" not in dataframe_with(at, "p (model)").columns
    (shared,) = [m for m in at.metric if m.label == "Shared prefix, computed once"]
    assert shared.value == f"{n} positions"
    assert shared.delta == f"{n * BYTES_PER_POSITION:,} bytes, read by 3 branches"
    (own,) = [m for m in at.metric if m.label == "Computed for the branches"]
    assert own.value == "9 positions" and own.delta == f"{3 * n + 9} without the shared prefix"


def test_sampled_branches_keep_to_the_filters_and_multiply_their_probabilities(model):
    prompt = "Water boils at a temperature of"
    at = open_page(
        {"prompt": prompt, "temperature": "1", "top_p": "0.9", "seed": "5", "branch": "1",
         "branches": "5", "branch_tokens": "3"}
    )  # fmt: skip
    ids = model.encode(prompt)
    logits = run_llama(model, ids).next_token_logits.astype(np.float64)
    q = softmax(transformers_stages(logits, 1.0, 49152, 0.9, 0.0)[-1])
    kept = np.argsort(-q)[: int((q > 0).sum())]
    assert 1 < kept.size < 5  # the filters keep fewer than the five asked for, and it says so
    assert any(f"(they keep only {kept.size})" in m.value for m in at.markdown)
    rows = branch_rows(at)
    assert [tokens[0] for _, tokens in rows] == kept.tolist()
    for row, tokens in rows:
        rows_logits = full_pass_rows(model, ids, tokens)
        filtered = [softmax(transformers_stages(z, 1.0, 49152, 0.9, 0.0)[-1]) for z in rows_logits]
        sampler = np.array([f[t] for f, t in zip(filtered, tokens, strict=True)])
        assert (sampler > 0).all()  # every token was one the filters kept
        np.testing.assert_allclose(row["p (sampler)"], sampler.prod(), rtol=2e-3)
        p = np.array([softmax(z)[t] for z, t in zip(rows_logits, tokens, strict=True)])
        np.testing.assert_allclose(row["p (model)"], p.prod(), rtol=2e-3)


def test_a_fork_reads_the_prefix_cache_and_adds_only_its_own_rows(model):
    prompt = tuple(model.encode("Attention lets every token look back at"))
    state = generation.continuation(model, prompt, 2)[0]
    result = branching.fork(model, state, Sampling(), 3, 2)
    assert result.prefix_positions == len(state.ids) == state.cache.length
    assert result.prefix_bytes == state.cache.bytes_used
    for branch in result.branches:
        assert branch.positions == 2 and branch.cache_bytes == 2 * BYTES_PER_POSITION
    # One buffer can grow in place for one branch only; the others copy the prefix's rows.
    assert sum(b.in_place for b in result.branches) <= 1
    # The branches wrote past the prefix, never into it: the text still continues from its
    # cache as one full pass over the same tokens predicts.
    token = int(np.argmax(state.logits))
    after = run_llama(model, [token], state.cache).next_token_logits
    full = run_llama(model, np.asarray([*state.ids, token])).next_token_logits
    np.testing.assert_allclose(after, full, atol=2e-4)
    assert branching.fork(model, state, Sampling(0.0, 9, 0.3, 0.3, 4), 3, 2) is result
    # Greedily, the branch of the likeliest token is what the page itself writes next.
    main = generation.continuation(model, prompt, 4)[0]
    assert result.branches[0].token_ids == main.ids[len(state.ids) :]


# -- letting the model go when no one uses it -----------------------------------------------------


def test_idle_release_waits_for_the_last_use_and_zero_minutes_never_releases():
    releases = []
    minutes = [10.0]
    idle = IdleRelease(lambda: releases.append(1), lambda: minutes[0])
    assert not idle.armed
    idle.used()
    idle.used()
    assert idle.armed
    idle.release_if_idle()  # 10 minutes are not up: it waits out the rest
    assert releases == [] and idle.armed
    minutes[0] = 1e-9
    idle.release_if_idle()
    assert releases == [1] and not idle.armed
    minutes[0] = 0.5 / 60  # the timer itself, half a second after the last use
    idle.used()
    deadline = time.monotonic() + 30
    while len(releases) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert releases == [1, 1] and not idle.armed
    minutes[0] = 0.0
    idle.used()
    assert not idle.armed


RELEASE_SCRIPT = """
import json, os, time
import numpy as np
from attention_core.models.llama import run_llama
from ui.decoder.generation import DEFAULT_PROMPT
from ui.models import smollm

from server.resident import memory_mb

def held_mb():  # this process's resident memory, and what the model's kept process holds
    return memory_mb(os.getpid())

before = held_mb()
model = smollm.load_decoder().model
# Mapped weights are resident once read: a pass reads every one, as a viewer's first does.
run_llama(model, model.encode(DEFAULT_PROMPT))
loaded = held_mb()
smollm.release_decoder()  # an idle release while a viewer's page still holds the model
kept = smollm.load_decoder().model is model
del model
smollm.release_decoder()  # the last holder has gone: the model and its memory go too
time.sleep(1.5)
released = held_mb()
again = smollm.load_decoder().model
logits = run_llama(again, again.encode(DEFAULT_PROMPT)).next_token_logits
print(json.dumps({"before": before, "loaded": loaded, "released": released, "kept": kept,
                  "next": again.token_text(int(np.argmax(logits)))}))
"""


def test_an_idle_model_is_let_go_with_its_memory_and_never_loaded_twice(model):
    # A process of its own: this one's AppTest sessions keep pages (and their model) alive.
    done = subprocess.run(
        [sys.executable, "-c", RELEASE_SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    memory = json.loads(done.stdout.strip().splitlines()[-1])
    assert memory["kept"], "a held model was read a second time"
    # bfloat16 weights are 257 MiB; they go back to the system, not only to Python.
    assert memory["loaded"] - memory["before"] > 200, memory
    assert memory["loaded"] - memory["released"] > 200, memory
    assert memory["next"] == " Paris"
