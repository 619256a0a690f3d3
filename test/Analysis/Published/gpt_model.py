"""Writes a GPT .model file (GPT-2/3 architecture: pre-LayerNorm blocks with biases, GELU MLP
of 4h, learned positions, tied embedding; std/gpt.model) of the given size and layout, as the
Megatron-LM papers configure them: vocabulary 51,200, sequence 2,048 unless `vocab=` and
`seq=` say otherwise.

usage: gpt_model.py NAME LAYERS HIDDEN HEADS DP TP PP BATCH MICRO_BATCH RECOMPUTE SP
                    [SCHEDULE VIRTUAL] [vocab=V] [seq=S]
"""
import sys


def main():
    a = [x for x in sys.argv[1:] if "=" not in x]
    sizes = {"vocab": 51200, "seq": 2048}
    for x in sys.argv[1:]:
        if "=" in x:
            key, value = x.split("=", 1)
            if key not in sizes:
                sys.exit(f"gpt_model.py: unknown option '{x}' (vocab=, seq=)")
            sizes[key] = int(value)
    name, layers, hidden, heads, dp, tp, pp, batch, micro, recompute, sp = a[:11]
    schedule, virtual = (a[11], a[12]) if len(a) > 11 else ("1f1b", "1")
    dp, tp, pp, batch, micro = int(dp), int(tp), int(pp), int(batch), int(micro)
    accumulation = batch // (micro * dp)
    mesh = ", ".join(f"{k} = {v}" for k, v in (("dp", dp), ("pp", pp), ("tp", tp)) if v > 1)
    shard = ["batch = dp"] if dp > 1 else []
    if tp > 1:
        shard += ["heads = tp", "ffn = tp", "vocab = tp"]
    pipeline = ""
    if pp > 1:
        pipeline = (f"  pipeline {{ schedule = {schedule}, virtual = {virtual}, "
                    f"microbatches = {accumulation} }}\n")
    print(f"""import "std/gpt.model"

model {name} {{
  dims {{ vocab = {sizes["vocab"]}, seq = {sizes["seq"]}, embed = {hidden}, heads = {heads}, head = embed / heads, ffn = 4 * embed }}
  layers = {layers}
  forward(tokens: i32[batch, seq], targets: i32[batch, seq]) -> loss {{
    param wte: [vocab, embed] init normal(0.02)
    param wpe: [seq, embed] init normal(0.02)
    x = embedding(wte, tokens) + wpe
    repeat layers {{ x = gpt_block(x) }}
    param lnf_g: [embed] init ones
    param lnf_b: [embed] init zeros
    x = layernorm(x, lnf_g, lnf_b)
    logits = x @ wte
    return cross_entropy(logits, targets)
  }}
}}

parallel {{
  mesh {{ {mesh} }}
  shard {{ {", ".join(shard)} }}
  sequence_parallel = {sp}
  zero = 1
{pipeline}  recompute = {recompute}
  overlap = true
}}

train {{
  batch = {batch}
  micro_batch = {micro}
  steps = 10
  optimizer = adamw(lr = 6e-5, betas = (0.9, 0.95), eps = 1e-8, weight_decay = 0.1)
  precision = bf16
  data = "tokens.bin"
  tokenizer = tokens
}}""")


if __name__ == "__main__":
    main()
