"""The attention-only models trained on the learning page: one run per settings, shared by a room.

A run is `attention_core.training.run.train`, started once per distinct settings (and starting
model) on the process's board of long runs (server.jobs): fifty viewers of one link watch one
run grow, and one who arrives midway sees what is done so far. Its chunks, one every 25 steps,
are every viewer's to read and none may change (they are made read-only).

    training_run(settings, start=None)   a `TrainingRun`: the run of these settings as it stands
                                          now (started if new); `start` a `ModelFile` to go on from
    wait_for(run, progress)               until the run has finished, telling `progress(fraction,
                                          text)` as it grows (the step-by-step page's head link)
    run_code(settings) / settings_of(code)   the settings in one short link parameter
    head_example(run, layer, head)        a head's q, k, v on the held-out example, as an
                                          `Example` for the step-by-step page's editors
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention_core import AttentionInputError
from attention_core.lessons.presets import Example
from attention_core.training.attn_only import run_attn_only
from attention_core.training.model_file import ModelFile
from attention_core.training.run import HELD_OUT_COUNT, Chunk, TrainingSettings, evaluate, train
from attention_core.training.sequences import held_out
from server.jobs import BoardFull, JobBoard
from ui.widgets.byte_cache import MB, nbytes, read_only, register_holder

__all__ = [
    "BOARD",
    "TrainingRun",
    "head_example",
    "inspected",
    "progress_text",
    "run_code",
    "settings_of",
    "token_labels",
    "training_run",
    "wait_for",
]

# Two runs advance at once (the machine's two cores), six more wait in line; finished runs stay
# while their chunks fit, for the room's later visits and the step-by-step page's links.
BOARD = JobBoard("learning.runs", running=2, max_jobs=8, max_bytes=48 * MB, size=nbytes)
register_holder(BOARD.name, BOARD)
_FIELDS = tuple(asdict(TrainingSettings()))
# A viewer who has looked at a run this recently is watching it (pages look every 1 to 5 s).
WATCHING_S = 12.0


@dataclass(frozen=True, eq=False)
class TrainingRun:
    """A run as it stands when read: its settings, the chunks so far, and where it is.

    chunks   `Chunk`s at steps 0, 25, 50, … (the last, after a divergence, repeats the last good
             one with its parameters and the sentence saying why it stopped)
    state    "waiting" (in line, `ahead` runs before it), "running", "idle", "done", "failed"
    error    why a failed run failed, in a sentence
    key      the run's name on the board: its settings and its start
    watchers how many viewers have looked at it in the last few seconds (a room's size)
    """

    settings: TrainingSettings
    chunks: tuple[Chunk, ...]
    state: str
    ahead: int
    error: str
    key: str
    watchers: int = 1

    @property
    def digest(self) -> str:
        """Stands for what a figure of the run shows: its name and how far it has come."""
        return f"{self.key}:{len(self.chunks)}:{self.state}"

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    @property
    def diverged(self) -> str:
        return self.chunks[-1].diverged if self.chunks else ""

    @property
    def step(self) -> int:
        return self.chunks[-1].step if self.chunks else 0

    @property
    def steps(self) -> np.ndarray:
        """The chunks' steps `(chunk,)`."""
        return np.array([chunk.step for chunk in self.chunks])

    def snapshot(self, step: int) -> Chunk:
        """The last chunk at or before `step` that kept its parameters."""
        kept = [c for c in self.chunks if c.params is not None and c.step <= step]
        return kept[-1] if kept else next(c for c in self.chunks if c.params is not None)

    @property
    def final(self) -> Chunk:
        """The chunk holding the parameters the run ends with (the last good ones)."""
        return self.snapshot(self.chunks[-1].step)


def _key(settings: TrainingSettings, start: ModelFile | None) -> str:
    started = "" if start is None else hashlib.sha256(b"".join(
        name.encode() + value.tobytes() for name, value in start.params.items()
    )).hexdigest()[:16]  # fmt: skip
    return f"{run_code(settings)}/{started}"


def _chunks(settings: TrainingSettings, start: ModelFile | None):
    for chunk in train(settings, None if start is None else start.params):
        yield read_only(chunk)


def training_run(settings: TrainingSettings, start: ModelFile | None = None) -> TrainingRun:
    """The run of `settings` (from `start`'s parameters, if given) as it stands now; started if
    the board does not hold it. Raises AttentionInputError when the board is full."""
    key = _key(settings, start)
    context = get_script_run_ctx(suppress_warning=True)
    viewer = "" if context is None else context.session_id
    try:
        job = BOARD.run(key, lambda: _chunks(settings, start), viewer)
    except BoardFull as error:
        raise AttentionInputError(str(error)) from None
    chunks = job.items
    if len(chunks) > 1 and chunks[-1].diverged and chunks[-2].step == chunks[-1].step:
        # A stop repeats the last good chunk, now with its parameters: one chunk a step.
        chunks = (*chunks[:-2], chunks[-1])
    error = ""
    if job.error is not None:
        error = str(job.error) if isinstance(job.error, AttentionInputError) else (
            f"The run failed: {type(job.error).__name__}: {job.error}"
        )  # fmt: skip
    watchers = max(1, job.watchers(WATCHING_S))
    return TrainingRun(settings, chunks, job.state, job.ahead, error, key, watchers)


def inspected(model: ModelFile, settings: TrainingSettings) -> TrainingRun:
    """A downloaded model as a finished run of one chunk: scored on the held-out sequences of
    `settings` (whose sizes are the model's), at the step its file says it was trained to."""
    probe = held_out(settings.seed, HELD_OUT_COUNT, settings.n_ctx, settings.d_vocab)
    with np.errstate(over="ignore", invalid="ignore"):
        evaluation = evaluate(model.config, model.params, probe)
    step = int(model.about.get("steps", 0)) if str(model.about.get("steps", 0)).isdigit() else 0
    chunk = read_only(Chunk(step, float("nan"), evaluation, model.params))
    return TrainingRun(settings, (chunk,), "done", 0, "", f"file/{_key(settings, model)}")


def wait_for(
    settings: TrainingSettings, progress: Callable[[float, str], None], poll: float = 0.5
) -> TrainingRun:
    """The run of `settings`, once it has finished; `progress(fraction, text)` is called every
    `poll` seconds meanwhile (where a page draws, and so where Streamlit stops a wait nobody
    watches any more)."""
    while True:
        run = training_run(settings)
        if run.finished:
            return run
        progress(min(1.0, run.step / settings.steps), progress_text(run))
        time.sleep(poll)


def progress_text(run: TrainingRun) -> str:
    """Where the run stands, in a few words."""
    if run.state == "waiting":
        return f"In line behind {run.ahead} other training{'s' if run.ahead != 1 else ''}…"
    return f"Training: step {run.step:,} of {run.settings.steps:,}"


def run_code(settings: TrainingSettings) -> str:
    """The settings in one link parameter, in TrainingSettings' order:
    `2_4_64_64_32_1000_0.003_32_0`."""
    return "_".join(f"{getattr(settings, name):g}" if name == "lr" else str(getattr(settings, name))
                    for name in _FIELDS)  # fmt: skip


def settings_of(code: str) -> TrainingSettings:
    """The settings a `run_code` names; an AttentionInputError if it names none."""
    parts = code.split("_")
    if len(parts) != len(_FIELDS):
        raise AttentionInputError(
            f"The link's run `{code[:40]}` is not a training's settings ({len(_FIELDS)} numbers "
            "joined by “_”)."
        )
    try:
        values = {name: (float if name == "lr" else int)(part)
                  for name, part in zip(_FIELDS, parts, strict=True)}  # fmt: skip
    except ValueError:
        raise AttentionInputError(
            f"The link's run `{code[:40]}` holds something not a number."
        ) from None
    return TrainingSettings(**values)


def head_example(run: TrainingRun, layer: int, head: int) -> Example:
    """Head (layer, head), from 0, of the run's final model on its held-out example: q, k, v
    `(tokens, d_head)` after W_Q, W_K, W_V and their biases, labelled with the token ids."""
    settings, chunk = run.settings, run.final
    config = settings.config
    if not (0 <= layer < config.n_layers and 0 <= head < config.n_heads):
        raise AttentionInputError(
            f"This model has layers 0 to {config.n_layers - 1} and heads 0 to "
            f"{config.n_heads - 1}: there is no head {layer}.{head}."
        )
    block = run_attn_only(config, chunk.params, example_tokens(settings)).blocks[layer]
    labels = token_labels(example_tokens(settings))
    return Example(
        q=block.q_heads[0, head], k=block.k_heads[0, head], v=block.v_heads[0, head],
        query_labels=labels, key_labels=labels,
        title=f"of head {layer}.{head} of the model trained for {chunk.step:,} steps",
    )  # fmt: skip


def example_tokens(settings: TrainingSettings) -> np.ndarray:
    """`(n,)` the run's held-out example: a segment of token ids and its copy."""
    return held_out(settings.seed, HELD_OUT_COUNT, settings.n_ctx, settings.d_vocab).example


def token_labels(tokens: Any) -> list[str]:
    """A toy vocabulary's tokens have no text: each is shown by its id."""
    return [str(int(token)) for token in tokens]
