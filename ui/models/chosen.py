"""The models a viewer may choose on a real-model page: the shipped one, and those the server's
operator lists, each opened by our own code (attention_core.models.families).

    config_of(source)           a listed checkpoint's config.json, read without loading it
    held_as(source)             "float32" for a 16-bit checkpoint small enough to hold so
    listed()                    the operator's models, ``ATTENTION_EXPLORER_MODELS`` (or the same
                                key in Streamlit's secrets): folders, GGUF files and Hub ids,
                                each named by ``families.checkpoint_name``; on a local run
                                (``make run``) also what this viewer typed in the sidebar
    bind(view, kind, default)   the page's ``?model=`` (a name among the options: a link that
                                names anything else, a path or a Hub id included, is refused
                                with a notice and shows the default, and reads nothing)
    selector(kind, key)         the sidebar's choice, and on a local run a box for a folder,
                                a file or a Hub id of the viewer's own
    load(name)                  a listed model through the host, one at a time besides the
                                shipped ones, let go when idle; a ``ChosenLoad`` with the model
                                or the sentence saying why there is none
    model_line(model, name)     family, parameters, weights and where it came from, naming no
                                path of the server's

Nothing here computes: the numbers come from attention_core.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention_core import AttentionInputError
from attention_core.models import BertModel, families
from attention_core.models.loading import read_config
from server.hub import hub_reachable
from server.kept_process import keep_with
from server.model_host import ChosenModelHost
from server.process_load import load_and_keep
from ui.widgets.byte_cache import bounded_by_bytes
from ui.widgets.state import PageState

MODELS_ENV_VAR = "ATTENTION_EXPLORER_MODELS"
MAX_PARAMS_ENV_VAR = "ATTENTION_EXPLORER_MAX_PARAMS"
DEFAULT_MAX_PARAMS = 600_000_000
# "1" (``make run`` sets it): one person's own machine, whose sidebar also opens a folder or a
# Hub id typed there. A shared server never reads a path or fetches an id a stranger names.
LOCAL_ENV_VAR = "ATTENTION_EXPLORER_LOCAL"
# A 16-bit checkpoint whose weights fit in this many MB as float32 is held in float32: its
# products then skip the widening that doubles a Gemma 3 270M's decode step
# (bench/bench_own_model.py). A larger one stays 16-bit, at half the memory.
FLOAT32_MB_ENV_VAR = "ATTENTION_EXPLORER_FLOAT32_MB"
DEFAULT_FLOAT32_MB = 1200
IDLE_ENV_VAR = "ATTENTION_EXPLORER_CHOSEN_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 10.0
TYPED_KEY = "models.typed"
LOADER = "attention_core.models.families:open_checkpoint"


@dataclass(frozen=True, eq=False)
class ChosenLoad:
    """A listed model (``model``), or why there is none (``error``); ``source`` is what was
    asked for, ``origin`` where it came from as a viewer may read it."""

    model: object | None
    error: str | None = None
    source: str = ""
    origin: str = ""

    @property
    def name(self) -> str:
        return families.checkpoint_name(self.source)

    @property
    def shape(self) -> tuple[int, int, int]:
        """An encoder's layers, heads per layer and positions (MiniLM's without one, so that a
        link's layer, head and token stay bound while the page says what is wrong)."""
        if not isinstance(self.model, BertModel):
            return 6, 12, 512
        config = self.model.config
        return config.num_hidden_layers, config.num_attention_heads, config.max_position_embeddings


def local_run() -> bool:
    return os.environ.get(LOCAL_ENV_VAR, "").strip() == "1"


def max_parameters() -> int:
    try:
        cap = int(float(os.environ.get(MAX_PARAMS_ENV_VAR, DEFAULT_MAX_PARAMS)))
    except ValueError:
        return DEFAULT_MAX_PARAMS
    return cap if cap > 0 else DEFAULT_MAX_PARAMS


def _operator_list() -> str:
    listed = os.environ.get(MODELS_ENV_VAR, "").strip()
    if listed:
        return listed
    try:
        return str(st.secrets.get(MODELS_ENV_VAR, "") or "")
    except Exception:  # no secrets file: Streamlit raises rather than return nothing
        return ""


def listed() -> dict[str, str]:
    """``{name: source}`` of every model a viewer of this session may choose."""
    models = families.listed_checkpoints(_operator_list())
    if local_run():
        for source in st.session_state.get(TYPED_KEY, ()):
            models.setdefault(families.checkpoint_name(source), source)
    return models


@bounded_by_bytes(1_000_000, name="models.configs", lane=None)
def config_of(source: str) -> dict | None:
    """A listed checkpoint's config.json, read without loading it (a folder's, or a Hub id's
    already in this machine's cache), or None: a GGUF file, or nothing there to read."""
    kind = families.checkpoint_kind(source)
    if kind == "gguf":
        return None
    try:
        if kind == "hub":
            from huggingface_hub import try_to_load_from_cache

            config = try_to_load_from_cache(source, "config.json")
            if not isinstance(config, str):
                return None
            path = Path(config)
        else:
            path = Path(source).expanduser() / "config.json"
        return read_config(path)
    except (AttentionInputError, ImportError, OSError):
        return None


def kind_of(source: str) -> str:
    """ "decoder", "encoder", or "" when it cannot be told before loading (a Hub id not yet in
    the cache, a folder without a config): from the config alone."""
    if families.checkpoint_kind(source) == "gguf":
        return "decoder"
    config = config_of(source)
    try:
        return "" if config is None else families.family_of(config).kind
    except AttentionInputError:
        return ""


def options(kind: str, shipped: str, also: tuple[str, ...] = ()) -> list[str]:
    """The shipped model's name first (and ``also``), then each listed model of ``kind`` (or of
    a kind not yet known)."""
    fitting = (name for name, source in listed().items() if kind_of(source) in (kind, ""))
    return [shipped, *also, *fitting]


def bind(view: PageState, kind: str, shipped: str, also: tuple[str, ...] = ()) -> str:
    """The widget key of the page's model choice, bound to ``?model=``."""
    return view.choice_key("model", shipped, options(kind, shipped, also))


def selector(kind: str, key: str, shipped: str, shipped_label: str) -> str:
    """The sidebar's model choice (and, on a local run, a box to open one of the viewer's own);
    the name chosen."""
    names = options(kind, shipped)
    with st.sidebar:
        name = st.selectbox(
            f"Model ({kind})", names, key=key,
            format_func=lambda n: shipped_label if n == shipped else n,
            help=f"The {kind} this page runs. A server lists more in ${MODELS_ENV_VAR}.",
        )  # fmt: skip
        if local_run():
            st.text_input(
                "Open your own model", key="models.typed_source",
                placeholder="a folder, a .gguf file or a Hub id (owner/name)",
                on_change=_add_typed, args=(key,),
            )  # fmt: skip
    return name


def _add_typed(key: str) -> None:
    source = st.session_state.get("models.typed_source", "").strip()
    if not source:
        return
    typed = [*st.session_state.get(TYPED_KEY, ()), source]
    st.session_state[TYPED_KEY] = typed
    st.session_state[key] = families.checkpoint_name(source)
    st.session_state["models.typed_source"] = ""


def idle_minutes() -> float:
    try:
        minutes = float(os.environ.get(IDLE_ENV_VAR, DEFAULT_IDLE_MINUTES))
    except ValueError:
        return DEFAULT_IDLE_MINUTES
    return minutes if minutes > 0 else 0.0


def origin_of(source: str) -> str:
    """Where a listed model comes from, in words a viewer may read: no path of the server's."""
    name = families.checkpoint_name(source)
    kind = families.checkpoint_kind(source)
    if kind == "hub":
        return f"the Hugging Face Hub repository {name}"
    what = "a GGUF file" if kind == "gguf" else "a folder"
    return f"{what} this server lists ({name})" if not local_run() else f"{what} ({name})"


def held_as(source: str) -> str | None:
    """ "float32" for a checkpoint whose float32 weights fit in the operator's budget
    (``ATTENTION_EXPLORER_FLOAT32_MB``), counted from its config; None: as the file stores
    them (a GGUF file, a config not yet read, a larger model)."""
    config = config_of(source)
    if config is None:
        return None
    try:
        count = families.family_of(config).count(config, source)
        budget = float(os.environ.get(FLOAT32_MB_ENV_VAR, DEFAULT_FLOAT32_MB))
    except (AttentionInputError, ValueError):
        return None
    return "float32" if 4 * count <= budget * 1e6 else None


def _read(source: str, progress: Callable[[int, int], None]) -> ChosenLoad:
    name, origin = families.checkpoint_name(source), origin_of(source)
    from_hub = families.checkpoint_kind(source) == "hub"
    allow_download = from_hub and hub_reachable()
    options = {"source": source, "max_parameters": max_parameters(),
               "allow_download": allow_download, "weights_dtype": held_as(source)}  # fmt: skip
    try:
        start = time.perf_counter()
        # A folder or file here keys a save of the load; a Hub id's files are not known yet.
        files = () if from_hub else (Path(source).expanduser(),)
        model, kept = load_and_keep(LOADER, options, progress, sources=files)
        if "load_seconds" in {field.name for field in dataclasses.fields(model)}:
            # What a viewer waited: the process's start and the weights' way back included.
            model = dataclasses.replace(model, load_seconds=time.perf_counter() - start)
        keep_with(model, kept)
    except AttentionInputError as error:
        # The server's own paths are none of a viewer's business: the name stands for them.
        where = str(Path(source).expanduser())
        return ChosenLoad(None, str(error).replace(where, name), source, origin)
    except Exception as error:  # the child died, or raised what no page expects
        logging.getLogger(__name__).error("Loading %s failed: %s", name, error)
        failed = f"{name} could not be loaded ({type(error).__name__}); the server's log says why."
        return ChosenLoad(None, failed, source, origin)
    return ChosenLoad(model, None, source, origin)


HOST = ChosenModelHost(_read, name="chosen", idle_minutes=idle_minutes)


def load(name: str) -> ChosenLoad:
    """The listed model ``name`` (one of ``listed()``), loaded once and shared, with a progress
    bar while it loads."""
    source = listed()[name]
    HOST.want(source)
    loaded = HOST.value()
    if loaded is None or loaded.source != source:
        loaded = _wait_for(source, name)
    if loaded.model is not None:
        HOST.used()
    return loaded


def _wait_for(source: str, name: str) -> ChosenLoad:
    bar = st.progress(0.0, text=f"Loading {name}…")
    while True:
        HOST.want(source)
        HOST.start()
        if HOST.wait(0.25):
            loaded = HOST.value()
            if loaded is not None and loaded.source == source:
                bar.empty()
                return loaded
        done, total = HOST.progress
        if total:
            bar.progress(done / total, text=f"Loading {name}: {done} of {total} tensors read…")


def forget() -> None:
    """Read the chosen model's files again on the next load (after a failed load)."""
    HOST.forget()


def model_line(model: object, name: str, origin: str) -> str:
    """One line: the model's name and where it came from (Markdown: escape what a server's
    operator named, ``plain``), its family, parameters and weights."""
    family = families.family_of_model(model)
    count = families.parameter_count_of(model)
    saved = getattr(model, "saved_as", "") or "float32"
    storage = getattr(getattr(model, "weights", None), "storage", "float32")
    return (
        f":material/memory: {name} from {origin} · {family.name} · "
        f"{_in_words(count)} parameters · weights saved as {saved}, held as {storage}, "
        "computed in float32"
    )


def _in_words(count: int) -> str:
    """135 M, 1.2 B, or every digit of a small count."""
    if count >= 10**9:
        return f"{count / 1e9:.1f} B"
    return f"{count / 1e6:,.0f} M" if count >= 10**6 else f"{count:,}"
