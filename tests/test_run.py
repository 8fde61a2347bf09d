"""attention_core.training.run: settings checked in sentences, a run that is a function of its
settings, its chunks and scores, a divergence caught, and an induction head that forms (slow)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from attention_core import AttentionInputError
from attention_core.head_roles import induction_scores
from attention_core.losses import next_token_losses
from attention_core.training.attn_only import init_params, run_attn_only
from attention_core.training.run import (
    EVAL_EVERY,
    LIMITS,
    TrainingSettings,
    evaluate,
    settings_problems,
    train,
)
from attention_core.training.sequences import held_out

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
    assert stop.diverged.startswith("The loss stopped being a number at step ")
    failed_at = int(stop.diverged.split("step ")[1].split(":")[0])
    assert stop.step == chunks[-2].step < failed_at <= stop.step + EVAL_EVERY
    assert stop.evaluation is chunks[-2].evaluation
    assert stop.params is not None and all(np.isfinite(v).all() for v in stop.params.values())


def test_a_start_that_overflows_on_the_held_out_sequences_is_refused():
    settings = TrainingSettings(**SMALL)
    huge = {name: value * 1e18 for name, value in init_params(settings.config, 0).items()}
    with pytest.raises(AttentionInputError, match="overflow"):
        next(train(settings, start=huge))


def test_a_start_that_does_not_fit_the_model_is_refused():
    settings = TrainingSettings(**SMALL)
    with pytest.raises(AttentionInputError, match="do not fit"):
        next(train(settings, start={"embed.W_E": np.zeros((16, 16))}))


def test_evaluation_with_every_head_removed_reads_only_the_direct_path():
    settings = TrainingSettings(**SMALL)
    params = init_params(settings.config, 0)
    probe = held_out(0, 4, 8, 16)
    removed = evaluate(settings.config, params, probe, head_mask=np.zeros((2, 2)))
    whole = evaluate(settings.config, params, probe)
    assert removed.loss_repeated != whole.loss_repeated
