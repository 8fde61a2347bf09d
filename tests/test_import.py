"""`import attention_core` loads NumPy only, and exposes the public API the pages rely on."""

import json
import subprocess
import sys
from pathlib import Path

import attention_core

ROOT = Path(__file__).resolve().parents[1]

PUBLIC_API = """
softmax naive_softmax softmax_jacobian causal_mask padding_mask sliding_window_mask sink_window_mask
prefix_lm_mask combine_masks mask_to_additive scaled_dot_product_attention dot_product_attention
additive_attention cosine_attention attend SCORING_FUNCTIONS AttentionSteps AdditiveParams
init_additive_params MultiHeadParams MultiHeadSteps init_multi_head_params split_heads merge_heads
multi_head_attention sinusoidal_encoding sinusoid_wavelengths sinusoid_shift_matrix
learned_encoding apply_rotary rope_scores alibi_slopes alibi_bias chunked_attention
ChunkedAttention KVCache decode_step incremental_causal_attention attention_entropy
head_statistics AttentionInputError max_elements
""".split()


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout


def test_import_loads_neither_torch_nor_streamlit():
    code = (
        "import sys, json, attention_core, attention_core.summaries;"
        "print(json.dumps(sorted(m for m in ('torch', 'streamlit', 'plotly', 'pandas')"
        " if m in sys.modules)))"
    )
    assert json.loads(run_python(code)) == []


def test_torch_backend_is_where_torch_is_imported():
    code = "import sys, attention_core.torch_backend; print('torch' in sys.modules)"
    assert run_python(code).strip() == "True"


def test_public_api_is_the_curated_list():
    assert sorted(attention_core.__all__) == sorted(PUBLIC_API)
    assert all(hasattr(attention_core, name) for name in attention_core.__all__)


def test_docstring_table_of_contents_names_every_module():
    package = ROOT / "attention_core"
    modules = [p.stem for p in package.glob("*.py") if p.stem != "__init__"] + ["models"]
    contents = attention_core.__doc__.split("Contents, module by module:")[1]
    listed = {line.split()[0] for line in contents.splitlines() if line.strip()}
    assert sorted(set(modules) - listed) == []
    # Every public name is mentioned under the module that holds it.
    for name in PUBLIC_API:
        assert name in contents, name
