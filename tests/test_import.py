"""`import attention_core` loads NumPy only, and exposes the public API the pages rely on."""

import json
import subprocess
import sys
from pathlib import Path

import attention_core

ROOT = Path(__file__).resolve().parents[1]

PUBLIC_API = """
softmax naive_softmax causal_mask padding_mask sliding_window_mask prefix_lm_mask combine_masks
mask_to_additive scaled_dot_product_attention dot_product_attention additive_attention
cosine_attention attend SCORING_FUNCTIONS AttentionSteps AdditiveParams init_additive_params
MultiHeadParams MultiHeadSteps init_multi_head_params split_heads merge_heads
multi_head_attention sinusoidal_encoding sinusoid_wavelengths sinusoid_shift_matrix
learned_encoding apply_rotary rope_scores alibi_slopes alibi_bias attention_entropy
scaling_experiment head_statistics AttentionInputError
""".split()


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout


def test_import_loads_neither_torch_nor_streamlit():
    code = (
        "import sys, json, attention_core, attention_core.statistics;"
        "print(json.dumps(sorted(m for m in ('torch', 'streamlit', 'plotly', 'pandas')"
        " if m in sys.modules)))"
    )
    assert json.loads(run_python(code)) == []


def test_torch_backend_is_where_torch_is_imported():
    code = "import sys, attention_core.torch_backend; print('torch' in sys.modules)"
    assert run_python(code).strip() == "True"


def test_public_api_is_importable_from_the_package():
    missing = [name for name in PUBLIC_API if not hasattr(attention_core, name)]
    assert missing == []
    assert set(PUBLIC_API) <= set(attention_core.__all__)
    assert all(hasattr(attention_core, name) for name in attention_core.__all__)
