"""attention_core.training.run: settings checked in sentences, a run that is a function of its
settings, its chunks and scores, a divergence caught, and an induction head that forms (slow)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.head_roles import induction_scores
from attention_core.losses import next_token_losses
from attention_core.training import run as training_run
from attention_core.training.adamw import AdamWState, adamw_update
from attention_core.training.attn_only import (
    AttnOnlyConfig,
    attn_only_gradients,
    init_params,
    next_token_loss,
    run_attn_only,
)
from attention_core.training.run import (
    EVAL_EVERY,
    HELD_OUT_COUNT,
    LIMITS,
    TrainingSettings,
    evaluate,
    settings_problems,
    snapshot_bytes,
    train,
)
from attention_core.training.sequences import held_out, training_batch

SMALL = dict(n_layers=2, n_heads=2, d_model=16, d_vocab=16, n_ctx=8, batch=8, steps=60, seed=2)


class Asked:
    """Settings as a page reads them from its widgets, right or wrong."""

    def __init__(self, **changes):
        self.__dict__.update({**TrainingSettings().__dict__, **changes})


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"lr": 0.0}, "lr", "greater than 0, got 0: at 0 the weights never move"),
        ({"lr": -0.01}, "lr", "climb the loss"),
        ({"lr": math.nan}, "lr", "must be a number"),
        ({"lr": "fast"}, "lr", "must be a number"),
        ({"lr": 5.0}, "lr", "at most 1"),
        ({"n_ctx": 2}, "n_ctx", "between 4 and 64"),
        ({"steps": 10**6}, "steps", "between 25 and 5,000"),
        ({"d_vocab": 8}, "d_vocab", "at least 16"),
        ({"n_heads": 3}, "n_heads", "3 heads do not divide d_model = 64"),
        ({"n_heads": 9}, "n_heads", "heads must be between 1 and 8 here, got 9."),
        ({"batch": 2.5}, "batch", "whole number"),
        ({"seed": True}, "seed", "whole number"),
    ],
)
def test_each_wrong_setting_gets_a_sentence_under_its_own_name(changes, field, words):
    problems = settings_problems(Asked(**changes))
    assert list(problems) == [field]
    assert words in problems[field]
    with pytest.raises(AttentionInputError, match=r"\."):
        TrainingSettings(**changes)


def test_the_defaults_are_a_valid_run_and_the_limits_one_of_a_few_hundred_steps():
    assert settings_problems(TrainingSettings()) == {}
    assert settings_problems(Asked(lr=1.0)) == {}  # the largest learning rate
    largest = Asked(**{name: hi for name, (_, hi) in LIMITS.items()})
    problems = settings_problems(largest)
    assert list(problems) == ["steps"]
    assert "at most 157, or a smaller model or batch" in problems["steps"]
    assert settings_problems(Asked(**{**largest.__dict__, "steps": 157})) == {}
    assert settings_problems(Asked(**{**largest.__dict__, "steps": 158})) != {}


def test_a_run_is_a_function_of_its_settings_bit_for_bit():
    settings = TrainingSettings(**SMALL)
    first = list(train(settings))
    again = list(train(settings))
    assert [chunk.step for chunk in first] == [0, 25, 50, 60]
    last, repeat = first[-1].params, again[-1].params
    assert all(np.array_equal(last[name], repeat[name]) for name in last)
    other = list(train(replace(settings, seed=3)))[-1].params
    assert not np.array_equal(last["embed.W_E"], other["embed.W_E"])


def test_each_chunk_scores_the_model_it_holds_on_the_held_out_sequences():
    settings = TrainingSettings(**SMALL)
    chunks = list(train(settings))
    config, probe = settings.config, held_out(2, 32, 8, 16)
    assert math.isnan(chunks[0].train_loss) and all(c.train_loss > 0 for c in chunks[1:])
    for chunk in (chunks[0], chunks[-1]):
        # Again from the parameters, by the formulas directly: losses by position, then means.
        steps = run_attn_only(config, chunk.params, probe.tokens)
        losses = next_token_losses(
            steps.logits[:, :-1].reshape(-1, 16), probe.tokens[:, 1:].reshape(-1)
        )
        losses = losses.reshape(32, 7)
        # Period 4 over 8 tokens: predictions 0..2 are of new tokens, 4..6 of repeats.
        assert chunk.evaluation.loss_first == pytest.approx(losses[:, :3].mean(), rel=1e-6)
        assert chunk.evaluation.loss_repeated == pytest.approx(losses[:, 4:].mean(), rel=1e-6)
        mean_pattern = steps.patterns.mean(axis=1)
        np.testing.assert_allclose(
            chunk.evaluation.induction, induction_scores(mean_pattern, 4), rtol=1e-6
        )
        example = run_attn_only(config, chunk.params, probe.example).patterns[:, 0]
        np.testing.assert_allclose(chunk.evaluation.patterns, example, rtol=1e-6)
    assert chunks[0].params is not None and chunks[-1].params is not None
    assert chunks[0].evaluation.loss_first == pytest.approx(math.log(16), abs=0.3)


def test_snapshots_stay_within_their_count_and_bytes():
    assert TrainingSettings().snapshot_every == EVAL_EVERY  # 41 of the default model fit
    big = TrainingSettings(n_layers=3, n_heads=8, d_model=128, d_vocab=256, n_ctx=64, steps=600)
    snapshots = math.ceil(600 / big.snapshot_every) + 1
    per_snapshot = 4 * (sum(v.size for v in init_params(big.config, 0).values()) + 3 * 8 * 16 * 16)
    assert big.snapshot_every % EVAL_EVERY == 0
    assert snapshots * per_snapshot <= 17 * 2**20


def test_a_run_whose_weights_overflow_stops_and_keeps_the_last_good_checkpoint():
    # One token's embedding so large that any sequence reading it overflows float32's scores: it
    # is in no held-out sequence, so the start scores, and the run stops at the first batch that
    # draws it.
    settings = TrainingSettings(**{**SMALL, "d_vocab": 256, "steps": 200})
    probe = held_out(settings.seed, 32, 8, 256)
    unseen = sorted(set(range(256)) - set(probe.tokens.ravel()) - set(probe.example))[0]
    start = init_params(settings.config, 0)
    start["embed.W_E"][unseen] = 1e30
    chunks = list(train(settings, start=start))
    stop = chunks[-1]
    # The step whose loss is not a number, found here by the run's own parts.
    config, params = settings.config, dict(start)
    state, rng = AdamWState.zeros_like(params), np.random.default_rng([settings.seed, 1])
    failed_at = 0
    while failed_at < settings.steps:
        failed_at += 1
        tokens, _periods = training_batch(rng, settings.batch, 8, 256, probe.segments)
        with np.errstate(all="ignore"):
            forward = run_attn_only(config, params, tokens)
            loss, loss_grads = next_token_loss(forward)
            if not np.isfinite(loss):
                break
            grads = attn_only_gradients(config, params, forward, loss_grads)
            params, state = adamw_update(params, grads.params, state, settings.optimizer)
    assert stop.diverged.startswith(f"The loss stopped being a number at step {failed_at}:")
    assert stop.step == chunks[-2].step == (failed_at - 1) // EVAL_EVERY * EVAL_EVERY
    assert stop.evaluation is chunks[-2].evaluation
    assert stop.params is not None and all(np.isfinite(v).all() for v in stop.params.values())


def test_a_start_that_overflows_on_the_held_out_sequences_is_refused():
    settings = TrainingSettings(**SMALL)
    huge = {name: value * 1e18 for name, value in init_params(settings.config, 0).items()}
    with pytest.raises(AttentionInputError, match="overflow"):
        next(train(settings, start=huge))


def test_a_start_that_does_not_fit_the_model_is_refused():
    settings = TrainingSettings(**SMALL)
    good = init_params(settings.config, 0)
    with pytest.raises(AttentionInputError, match="do not fit"):
        next(train(settings, start={"embed.W_E": np.zeros((16, 16))}))
    wrong_shape = {**good, "unembed.b_U": np.zeros(15)}
    with pytest.raises(AttentionInputError, match=r"do not fit this model: unembed\.b_U"):
        next(train(settings, start=wrong_shape))
    extra = {**good, "blocks.2.attn.W_Q": np.zeros((2, 16, 8))}
    with pytest.raises(AttentionInputError, match=r"do not fit this model: blocks\.2\.attn\.W_Q"):
        next(train(settings, start=extra))


def test_the_run_is_its_parts_in_a_loop_step_by_step():
    # Written out here from the parts: batches from the seed's stream 1, none held out, the
    # forward, the loss, the backward and AdamW, 60 times.
    settings = TrainingSettings(**SMALL)
    config = settings.config
    params = init_params(config, settings.seed)
    state = AdamWState.zeros_like(params)
    rng = np.random.default_rng([settings.seed, 1])
    exclude = held_out(settings.seed, HELD_OUT_COUNT, 8, 16).segments
    for _ in range(settings.steps):
        tokens, _periods = training_batch(rng, settings.batch, 8, 16, exclude)
        forward = run_attn_only(config, params, tokens)
        _loss, loss_grads = next_token_loss(forward)
        grads = attn_only_gradients(config, params, forward, loss_grads)
        params, state = adamw_update(params, grads.params, state, settings.optimizer)
    final = list(train(settings))[-1].params
    assert all(np.array_equal(final[name], params[name]) for name in params)


def test_a_checkpoint_holds_its_parameters_and_patterns_in_float32():
    # 3 layers of 8 heads, d_model 128, 256 tokens, 64 positions: 272,128 parameters
    # (W_E 32,768, W_pos 8,192, each layer 4 × 16,384 + 3 × 128 + 128, W_U 32,768, b_U 256)
    # and 3 × 8 patterns of the 16-token example, 4 bytes each.
    config = AttnOnlyConfig(3, 8, 128, 256, 64)
    assert snapshot_bytes(config) == 4 * (272_128 + 3 * 8 * 16 * 16) == 1_113_088
    big = dict(n_layers=3, n_heads=8, d_model=128, d_vocab=256, n_ctx=64)
    # 16 MiB hold 15 of them: 24 chunks of 25 steps (or 15) kept every second one.
    assert TrainingSettings(**big, steps=600).snapshot_every == 50
    assert TrainingSettings(**big, steps=375).snapshot_every == 50
    assert TrainingSettings(**big, steps=350).snapshot_every == 25


def test_snapshots_are_kept_at_their_steps_and_at_the_end(monkeypatch):
    # Room for 4 of the small model's checkpoints: 5 chunks (120 steps) keep every second one.
    monkeypatch.setattr(training_run, "SNAPSHOT_BYTES", 4 * 12_352)
    settings = TrainingSettings(**{**SMALL, "steps": 120})
    assert settings.snapshot_every == 50
    kept = [(chunk.step, chunk.params is not None) for chunk in train(settings)]
    assert kept == [(0, True), (25, False), (50, True), (75, False), (100, True), (120, True)]


def test_evaluation_with_every_head_removed_reads_only_the_direct_path():
    settings = TrainingSettings(**SMALL)
    params = init_params(settings.config, 0)
    probe = held_out(0, 4, 8, 16)
    removed = evaluate(settings.config, params, probe, head_mask=np.zeros((2, 2)))
    whole = evaluate(settings.config, params, probe)
    assert removed.loss_repeated != whole.loss_repeated
