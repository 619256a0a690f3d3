"""PyTorch reference implementations of the models Tessel compiles, for parity tests.

Everything here is written by hand, nanoGPT style, so that it can be read next to
std/attention.model, std/gpt.model and std/llama.model and checked line by line:

  GPT    (std/gpt.model, examples/tiny_gpt.model):   learned positions, pre-LayerNorm blocks,
         multi-head attention with biases, GELU (tanh) MLP, output head tied to the embedding.
  Llama  (std/llama.model, examples/llama_small.model): RMSNorm blocks, grouped-query attention
         with rotary positions, SwiGLU MLP, no biases, separate output matrix w_out.
  Mixtral (std/moe.model, examples/mixtral_small.model): the Llama layer with a routed mixture
         of SwiGLU experts, written with token indices (torch.topk, nonzero, index_add) rather
         than the dispatch tensors the .model file builds, plus the load-balancing and z-losses.

Parameters are named and shaped exactly as Tessel names and shapes them (the dotted path of
the spec, e.g. `layers.0.gpt_block.causal_self_attention.wq` with shape [embed, heads, head]),
so a `{name: tensor}` dict dumped by a Tessel executable loads with `load_state_dict`. The
math is written against those shapes with einsum, the way the .model files write it with `@`:
`x @ wq` over [batch, seq, embed] x [embed, heads, head] is `einsum("bse,ehd->bshd")`.
Nothing is reshaped in place.

Also here: a safetensors reader/writer (numpy only), Tessel's learning-rate schedule, and one
optimizer step with gradient accumulation and clipping, as the Tessel runtime defines them.

Only torch and numpy are needed (Debian's /usr/bin/python3 has both).

The code is in the modules beside this file, one concern each; this one imports all their
names, so `import reference` (with this folder on sys.path) gives everything:

  reference_spec.py         ModelConfig, TrainConfig, and reading them from the graph IR
                            (parse_graph, graph_of)
  reference_ops.py          the operations: layernorm, rmsnorm, gelu, rope, attention, ...
  reference_models.py       Gpt, Llama, Mixtral, Masks; build_model, load_params,
                            init_like_tessel
  reference_training.py     lr_at, parameter_class, make_optimizer, train_step
  reference_safetensors.py  read_safetensors, write_safetensors
"""

from __future__ import annotations

# Every name the modules define, as when they were one file (the callers use ref.<name>).
from reference_spec import (  # noqa: F401
    SETTINGS_DEFAULTS, GraphInfo, ModelConfig, TrainConfig, _AttrParser, graph_of, parse_graph)
from reference_ops import (  # noqa: F401
    _param, attention, cross_entropy, gelu, gelu_erf, layernorm, rmsnorm, rope)
from reference_models import (  # noqa: F401
    CausalSelfAttention, Gpt, GptBlock, GptMlp, GroupedQueryAttention, HandRmsNorm, Llama,
    LlamaBlock, MaskedAttention, MaskedBlock, MaskedMlp, Masks, Mixtral, MixtralBlock, MoeMlp,
    SwigluMlp, build_model, init_like_tessel, load_params)
from reference_training import (  # noqa: F401
    BIASES, EMBEDDINGS, GAINS, StepResult, lr_at, make_optimizer, parameter_class, train_step)
from reference_safetensors import _DTYPES, read_safetensors, write_safetensors  # noqa: F401
