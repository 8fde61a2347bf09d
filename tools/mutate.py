"""Mutation check of the formula modules: break one operator at a time, the tests must notice.

    .venv/bin/python tools/mutate.py                 # all formula modules (what `make mutate` runs)
    .venv/bin/python tools/mutate.py softmax masks   # some of them
    .venv/bin/python tools/mutate.py probing --only ablate_token,_compare   # some functions
    .venv/bin/python tools/mutate.py --list          # print the mutants without running them

Why not mutmut or cosmic-ray: mutmut 3.8.1 (what pip gives) made ~1,800 mutants of these five
files, most of them `None` passed for an argument or a changed letter in an error message, and
it cannot be told which operators to use; at about one mutant a second on this 2-core machine
that is over half an hour. cosmic-ray starts a fresh interpreter per mutant (torch, pytest and
hypothesis take seconds to import). This runner applies only the mutations that break a
formula, each once, through the `ast` module:

    a + b -> a - b,  * <-> /,  @ -> *,  ** -> *,  // -> /,  % -> //  (also in `x += ...`)
    < <-> <=,  > <-> >=,  == <-> !=,  is <-> is not,  in <-> not in
    -x -> x,  not x -> x,  ~x -> x,  `and` <-> `or`,  c -> not c in if, while and a if c else b
    n -> n + 1 (integers),  f -> 2f (0.0 -> 1.0),  True <-> False
    axis=-1 -> axis=-2 (any other axis -> -1),  x.T / x.mT -> x,  swapaxes/permute_dims(x) -> x

inside function bodies and argument defaults. Not mutated: `raise` statements (error texts are
not formulas), strings, docstrings, annotations, decorators, module-level code, and any line
ending in `# pragma: no mutate`.

Each mutant runs in a forked child of a process that has already imported pytest, NumPy, torch,
hypothesis and Streamlit (but not attention_core): an import hook serves the mutated module
in place of the file, and `pytest -x` runs the module's mirror test file first, then the other
files that exercise the formulas. Hypothesis runs derandomized with MAX_EXAMPLES examples,
without a deadline or an example database, so the score is the same on every run. A mutant is
killed when a test fails or the run passes the time limit. Score = killed / (mutants -
EQUIVALENT); below MIN_SCORE, exit 1. A report goes to artifacts/mutate.json.
"""

from __future__ import annotations

import argparse
import ast
import copy
import gc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = (
    "softmax",
    "masks",
    "attention",
    "multihead",
    "positional",
    "probing",
    "losses",
    "models.hiding",
    "models.points",
    "models.patching",
    "head_roles",
    "logit_lens",
    "token_attribution",
    "kv_cache",
    "sampling",
    "training.gradients",
    "training.adamw",
    "training.attn_only",
    "training.sequences",
    "training.run",
    "training.formation",
    "training.circuits",
    "training.model_file",
    "score_parts",
    "models.score_sources",
    "models.score_reading",
    "models.layers",
    "models.llama.forward",
    "models.llama.config",
    "models.llama.choices",
)
# Modules mutated only inside these functions: the pieces today's families add to the forward
# (the rest is the Llama pass every real-model test runs against transformers) and RMSNorm.
FUNCTIONS = {
    "models.layers": ("rms", "rms_norm"),
    "models.llama.forward": ("_start", "_layer_attends", "head_logits", "qk_norm",
                             "qk_norm.whole"),
    "models.llama.config": ("_family_pieces", "_layer_types", "_gemma3_rope_bases",
                            "LlamaConfig.scale", "LlamaConfig.window", "LlamaConfig.rope_base"),
}  # fmt: skip
# The tests that exercise the formulas; a module's own tests/test_<module>.py runs first.
TEST_FILES = (
    "test_softmax.py",
    "test_masks.py",
    "test_attention.py",
    "test_multihead.py",
    "test_positional.py",
    "test_torch_backend.py",
    "test_reference.py",
)
# Modules tested on real models: their mutants run only these files, or these tests of a file
# ("test_x.py::test_y") (the formula files above never call them, and each child would load
# them for nothing).
OWN_TESTS = {
    "probing": ("test_probing.py",),
    "losses": ("test_losses.py",),
    # Ablations run the real models; test_readouts holds the hiding effects' own checks.
    "models.hiding": ("test_hiding.py", "test_readouts.py"),
    # The forward's named points: names, checks and edits by hand (the model's own in test_llama).
    "models.points": ("test_points.py",),
    # Activation patching on a tiny Llama against transformers' hooks, a second a run (the
    # file's SmolLM2 comparisons take minutes, too long to run once per mutant).
    "models.patching": (
        "test_patching.py::test_restored_share_is_worked_by_hand",
        "test_patching.py::test_bad_pairs_and_ids_are_learner_facing_errors",
        "test_patching.py::test_tiny_runs_match_transformers",
        "test_patching.py::test_tiny_maps_match_transformers_hooks",
        "test_patching.py::test_probabilities_of_logits_too_large_for_a_plain_exp",
    ),
    # What heads do: their formulas are tested on built inputs, the real models in test_readouts.
    "head_roles": ("test_head_roles.py",),
    "logit_lens": ("test_logit_lens.py",),
    "token_attribution": ("test_token_attribution.py",),
    # KV-cache bytes, quantization and pooling: the model's codecs are in test_kv_experiments.
    "kv_cache": ("test_kv_cache.py",),
    # Choosing the next token: hand-worked stages, properties, and transformers' warpers.
    "sampling": ("test_sampling.py",),
    # Training: every gradient against torch.autograd, AdamW against torch.optim.AdamW, the model
    # against TransformerLens's, the run, its data, its readings and its file.
    "training.gradients": ("test_gradients.py",),
    "training.adamw": ("test_adamw.py",),
    "training.attn_only": ("test_attn_only.py",),
    "training.sequences": ("test_sequences.py", "test_run.py"),
    "training.run": ("test_run.py",),
    "training.formation": ("test_formation.py", "test_learning.py"),
    "training.circuits": ("test_circuits.py",),
    "training.model_file": (  # not the slow run of the default settings
        "test_model_file.py::test_the_file_loads_into_transformer_lens_and_gives_our_logits",
        "test_model_file.py::test_a_file_round_trips_with_its_config_and_what_the_app_knows",
        "test_model_file.py::test_a_file_that_is_not_such_a_model_is_refused_in_a_sentence",
        "test_model_file.py::test_a_config_past_the_pages_limits_is_refused",
        "test_model_file.py::test_the_smallest_and_the_largest_model_of_the_page_are_read",
        "test_model_file.py::test_the_archive_holds_only_arrays_and_text",
    ),
    # Why a head attends: the formulas against torch on the whole score and by hand; the sources
    # against transformers' and TransformerLens's hooked pieces on tiny models (not the slow
    # run of the shipped decoder).
    "score_parts": ("test_score_parts.py", "test_attends.py"),
    "models.score_sources": (
        "test_score_sources.py::test_every_term_equals_the_one_carried_through_transformers"
        "[qwen2-2-11]",
        "test_score_sources.py::test_every_term_equals_the_one_carried_through_transformers"
        "[gpt2-2-11]",
        "test_score_sources.py::test_every_querys_key_side_at_once_is_each_querys_own",
        "test_score_sources.py::test_rope_pairs_and_content_sum_to_their_scores",
        "test_score_sources.py::test_a_position_or_head_outside_the_model_is_refused",
        "test_score_sources.py::test_the_attention_only_models_split_is_transformer_lenss_pieces",
        "test_score_sources.py::test_an_encoders_split_carries_each_part_through_every_post_norm",
    ),
    # The pieces of today's small LLMs against their tiny transformers models, and the norm's
    # held scale through the readouts.
    "models.layers": ("test_layers.py", "test_recent_families.py"),
    "models.llama.forward": ("test_recent_families.py", "test_decoder_families.py"),
    "models.llama.config": ("test_recent_families.py", "test_decoder_families.py"),
    "models.llama.choices": (
        "test_recent_families.py::test_head_choices_retrace_the_pass_for_every_layer_and_head",
        "test_recent_families.py::test_head_choices_refuse_a_layer_or_head_past_the_model",
    ),
    "models.score_reading": (
        "test_score_sources.py::test_a_heads_reading_is_its_split_boiled_down",
        "test_score_sources.py::test_a_pattern_where_no_query_attends_is_read_at_its_sharpest_query",
        "test_score_sources.py::test_an_encoders_reading_sees_every_key",
    ),
}
MIN_SCORE = 0.90
# Property tests try this many examples per mutant (hypothesis's default is 100); tests that set
# their own max_examples keep it.
MAX_EXAMPLES = 25
WORKERS = min(2, os.cpu_count() or 1)

# Surviving mutants that change no behaviour, by id (see Mutant.id), each with the reason.
EQUIVALENT: dict[str, str] = dict(
    [
        (
            "softmax.py::stable_softmax::x.ndim - 1 -> x.ndim + 1",
            "a last axis named by its number then takes xp.max instead of row_maxima: the same "
            "maximum by another path",
        ),
        (
            "softmax.py::row_maxima::x.ndim > 1 -> x.ndim >= 1",
            "a 1-D row moved to the front is itself: the same maximum by the other path",
        ),
        (
            "softmax.py::row_maxima::x.ndim > 1 -> x.ndim > 2",
            "which of two paths computes a 2-D array's row maxima: the same numbers",
        ),
        (
            "softmax.py::row_maxima::x.shape[-1] <= SHORT_ROW -> x.shape[-1] < SHORT_ROW",
            "which of two paths computes a 256-long row's maximum: the same number",
        ),
        (
            "softmax.py::row_maxima::x.shape[-1] -> x.shape[1]",
            "which of two paths computes the maxima, chosen by another axis: the same numbers",
        ),
        (
            "softmax.py::row_maxima::-1 -> -2",
            "which of two paths computes the maxima, chosen by another axis: the same numbers",
        ),
        (
            "multihead.py::_linear::w.shape[0] -> w.shape[1]",
            "every projection of multi-head attention is (d_model, d_model), square",
        ),
        (
            "training.gradients.py::_times::m.shape[-1] -> m.shape[1]",
            "m is a weight matrix, 2-D: its axis 1 is its last",
        ),
        (
            "training.gradients.py::unembed_backward::w_u.shape[-1] -> w_u.shape[1]",
            "W_U is (d_model, vocab), 2-D: its axis 1 is its last",
        ),
        (
            "training.gradients.py::cross_entropy_backward::log_probs > floor -> "
            "log_probs >= floor",
            "a log-probability exactly on the floor keeps exp(floor), the smallest normal share, "
            "or 0: both are under any rounding of the gradient",
        ),
        (
            "training.attn_only.py::run_attn_only::checked=False -> checked=True",
            "the checked path computes the same formula with its checks (on the model's own "
            "finite arrays they pass) and a product per sequence: equal to rounding",
        ),
        (
            "training.sequences.py::held_out::[check_int(seed, 'The seed', minimum=0), 2] -> "
            "[check_int(seed, 'The seed', minimum=0), 3]",
            "the held-out stream's label: any other than the batches' (1) draws other held-out "
            "sequences with the same properties, and none is trained on either way",
        ),
        (
            "training.run.py::TrainingSettings.snapshot_every::max(2, min(MAX_SNAPSHOTS, "
            "SNAPSHOT_BYTES // snapshot_bytes(self.config))) -> max(3, min(MAX_SNAPSHOTS, "
            "SNAPSHOT_BYTES // snapshot_bytes(self.config)))",
            "within LIMITS a checkpoint is at most 1.1 MB, so 16 MB hold 15: the floor of 2 (or 3) "
            "never binds; it only keeps a division by count - 1 defined",
        ),
        (
            "training.run.py::TrainingSettings.snapshot_every::SNAPSHOT_BYTES // "
            "snapshot_bytes(self.config) -> SNAPSHOT_BYTES / snapshot_bytes(self.config)",
            "ceil(chunks / (count - 1)) differs between an integer count and its fraction only "
            "for more than 200 chunks, past LIMITS' 5,000 steps",
        ),
        (
            "training.formation.py::formations::strict=True -> strict=False",
            "np.nonzero's index arrays always have one length",
        ),
        (
            "softmax.py::stable_softmax::xp.where(xp.isfinite(row_max), row_max, 0.0) -> "
            "xp.where(xp.isfinite(row_max), row_max, 1.0)",
            "only all -inf rows get this shift, and exp(-inf - 1) = exp(-inf - 0) = 0",
        ),
        (
            "softmax.py::stable_softmax::xp.where(visible, total, 1.0) -> xp.where(visible, "
            "total, 2.0)",
            "divides only rows whose exps are all 0, which the outer where sets to 0 anyway",
        ),
        (
            "attention.py::cosine_attention.unit::xp.where(norm > 0, norm, 1.0) -> "
            "xp.where(norm > 0, norm, 2.0)",
            "divides only zero vectors (0/1 = 0/2), which the outer where sets to 0 anyway",
        ),
        (
            "masks.py::combine_masks::not isinstance(a, np.ndarray) -> isinstance(a, np.ndarray)",
            "takes a NumPy mask's device ('cpu') instead of a tensor's: differs only for CUDA "
            "tensors, whose tests are gpu-marked (no GPU here)",
        ),
        (
            "multihead.py::MultiHeadParams.__post_init__::max_ndim=2 -> max_ndim=3",
            "the exact-shape check right after rejects every 3-D weight as well (only the "
            "message differs)",
        ),
        (
            "multihead.py::MultiHeadParams.d_model::self.w_q.shape[-1] -> self.w_q.shape[1]",
            "w_q is always 2-D (checked on construction), so axis 1 is the last axis",
        ),
        (
            "multihead.py::MultiHeadParams.d_model::-1 -> -2",
            "w_q is always square (checked on construction): both axes are d_model long",
        ),
        (
            "multihead.py::_check_heads::d_model + 1 -> d_model + 2",
            "d_model + 1 never divides d_model, so the divisors named in the message are the same",
        ),
        (
            "positional.py::alibi_slopes::m < n -> m <= n",
            "when m == n the extra slopes are the slice [: n - m] = [:0], which is empty",
        ),
        (
            "attention.py::cosine_attention.unit::norm > 0 -> norm >= 0",
            "the outer guard of two: with it always true, the inner one still divides a zero "
            "vector by 1, giving 0",
        ),
        (
            "attention.py::cosine_attention.unit::norm > 0 -> norm >= 0 #2",
            "the inner guard of two: a zero vector's 0/0 is then discarded by the outer where",
        ),
        (
            "multihead.py::multi_head_attention::strict=True -> strict=False",
            "zip over the 8 field names and the 8 converted parameters: always the same length",
        ),
        (
            "positional.py::check_base::positive=True -> positive=False",
            "`base <= 1` right after rejects 0 and negative bases too (only the message differs)",
        ),
        (
            "probing.py::attention_rollout::a.shape[-2] -> a.shape[2]",
            "checked only after `a.ndim != 4` failed, so the array is 4-D and axis 2 is axis -2",
        ),
        (
            "probing.py::attention_rollout::-1 -> -2 #2",
            "`a.shape[-2] == 0` is reached only for square patterns, where both axes are n long",
        ),
        (
            "probing.py::attention_rollout::-1 -> -2 #3",
            "n = a.shape[-2]: the pattern was checked to be square, so both axes are n long",
        ),
        (
            "probing.py::joint_query_key_projection::full_matrices=False -> full_matrices=True",
            "only U grows to (2n, 2n); the singular values and the first rows of Vᵀ are the same",
        ),
        (
            "probing.py::joint_query_key_projection::components * np.sign(components[np.arange(2)"
            ", biggest])[:, None] -> components / np.sign(components[np.arange(2), biggest])"
            "[:, None]",
            "the signs are ±1 (a unit row's largest entry is never 0), and x / ±1 = x · ±1",
        ),
        (
            "head_roles.py::_repeat::-1 -> -2",
            "the weights are square (checked first), so their last two axes are equally long",
        ),
        (
            "head_roles.py::token_share::-1 -> -2",
            "the weights are square (checked first), so their last two axes are equally long",
        ),
        (
            "logit_lens.py::LogitLens._token::self.logits.shape[-1] -> self.logits.shape[1]",
            "a lens's logits are always (stage, vocab): axis 1 is the last axis",
        ),
        (
            "logit_lens.py::LogitLens.top::self.logits.shape[-1] -> self.logits.shape[1]",
            "a lens's logits are always (stage, vocab): axis 1 is the last axis",
        ),
        (
            "logit_lens.py::direct_logit_attribution::m.shape[-1] -> m.shape[1]",
            "the MLP writes are checked to be 2-D just before: axis 1 is the last axis",
        ),
        (
            "logit_lens.py::direct_logit_attribution::b.shape[-1] -> b.shape[1]",
            "the biases are checked to be 2-D just before: axis 1 is the last axis",
        ),
        (
            "positional.py::llama3_frequencies::wavelength > original_context / low_freq_factor "
            "-> wavelength >= original_context / low_freq_factor",
            "at λ = original/low the blend's s is 0, which gives ω/factor: the slowed value",
        ),
        (
            "positional.py::llama3_frequencies::wavelength < original_context / high_freq_factor "
            "-> wavelength <= original_context / high_freq_factor",
            "at λ = original/high the blend's s is 1, which gives ω: the kept value",
        ),
        (
            "sampling.py::top_k_filter::0 < k < z.size -> 0 <= k < z.size",
            "k = 0 then takes the smallest logit as the k-th largest, and z >= min keeps all",
        ),
        (
            "sampling.py::top_k_filter::0 < k < z.size -> 0 < k <= z.size",
            "k = vocab takes the smallest logit as the k-th largest, and z >= min keeps all",
        ),
        (
            "models.patching.py::_patched_lds::runs.n - first -> runs.n + first",
            "tokens only sizes the batches (span): any span >= 1 gives the same LDs (more passes)",
        ),
        (
            "models.patching.py::_patched_lds::max(1, -(-PASS_ROWS // (per_row * tokens))) -> "
            "max(2, -(-PASS_ROWS // (per_row * tokens)))",
            "two rows a pass where one was due: a bigger batch, the same LDs",
        ),
        (
            "models.patching.py::_patched_lds::-(-PASS_ROWS // (per_row * tokens)) -> "
            "-PASS_ROWS // (per_row * tokens)",
            "a floor of a negative ratio is <= -1, so the span is max(1, ...) = 1: one row a pass",
        ),
        (
            "models.patching.py::_patched_lds::-PASS_ROWS -> PASS_ROWS",
            "-(PASS_ROWS // x) is <= 0, so the span is max(1, ...) = 1: one row a pass",
        ),
        (
            "models.patching.py::_patched_lds::-1 -> -2 #2",
            "NumPy's reshape infers any negative size: reshape(-2, n) is reshape(-1, n)",
        ),
        (
            "score_parts.py::score_terms::query.shape[-1] -> query.shape[1]",
            "a query's parts are (C, d_head): its last axis is its second",
        ),
        (
            "models.score_sources.py::HeadSplit.at::self.scores.shape[0] -> self.scores.shape[1]",
            "a prompt's scores are square (n, n): queries and keys are the same positions",
        ),
        (
            "models.score_sources.py::stream_sources::-1 -> -2",
            "NumPy's reshape reads any negative size as the one it infers",
        ),
        (
            "models.score_sources.py::encoder_split::-1 -> -2",
            "NumPy's reshape reads any negative size as the one it infers",
        ),
        (
            "models.score_sources.py::_rotation::"
            "np.zeros(1, np.float32) -> np.zeros(2, np.float32)",
            "the array only gives the tables their dtype and namespace",
        ),
        (
            "models.score_sources.py::_rotation::rope_tables(model.config, 0, n, like=np.zeros(1, "
            "np.float32), base=base) -> rope_tables(model.config, 1, n, like=np.zeros(1, "
            "np.float32), base=base)",
            "RoPE makes q·k depend on the offset alone: every part of q and k turned one position "
            "further gives the same terms",
        ),
        (
            "models.score_reading.py::HeadReading.attended::-1.0 -> -2.0",
            "any negative number loses to every weight, which is at least 0",
        ),
        (
            "models.score_reading.py::_reading::-1 -> -2",
            "NumPy's reshape reads any negative size as the one it infers",
        ),
        (
            "models.score_reading.py::_reading::after_first.max(axis=1, initial=0.0) >= FOCUSED"
            " -> after_first.max(axis=1, initial=0.0) > FOCUSED",
            "a float32 weight exactly at the line is not a case the pages meet: the line is a "
            "reading, not a formula",
        ),
    ]
)


@dataclass(frozen=True)
class Mutant:
    module: str  # "softmax"
    function: str  # qualified name inside the module, "MultiHeadParams.__post_init__"
    line: int
    before: str  # the source of the smallest expression around the change, before and after
    after: str
    occurrence: int  # 1, 2, ... when the same change appears more than once in one function
    site: int  # which eligible node (walk order) and which of its mutations: how to re-apply it
    kind: int

    @property
    def id(self) -> str:
        suffix = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.module}.py::{self.function}::{self.before} -> {self.after}{suffix}"


# -- finding the mutations -------------------------------------------------------------------------

_BINOP_SWAPS = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.MatMult: ast.Mult, ast.Pow: ast.Mult, ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv,
}  # fmt: skip
_CMP_SWAPS = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}  # fmt: skip
_AXIS_KEYWORDS = {"axis", "dim", "axis1", "axis2"}
_TRANSPOSES = {"swapaxes", "permute_dims", "matrix_transpose", "transpose"}
_XP = {"xp", "np", "numpy", "torch"}  # names a namespace is called by


def _mutations(node: ast.AST) -> list[ast.AST | None]:
    """What `node` may become, one entry per mutant. None means "replace the node by its operand"
    (computed in _apply); everything else is the replacement node."""
    if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINOP_SWAPS:
        changed = copy.copy(node)
        changed.op = _BINOP_SWAPS[type(node.op)]()
        return [changed]
    if isinstance(node, ast.Compare):
        out = []
        for i, op in enumerate(node.ops):
            if type(op) in _CMP_SWAPS:
                changed = copy.copy(node)
                changed.ops = [*node.ops[:i], _CMP_SWAPS[type(op)](), *node.ops[i + 1 :]]
                out.append(changed)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Not | ast.Invert):
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            return (
                [ast.Constant(-2 if node.operand.value == 1 else -1)]
                if _is_axis(node)
                else [node.operand]
            )
        return [node.operand]
    if isinstance(node, ast.BoolOp):
        changed = copy.copy(node)
        changed.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return [changed]
    if isinstance(node, ast.Constant) and not getattr(node, "_in_axis", False):
        if isinstance(node.value, bool):
            return [ast.Constant(not node.value)]
        if isinstance(node.value, int):
            return [ast.Constant(node.value + 1)]
        if isinstance(node.value, float):
            return [ast.Constant(2 * node.value if node.value else 1.0)]
        return []
    if isinstance(node, ast.keyword) and node.arg in _AXIS_KEYWORDS:
        if isinstance(node.value, ast.UnaryOp | ast.Constant):
            return []  # a literal axis is handled by its constant (marked _in_axis)
        return [ast.keyword(node.arg, ast.Constant(-1))]
    if isinstance(node, ast.If | ast.IfExp | ast.While):
        changed = copy.copy(node)
        changed.test = ast.UnaryOp(ast.Not(), node.test)
        return [changed]
    if isinstance(node, ast.Attribute) and node.attr in {"T", "mT"}:
        return [node.value]
    if isinstance(node, ast.Call) and _call_name(node) in _TRANSPOSES:
        func = node.func
        namespace = isinstance(func, ast.Attribute) and getattr(func.value, "id", "") in _XP
        if isinstance(func, ast.Attribute) and not namespace:
            return [func.value]  # x.swapaxes(-1, -2) -> x
        return [node.args[0]] if node.args else []  # xp.swapaxes(x, -1, -2) -> x
    return []


def _is_axis(node: ast.AST) -> bool:
    return getattr(node, "_in_axis", False)


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _eligible(tree: ast.Module, lines: list[str]) -> list[tuple[ast.AST, ast.AST, str]]:
    """(node, parent, qualified function name) for every node inside a function, in a fixed
    order; the same walk over a copy of the tree finds the same nodes again."""
    found: list[tuple[ast.AST, ast.AST, str]] = []

    def visit(node: ast.AST, parent: ast.AST, scope: str, inside: bool) -> None:
        if isinstance(node, ast.Raise | ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            return
        if isinstance(node, ast.keyword) and node.arg in _AXIS_KEYWORDS:
            for sub in ast.walk(node.value):
                sub._in_axis = True  # axis=-1 -> -2, not -1 -> 1 or 1 -> 2
        line = getattr(node, "lineno", None)
        if line and lines[line - 1].rstrip().endswith("# pragma: no mutate"):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{scope}.{node.name}" if scope else node.name
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    visit(default, node.args, name, True)
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            for statement in body:
                visit(statement, node, name, True)
            return
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                visit(statement, node, f"{scope}.{node.name}" if scope else node.name, inside)
            return
        if inside:
            found.append((node, parent, scope))
        for field, value in ast.iter_fields(node):
            if field in {"annotation", "returns", "decorator_list", "type_comment"}:
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    visit(child, node, scope, inside)

    for statement in tree.body:
        visit(statement, tree, "", False)
    return found


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
    raise LookupError("node not found under its parent")


def _apply(tree: ast.Module, lines: list[str], site: int, kind: int) -> ast.Module:
    mutated = copy.deepcopy(tree)
    node, parent, _ = _eligible(mutated, lines)[site]
    _replace(parent, node, _mutations(node)[kind])
    return ast.fix_missing_locations(mutated)


def _shown(node: ast.AST, parent: ast.AST) -> ast.AST:
    """The expression to show for a change: a bare constant or name says little on its own."""
    atom = isinstance(node, ast.Constant | ast.Name | ast.keyword) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
    )
    if atom and isinstance(parent, ast.expr | ast.keyword):
        return parent
    if isinstance(node, ast.If | ast.While):
        return node.test
    return node


def module_path(module: str) -> Path:
    """attention_core/<module>.py, a dotted module inside its package ("models.hiding")."""
    return ROOT / "attention_core" / Path(*module.split(".")).with_suffix(".py")


def find_mutants(
    module: str, source: str | None = None
) -> tuple[list[Mutant], ast.Module, list[str]]:
    """The mutants of `module_path(module)` (or of `source`), the parsed tree and lines."""
    if source is None:
        source = module_path(module).read_text()
    tree, lines = ast.parse(source), source.splitlines()
    mutants: list[Mutant] = []
    seen: dict[tuple[str, str, str], int] = {}
    for site, (node, parent, scope) in enumerate(_eligible(tree, lines)):
        for kind, replacement in enumerate(_mutations(node)):
            shown = _shown(node, parent)
            before = ast.unparse(shown)
            if shown is node:
                after = ast.unparse(replacement)
            elif isinstance(node, ast.If | ast.While):
                after = ast.unparse(replacement.test)
            else:
                copied = copy.deepcopy(parent)
                _replace(copied, _eligible_child(copied, parent, node), replacement)
                after = ast.unparse(copied)
            key = (scope, before, after)
            seen[key] = seen.get(key, 0) + 1
            mutants.append(Mutant(module, scope, node.lineno, before, after, seen[key], site, kind))
    return mutants, tree, lines


def _eligible_child(copied: ast.AST, original: ast.AST, child: ast.AST) -> ast.AST:
    """The node in `copied` (a deep copy of `original`) at the place of `child`."""
    for (_, value), (_, copied_value) in zip(
        ast.iter_fields(original), ast.iter_fields(copied), strict=True
    ):
        if value is child:
            return copied_value
        if isinstance(value, list):
            for item, copied_item in zip(value, copied_value, strict=True):
                if item is child:
                    return copied_item
    raise LookupError("child not found")


# -- running them -----------------------------------------------------------------------------


class _MutantLoader(importlib.machinery.SourceFileLoader):
    code = None

    def get_code(self, fullname):  # the mutated tree instead of the file's bytes
        return self.code


class _MutantFinder:
    def __init__(self, fullname: str, path: Path, code) -> None:
        self.fullname, self.path = fullname, path
        self.loader = _MutantLoader(fullname, str(path))
        self.loader.code = code

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.fullname:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self.loader)


def _preload() -> None:
    """Import in the parent what every child needs, so a fork starts warm."""
    import hypothesis
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import streamlit  # noqa: F401
    import torch

    torch.set_num_threads(1)  # two children share two cores
    for name in (
        "transformer_lens",  # the training tests' reference model (5 s to import)
        "transformers.models.llama.modeling_llama",
        "transformers.models.qwen2.modeling_qwen2",
        "transformers.models.gpt2.modeling_gpt2",
        "transformers.models.bert.modeling_bert",
        "transformers.models.bloom",
    ):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    hypothesis.settings.register_profile(
        "mutate",
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=False,
        max_examples=MAX_EXAMPLES,
    )
    # Children share the parent's objects; frozen, they are not walked by every gc.collect().
    gc.freeze()


def _child(module: str, tree: ast.Module | None) -> None:
    """Run the tests against `tree` as attention_core.<module> (None: unchanged); never returns."""
    import hypothesis
    import pytest

    hypothesis.settings.load_profile("mutate")
    if tree is not None:
        path = module_path(module)
        code = compile(tree, str(path), "exec")
        sys.meta_path.insert(0, _MutantFinder(f"attention_core.{module}", path, code))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    first = f"test_{module}.py"
    files = list(OWN_TESTS.get(module, [first, *[f for f in TEST_FILES if f != first]]))
    # Plugins load from entry points in 0.4 s per run unless told which: only hypothesis's.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "_hypothesis_pytestplugin"]
    args += ["--no-header", "--assert=plain"]  # pass or fail is all that counts here
    os.chdir(ROOT)
    code = pytest.main([*args, *[str(ROOT / "tests" / f) for f in files]])
    os._exit(int(code))


def _start(module: str, tree: ast.Module | None) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            _child(module, tree)
        finally:
            os._exit(70)
    return pid


def stale_entries(mutants: list[Mutant], fate: dict[Mutant, str]) -> list[str]:
    """EQUIVALENT ids whose mutant a test killed in this run, so it is not equivalent after all.

    A timeout proves nothing either way: on a loaded machine equivalent mutants time out too
    (one did in a CI run, and its entry was wrongly dropped). Entries for mutants this run did
    not make (other modules, --only) are not judged here.
    """
    return sorted(m.id for m in mutants if m.id in EQUIVALENT and fate[m] == "killed")


def run(mutants: list[Mutant], trees: dict, timeout: float) -> dict[Mutant, str]:
    """Each mutant's fate: "killed", "timeout" (counted as killed) or "survived"."""
    fate: dict[Mutant, str] = {}
    queue = list(mutants)
    running: dict[int, tuple[Mutant, float]] = {}
    done = 0
    while queue or running:
        while queue and len(running) < WORKERS:
            mutant = queue.pop(0)
            tree, lines = trees[mutant.module]
            pid = _start(mutant.module, _apply(tree, lines, mutant.site, mutant.kind))
            running[pid] = (mutant, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.02)
            for pid, (mutant, started) in list(running.items()):
                if time.monotonic() - started > timeout:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    del running[pid]
                    fate[mutant] = "timeout"
            continue
        mutant, _ = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        # 0: every test passed; 5 would mean no test ran, which is not a kill either.
        fate[mutant] = "survived" if code in (0, 5) else "killed"
        done += 1
        if done % 50 == 0:
            print(f"  {done}/{len(mutants)} run", flush=True)
    return fate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help=f"some of {', '.join(MODULES)} (default all)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated function names (qualified, as in the mutant ids): mutate only "
        "inside them, e.g. to run a module's slow mutants in parts",
    )
    options = parser.parse_args()
    options.modules = options.modules or list(MODULES)
    if unknown := set(options.modules) - set(MODULES):
        parser.error(f"not a formula module: {', '.join(sorted(unknown))}")

    trees, mutants = {}, []
    for module in options.modules:
        found, tree, lines = find_mutants(module)
        trees[module] = (tree, lines)
        if module in FUNCTIONS and not options.only:
            found = [m for m in found if m.function in FUNCTIONS[module]]
        mutants += found
    if options.only:
        wanted = {name.strip() for name in options.only.split(",")}
        mutants = [m for m in mutants if m.function in wanted]
    if options.list:
        for m in mutants:
            print(f"{m.module}.py:{m.line}  {m.id}")
        print(f"{len(mutants)} mutants")
        return 0

    sys.path.insert(0, str(ROOT))
    started = time.monotonic()
    _preload()
    # The unmutated code must pass, or no kill means anything; its time sets the time limit.
    pid = _start(options.modules[0], None)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    baseline = time.monotonic() - started
    if code != 0:
        print(f"mutate: the tests fail (exit {code}) on the unmutated code; fix them first.")
        return 1
    timeout = max(30.0, 4 * baseline)
    print(f"mutate: {len(mutants)} mutants in {', '.join(options.modules)}; tests pass unmutated")
    fate = run(mutants, trees, timeout)

    equivalent = [m for m in mutants if m.id in EQUIVALENT and fate[m] == "survived"]
    survivors = [m for m in mutants if fate[m] == "survived" and m.id not in EQUIVALENT]
    counted = len(mutants) - len(equivalent)
    killed = sum(fate[m] in ("killed", "timeout") for m in mutants)
    score = killed / counted if counted else 1.0
    elapsed = time.monotonic() - started
    for m in survivors:
        print(f"SURVIVED {m.module}.py:{m.line}  {m.id}")
    for mutant_id in stale_entries(mutants, fate):
        print(f"note: EQUIVALENT entry no longer matches a surviving mutant: {mutant_id}")
    print(
        f"mutate: {killed} of {counted} mutants killed = {score:.1%} "
        f"({sum(fate[m] == 'timeout' for m in mutants)} by timeout; {len(equivalent)} equivalent "
        f"left out; {len(survivors)} survived) in {elapsed:.0f} s; required {MIN_SCORE:.0%}"
    )
    report = {
        "score": score,
        "killed": killed,
        "counted": counted,
        "equivalent": [m.id for m in equivalent],
        "survived": [asdict(m) | {"id": m.id} for m in survivors],
        "seconds": round(elapsed, 1),
        "modules": options.modules,
    }
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "mutate.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if score >= MIN_SCORE else 1


if __name__ == "__main__":
    sys.exit(main())
