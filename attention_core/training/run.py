"""Training the attention-only model on repeated segments, scored as it learns.

    settings = TrainingSettings(n_layers=2, steps=1500, seed=0)   # every size checked and capped
    for chunk in train(settings):                                # one chunk every EVAL_EVERY steps
        chunk.step, chunk.train_loss, chunk.evaluation.induction  # (layer, head) scores

Every step draws a batch of fresh sequences (`sequences.training_batch`), runs the model forward
(`attn_only.run_attn_only`), takes the mean next-token loss and its gradient
(`attn_only.next_token_loss`), runs it backward (`attn_only.attn_only_gradients`) and moves every
parameter by AdamW (`adamw.adamw_update`). Every EVAL_EVERY steps the model is scored on the
held-out sequences (`evaluate`): its loss on first-seen and on repeated tokens, and every head's
previous-token and prefix-matching (induction) scores, `head_roles`' formulas.

The run is a function of its settings alone: the same settings give the same parameters, bit for
bit, on the same machine (three seeded streams: the initial weights, the batches, the held-out
set). A loss that is not a finite number stops the run; the last chunk before it is the last good
checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..head_roles import induction_scores, previous_token_scores
from ..losses import next_token_losses
from ..validation import AttentionInputError
from .adamw import AdamW, AdamWState, adamw_update
from .attn_only import (
    AttnOnlyConfig,
    attn_only_gradients,
    init_params,
    next_token_loss,
    parameter_shapes,
    run_attn_only,
)
from .sequences import (
    EXAMPLE_TOKENS,
    HeldOut,
    check_sizes,
    held_out,
    seen_before,
    training_batch,
)

__all__ = [
    "EVAL_EVERY",
    "LIMITS",
    "Chunk",
    "Evaluation",
    "TrainingSettings",
    "evaluate",
    "settings_problems",
    "snapshot_bytes",
    "train",
]

EVAL_EVERY = 25
HELD_OUT_COUNT = 32
# What one run may ask for: a link is typed by a stranger, and a run is seconds of a core.
LIMITS = {
    "n_layers": (1, 3),
    "n_heads": (1, 8),
    "d_model": (8, 128),
    "d_vocab": (4, 256),
    "n_ctx": (4, 64),
    "steps": (25, 5000),
    "batch": (1, 128),
    "seed": (0, 2**31 - 1),
}
MAX_LR = 1.0
# The most arithmetic one run may ask for: eight default runs (about two minutes here), so that
# the largest model still trains a few hundred steps and no link holds a core for long.
MAX_RUN_FLOPS = 8 * 1000 * 32 * 3 * 1_572_864
# The most a run's saved checkpoints (parameters and example patterns) may hold, and how many.
MAX_SNAPSHOTS = 41
SNAPSHOT_BYTES = 16 * 2**20


@dataclass(frozen=True)
class TrainingSettings:
    """Everything a run depends on. Invalid settings raise the first of `settings_problems`."""

    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    d_vocab: int = 64
    n_ctx: int = 32
    steps: int = 1000
    lr: float = 3e-3
    batch: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        problems = settings_problems(self)
        if problems:
            raise AttentionInputError(next(iter(problems.values())))

    @property
    def config(self) -> AttnOnlyConfig:
        return AttnOnlyConfig(self.n_layers, self.n_heads, self.d_model, self.d_vocab, self.n_ctx)

    @property
    def optimizer(self) -> AdamW:
        return AdamW(self.lr)

    @property
    def snapshot_every(self) -> int:
        """Steps between saved checkpoints: every EVAL_EVERY, or a multiple of it, so that at
        most MAX_SNAPSHOTS and SNAPSHOT_BYTES are kept."""
        count = max(2, min(MAX_SNAPSHOTS, SNAPSHOT_BYTES // snapshot_bytes(self.config)))
        chunks = math.ceil(self.steps / EVAL_EVERY)
        return EVAL_EVERY * max(1, math.ceil(chunks / (count - 1)))


def snapshot_bytes(config: AttnOnlyConfig) -> int:
    """What a saved checkpoint holds: every parameter, and every head's pattern on the held-out
    example, float32 (4 bytes) each."""
    parameters = sum(math.prod(shape) for shape in parameter_shapes(config).values())
    example = min(config.n_ctx, EXAMPLE_TOKENS)
    return 4 * (parameters + config.n_layers * config.n_heads * example * example)


def step_flops(config: AttnOnlyConfig) -> int:
    """Multiply-adds ×2 of one sequence's forward and backward pass (the backward about twice the
    forward): per layer the four projections 4·n·d² and the two pattern products 2·n²·d, then
    the unembedding 2·n·d·vocab, for n = n_ctx and d = d_model."""
    n, d = config.n_ctx, config.d_model
    forward = config.n_layers * (4 * n * d * d + 2 * n * n * d) + 2 * n * d * config.d_vocab
    return 3 * forward


_NAMES = {
    "n_layers": "layers",
    "n_heads": "heads",
    "d_model": "d_model",
    "d_vocab": "The vocabulary",
    "n_ctx": "The context",
    "steps": "The number of steps",
    "batch": "The batch",
    "seed": "The seed",
}


def settings_problems(settings: object) -> dict[str, str]:
    """What is wrong with each setting of `settings` (a TrainingSettings or anything with its
    attributes), by field name, in a sentence for the reader; empty when the run can start."""
    problems: dict[str, str] = {}
    for name, (lo, hi) in LIMITS.items():
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            problems[name] = f"{_NAMES[name]} must be a whole number, got {value!r}."
        elif not lo <= value <= hi:
            problems[name] = (
                f"{_NAMES[name]} must be between {lo:,} and {hi:,} here, got {value:,}."
            )
    lr = settings.lr
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr):
        problems["lr"] = (
            f"The learning rate must be a number, got {lr!r}: each step moves the weights "
            "by about this much (3e-3 is a good start)."
        )
    elif lr <= 0:
        problems["lr"] = (
            f"The learning rate must be greater than 0, got {lr:g}: at {lr:g} the weights "
            f"{'never move' if lr == 0 else 'climb the loss instead of descending it'}."
        )
    elif lr > MAX_LR:
        problems["lr"] = f"The learning rate must be at most {MAX_LR:g}, got {lr:g}."
    if "n_heads" not in problems and "d_model" not in problems:
        if settings.d_model % settings.n_heads:
            problems["n_heads"] = (
                f"{settings.n_heads} heads do not divide d_model = {settings.d_model}: each head "
                "gets d_model / heads features."
            )
    if "n_ctx" not in problems and "d_vocab" not in problems:
        try:
            check_sizes(settings.n_ctx, settings.d_vocab)
        except AttentionInputError as error:  # the context is in its limits: the vocabulary
            problems["d_vocab"] = str(error)
    if not problems:
        config = AttnOnlyConfig(
            settings.n_layers, settings.n_heads, settings.d_model, settings.d_vocab, settings.n_ctx
        )
        most = MAX_RUN_FLOPS // (settings.batch * step_flops(config))
        if settings.steps > most:
            problems["steps"] = (
                f"{settings.steps:,} steps of this model with a batch of {settings.batch} are "
                f"more than one run may take here: at most {most:,}, or a smaller model or batch."
            )
    return problems


@dataclass(frozen=True, eq=False)
class Evaluation:
    """The model scored on the held-out sequences.

    loss_first     mean loss (nats) of predicting a token seen for the first time
    loss_repeated  mean loss of predicting a token that repeats what followed its earlier copy
    previous       `(layer, head)` previous-token scores (mean weight on the token just before)
    induction      `(layer, head)` prefix-matching scores (mean weight of a second-copy token on
                   the token after its earlier copy)
    patterns       `(layer, head, n, n)` every head's weights on the held-out example
    """

    loss_first: float
    loss_repeated: float
    previous: np.ndarray
    induction: np.ndarray
    patterns: np.ndarray


def evaluate(
    config: AttnOnlyConfig,
    params: Mapping[str, np.ndarray],
    probe: HeldOut,
    head_mask: object = None,
) -> Evaluation:
    """Score `params` on the held-out sequences `probe` (with some heads removed by
    `head_mask` `(layer, head)`, as `run_attn_only` takes it)."""
    steps = run_attn_only(config, params, probe.tokens, head_mask=head_mask)
    rows, n_ctx = probe.tokens.shape
    vocab = config.d_vocab
    predictions = rows * (n_ctx - 1)
    losses = next_token_losses(
        steps.logits[:, :-1].reshape(predictions, vocab), probe.tokens[:, 1:].reshape(predictions)
    ).reshape(rows, n_ctx - 1)
    first, repeated = seen_before(np.full(rows, probe.period), n_ctx)
    # The mean over sequences of a head's weights scores as the mean of its scores: linear.
    mean_patterns = steps.patterns.mean(axis=1)  # (layer, head, n_ctx, n_ctx)
    example = run_attn_only(config, params, probe.example, head_mask=head_mask)
    return Evaluation(
        loss_first=float(losses[first].mean()),
        loss_repeated=float(losses[repeated].mean()),
        previous=previous_token_scores(mean_patterns),
        induction=induction_scores(mean_patterns, probe.period),
        patterns=example.patterns[:, 0].astype(np.float32),
    )


@dataclass(frozen=True, eq=False)
class Chunk:
    """Where a run stands after `step` steps (0: before the first).

    train_loss   mean training loss over the chunk's steps (NaN for step 0)
    evaluation   the model scored on the held-out set
    params       the parameters, at a snapshot step (`TrainingSettings.snapshot_every`), the
                 last step and a stop; else None
    diverged     a sentence when the run stopped because the loss was not a number; such a
                 chunk repeats the last good one (its step, now with its parameters)
    """

    step: int
    train_loss: float
    evaluation: Evaluation
    params: dict[str, np.ndarray] | None = None
    diverged: str = ""


@dataclass
class _Run:
    """The run's moving parts between chunks (the one mutable thing: it never leaves `train`)."""

    params: dict[str, np.ndarray]
    state: AdamWState
    rng: np.random.Generator
    losses: list[float] = field(default_factory=list)


def train(
    settings: TrainingSettings, start: Mapping[str, np.ndarray] | None = None
) -> Iterator[Chunk]:
    """The run of the module docstring, a `Chunk` every EVAL_EVERY steps, the first at step 0.

    `start` continues from those parameters (a downloaded model's) with a fresh optimiser; by
    default the model starts from `init_params(config, seed)`.
    """
    config = settings.config
    params = init_params(config, settings.seed) if start is None else _checked(config, start)
    probe = held_out(settings.seed, HELD_OUT_COUNT, config.n_ctx, config.d_vocab)
    exclude = probe.segments
    run = _Run(params, AdamWState.zeros_like(params), np.random.default_rng([settings.seed, 1]))
    evaluation = _scored(config, params, probe)
    if evaluation is None:
        raise AttentionInputError(
            "The starting model's numbers overflow: its attention scores pass the largest "
            "float32 number on the held-out sequences, so it cannot be scored or trained."
        )
    last = Chunk(0, math.nan, evaluation, params)
    yield last
    every, optimizer = settings.snapshot_every, settings.optimizer
    for done in range(EVAL_EVERY, settings.steps + EVAL_EVERY, EVAL_EVERY):
        step = min(done, settings.steps)
        run.losses.clear()
        last_good = run.params
        problem = ""
        for _ in range(step - last.step):
            tokens, _periods = training_batch(
                run.rng, settings.batch, config.n_ctx, config.d_vocab, exclude
            )
            problem = _step(config, optimizer, run, tokens)
            if problem:
                break
        if not problem:
            evaluation = _scored(config, run.params, probe)
            problem = "" if evaluation is not None else _overflow(step)
        if problem:
            # The chunk before this one again, now with its parameters, and the reason.
            yield Chunk(last.step, math.nan, last.evaluation, last_good, problem)
            return
        snapshot = step % every == 0 or step == settings.steps
        last = Chunk(step, float(np.mean(run.losses)), evaluation, run.params if snapshot else None)
        yield last


def _scored(
    config: AttnOnlyConfig, params: Mapping[str, np.ndarray], probe: HeldOut
) -> Evaluation | None:
    """`evaluate`, or None where the model's numbers overflow on the held-out sequences."""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            return evaluate(config, params, probe)
        except AttentionInputError:  # a NaN pattern, from scores past float32
            return None


def _overflow(step: int) -> str:
    return (
        f"The loss stopped being a number at step {step}: the learning rate is too large for "
        "these weights, which grew until they overflowed. The charts stop at the last good "
        "checkpoint; try a smaller learning rate."
    )


def _step(config: AttnOnlyConfig, optimizer: AdamW, run: _Run, tokens: np.ndarray) -> str:
    """One training step on `tokens`, in `run`; a sentence if the loss was not a number."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow shows as the loss
        forward = run_attn_only(config, run.params, tokens)
        loss, loss_grads = next_token_loss(forward)
    if not math.isfinite(loss):
        return _overflow(run.state.step + 1)
    with np.errstate(over="ignore"):  # g² past float32 makes v inf: that step is 0, not NaN
        grads = attn_only_gradients(config, run.params, forward, loss_grads)
        run.params, run.state = adamw_update(run.params, grads.params, run.state, optimizer)
    run.losses.append(loss)
    return ""


def _checked(config: AttnOnlyConfig, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Starting parameters of this config's names and shapes, as float32 copies."""
    shapes = parameter_shapes(config)
    wrong = [name for name, shape in shapes.items() if np.shape(params.get(name)) != shape]
    if wrong or set(params) != set(shapes):
        named = ", ".join(wrong or sorted(set(params) ^ set(shapes)))
        raise AttentionInputError(f"The starting parameters do not fit this model: {named}.")
    return {name: np.array(params[name], dtype=np.float32) for name in shapes}
