"""A checkpoint's own chat template: read where transformers saves it, rendered for one user turn
exactly as transformers' ``apply_chat_template`` renders it, in a sandbox, and a sentence for a
template that cannot frame a prompt or a model that has none.

The templates below are written in the forms the families publish (ChatML with a default system
turn, Llama 3's headers, Qwen2.5's tools branch, Mistral's [INST] with its role check); the
expected text is transformers' own rendering of the same template, never ours.
"""

from __future__ import annotations

import json

import pytest

from attention_core.models.chat import ChatTemplate, read_chat_template
from attention_core.models.llama import load_llama
from attention_core.models.loading import ModelFileError
from tests.tiny_checkpoints import write_tiny

transformers = pytest.importorskip("transformers")

TEMPLATES = {
    "chatml": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
    "llama3": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' "
        "+ message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
        "{% endif %}"
    ),
    "qwen2.5": (
        "{%- if tools %}\n    {{- '<|im_start|>system\n' }}\n    {%- for tool in tools %}\n"
        "        {{- tool | tojson }}\n    {%- endfor %}\n    {{- '<|im_end|>\n' }}\n"
        "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
        "        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}\n"
        "    {%- else %}\n        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba "
        "Cloud. You are a helpful assistant.<|im_end|>\n' }}\n    {%- endif %}\n{%- endif %}\n"
        "{%- for message in messages %}\n    {%- if message.role == 'user' %}\n        "
        "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}\n"
        "    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
        "    {{- '<|im_start|>assistant\n' }}\n{%- endif %}\n"
    ),
    "mistral": (
        "{{ bos_token }}{% for message in messages %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/...') }}"
        "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
        "' [/INST]' }}{% elif message['role'] == 'assistant' %}"
        "{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
    ),
}
USERS = ("What is a KV cache?", "  the cat\nsat  ", "")


def tokenizer_with(template: str, **special: str):
    from tests.tiny_decoders import word_tokenizer

    tokenizer = word_tokenizer()
    tokenizer.chat_template = template
    for name, text in special.items():
        setattr(tokenizer, name, text)
    return tokenizer


def transformers_text(tokenizer, user: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
    )


def transformers_ids(tokenizer, user: str) -> list[int]:
    found = tokenizer.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=True, add_generation_prompt=True
    )
    return list(found["input_ids"] if hasattr(found, "keys") else found)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("name", TEMPLATES)
def test_a_saved_template_frames_a_turn_as_transformers_does(name, user, tmp_path):
    tokenizer = tokenizer_with(TEMPLATES[name], bos_token="<s>", eos_token="</s>")
    tokenizer.save_pretrained(tmp_path)
    template = read_chat_template(tmp_path)
    assert template.bos_token == "<s>" and template.eos_token == "</s>"
    assert template.render(user) == transformers_text(tokenizer, user)


def test_a_template_in_tokenizer_config_is_read_named_default_among_several(tmp_path):
    chatml, llama3 = TEMPLATES["chatml"], TEMPLATES["llama3"]
    config = {"bos_token": {"content": "<|begin_of_text|>"}, "eos_token": "<|eot_id|>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": chatml}))
    assert read_chat_template(tmp_path).source == chatml
    named = [{"name": "tool_use", "template": chatml}, {"name": "default", "template": llama3}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": named}))
    template = read_chat_template(tmp_path)
    assert template.source == llama3
    expected = transformers_text(
        tokenizer_with(llama3, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>"), "hi"
    )
    assert template.render("hi") == expected
    assert expected.startswith("<|begin_of_text|><|start_header_id|>user")


def test_a_folder_without_a_template_has_none(tmp_path):
    assert read_chat_template(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    assert read_chat_template(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text("{ not json")
    with pytest.raises(ModelFileError, match=r"tokenizer_config\.json is not valid JSON"):
        read_chat_template(tmp_path)


def test_a_template_that_cannot_frame_a_prompt_gets_a_sentence():
    asks_a_system_turn = (
        "{% if messages[0]['role'] != 'system' %}"
        "{{ raise_exception('The first message must be the system prompt') }}{% endif %}"
    )
    with pytest.raises(ModelFileError, match="cannot frame a prompt: The first message must be"):
        ChatTemplate(asks_a_system_turn).render("hi")
    with pytest.raises(ModelFileError, match="cannot frame a prompt"):
        ChatTemplate("{% for message in messages %}{{ message['content'] }}").render("hi")


def test_a_template_runs_sandboxed_and_cannot_reach_python():
    escape = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(ModelFileError, match="cannot frame a prompt"):
        ChatTemplate(escape).render("hi")
    mutation = "{% set m = messages.append({'role': 'user', 'content': 'x'}) %}{{ messages }}"
    with pytest.raises(ModelFileError, match="cannot frame a prompt"):
        ChatTemplate(mutation).render("hi")


def test_a_listed_model_reads_its_chat_prompt_as_transformers_tokenizes_it(tmp_path):
    folder = write_tiny("llama", tmp_path / "tiny-chat")
    tokenizer = tokenizer_with(TEMPLATES["llama3"], bos_token="the", eos_token="<eos>")
    tokenizer.save_pretrained(folder)
    model = load_llama(folder)
    for user in ("the cat sat on the mat", "a big red dog"):
        prompt = model.prompt(user, chat=True)
        assert prompt.chat
        assert prompt.input_ids.tolist() == transformers_ids(tokenizer, user)
    # The template's own tokens count against the cap; only the user's words are cut.
    cut = model.prompt("the cat sat " * 50, chat=True, max_tokens=24)
    assert len(cut.input_ids) <= 24 and "cut" in cut.notice


def test_a_model_saved_without_a_template_reads_raw_text_only(tmp_path):
    model = load_llama(write_tiny("llama", tmp_path / "tiny-base"))
    assert model.chat_template is None
    assert model.prompt("the cat").input_ids.tolist() == model.encode("the cat")
    with pytest.raises(ModelFileError, match="without a chat template"):
        model.prompt("the cat", chat=True)


def test_a_rendered_template_still_goes_between_processes():
    # A model is pickled into and out of the process that keeps it, chat template included.
    import pickle

    template = ChatTemplate(TEMPLATES["chatml"])
    first = template.render("hi")
    again = pickle.loads(pickle.dumps(template))
    assert again == template and again.render("hi") == first
