"""``load_bert``: a BERT checkpoint directory (config.json, model.safetensors, tokenizer.json)
read into a ``BertModel``, each file checked against the others."""

from __future__ import annotations

from pathlib import Path

from attention_core.models.loading import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    ModelFileError,
    find_model_dir,
    missing_model_files,
    read_config,
    read_tokenizer,
    read_weights,
    release_file_pages,
)

from .config import BertConfig
from .forward import BertModel
from .weights import WORD_TABLE, BertWeights

__all__ = ["load_bert"]


def load_bert(model_dir: Path | str | None = None, *, allow_download: bool = False) -> BertModel:
    """Load config.json, model.safetensors and tokenizer.json from ``model_dir``.

    With ``model_dir=None`` the directory is found by ``loading.find_model_dir`` (environment
    variable, then the offline package, then the Hub if ``allow_download``). Raises
    ``ModelNotFoundError`` (no model anywhere, with instructions) or ``ModelFileError`` (a file
    that is missing, damaged or inconsistent), both ``AttentionInputError``.
    """
    location = None
    if model_dir is None:
        location = find_model_dir(allow_download=allow_download)
        model_dir = location.path
    model_dir = Path(model_dir)
    missing = missing_model_files(model_dir)
    if missing:
        raise ModelFileError(
            f"The model directory {model_dir} has no {', '.join(missing)}: it needs "
            f"{CONFIG_FILE}, {WEIGHTS_FILE} and {TOKENIZER_FILE}."
        )
    config = BertConfig.from_dict(
        read_config(model_dir / CONFIG_FILE), source=str(model_dir / CONFIG_FILE)
    )
    # A text needs a few rows of the vocabulary's embedding table: the file holds the rest.
    state = read_weights(model_dir / WEIGHTS_FILE, mapped=(WORD_TABLE, f"bert.{WORD_TABLE}"))
    weights = BertWeights.from_state_dict(state, config, source=str(model_dir / WEIGHTS_FILE))
    release_file_pages(weights.embeddings.word)  # read by the check of every value
    tokenizer = read_tokenizer(
        model_dir / TOKENIZER_FILE, max_length=config.max_position_embeddings
    )
    if tokenizer.get_vocab_size(with_added_tokens=True) > config.vocab_size:
        raise ModelFileError(
            f"The tokenizer in {model_dir} knows {tokenizer.get_vocab_size()} tokens but the "
            f"model has only {config.vocab_size} embeddings: they come from different models."
        )
    return BertModel(config=config, weights=weights, tokenizer=tokenizer, location=location)
