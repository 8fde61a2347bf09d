"""A checkpoint's chat template: found beside its weights, and one user turn rendered by it.

An instruct model was trained on text framed its own way (ChatML's ``<|im_start|>user…``,
Llama 3's ``<|start_header_id|>user<|end_header_id|>…``); the checkpoint carries that framing
as a Jinja template. ``ChatTemplate.render`` renders it as transformers' ``apply_chat_template``
does, with one user message and the assistant's header after it (``add_generation_prompt``), so
the model reads exactly what it was trained to answer.

ChatTemplate         a template and the special tokens' text; ``render`` frames one user turn
read_chat_template   the template of a Hugging Face folder (chat_template.jinja, or the
                     ``chat_template`` of tokenizer_config.json), None when it has none
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from .loading import ModelFileError

__all__ = ["ChatTemplate", "read_chat_template"]

TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


@dataclass(frozen=True)
class ChatTemplate:
    """A checkpoint's chat template (Jinja source) and the text of the special tokens it may
    name (``{{ bos_token }}``: Llama 3 and Mistral open every chat with it)."""

    source: str = field(repr=False)
    bos_token: str = ""
    eos_token: str = ""

    def render(self, user: str) -> str:
        """``user``'s turn framed by the template, ending with the assistant's header.

        The template runs in Jinja's sandbox (it comes with a checkpoint, and a template is
        code), with the names transformers gives it. A template that fails is a ModelFileError
        naming Jinja's reason.
        """
        from jinja2 import TemplateError

        try:
            return self._compiled.render(
                messages=[{"role": "user", "content": user}],
                add_generation_prompt=True,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=None,
                documents=None,
            )
        except TemplateError as exc:
            raise ModelFileError(
                f"The model's chat template cannot frame a prompt: {exc}."
            ) from None

    def __getstate__(self) -> dict[str, Any]:
        # A model goes between processes by pickle; the compiled template (with the sandbox's
        # functions) does not pickle, and is compiled again where it is next rendered.
        return {name: value for name, value in self.__dict__.items() if name != "_compiled"}

    @cached_property
    def _compiled(self) -> Any:
        # Compiled once per loaded model: a prompt renders the template twice (the frame alone
        # sizes the cut), and compiling is most of a render's milliseconds.
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        def strftime_now(format: str) -> str:
            return datetime.now().strftime(format)

        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        environment.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
        return environment.from_string(self.source)


def read_chat_template(folder: Path | str) -> ChatTemplate | None:
    """The chat template saved in a Hugging Face ``folder``, where transformers saves it: its
    own file, else the tokenizer's configuration (a string, or named templates of which
    "default" is the one ``apply_chat_template`` uses), with the tokenizer's BOS and EOS text.
    None for a base model without one."""
    folder = Path(folder)
    settings: Any = {}
    if (folder / TOKENIZER_CONFIG_FILE).is_file():
        try:
            settings = json.loads(_read_text(folder / TOKENIZER_CONFIG_FILE))
        except json.JSONDecodeError as exc:
            raise ModelFileError(
                f"{folder.name}/{TOKENIZER_CONFIG_FILE} is not valid JSON ({exc})."
            ) from None
    if not isinstance(settings, dict):
        settings = {}
    if (folder / TEMPLATE_FILE).is_file():
        source = _read_text(folder / TEMPLATE_FILE)
    else:
        source = settings.get("chat_template")
    if isinstance(source, list):
        named = {entry.get("name"): entry.get("template") for entry in source if entry}
        source = named.get("default")
    if not isinstance(source, str) or not source.strip():
        return None
    return ChatTemplate(
        source, _token_text(settings.get("bos_token")), _token_text(settings.get("eos_token"))
    )


def _token_text(token: Any) -> str:
    """A special token as tokenizer_config.json names it: its text, or an object whose
    "content" is the text."""
    if isinstance(token, dict):
        token = token.get("content")
    return token if isinstance(token, str) else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"Cannot read {path.parent.name}/{path.name}: {exc}.") from None
