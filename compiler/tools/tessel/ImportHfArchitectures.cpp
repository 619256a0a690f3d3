//===- ImportHfArchitectures.cpp - Each architecture's blocks and loads ---===//
//
// The spec of an imported model is written per architecture family: GPT-2, and the Llama
// family (Llama, Mistral, Qwen2, Qwen3), whose differences are settings of config.json. Each
// writer reads the sizes and settings from config.json, refuses what the spec cannot express,
// and writes the blocks with every parameter declared in the dim order of the stored tensor it
// loads, recording each load with the shape config.json implies so that the folder can be
// checked against it.
//
//===----------------------------------------------------------------------===//

#include "ImportHfImpl.h"

#include <charconv>
#include <cmath>

namespace tessel::importhf {
namespace {

/// The shortest text that reads back as `v` (the spec's numbers are parsed as doubles).
std::string formatNumber(double v) {
  // Whole numbers as integers (rope theta 500000, not 5e+05).
  if (v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 1e15)
    return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

} // namespace

void writeLlama(const Config &c, const std::string &type, Spec &spec,
                std::map<std::string, int64_t> &dims, std::string &forward) {
  const int64_t embed = c.integer({"hidden_size"});
  const int64_t heads = c.integer({"num_attention_heads"});
  const int64_t kvHeads = c.integer({"num_key_value_heads"}, heads);
  if (heads % kvHeads != 0)
    throw ImportError{c.path() + ": num_key_value_heads (" + std::to_string(kvHeads) +
                      ") does not divide num_attention_heads (" + std::to_string(heads) + ")"};
  if (!c.has("head_dim") && embed % heads != 0)
    throw ImportError{c.path() + ": hidden_size (" + std::to_string(embed) +
                      ") is not a multiple of num_attention_heads and no head_dim is given"};
  const int64_t head = c.integer({"head_dim"}, embed / heads);
  if (head % 2 != 0)
    throw ImportError{c.path() + ": head_dim " + std::to_string(head) +
                      " is odd, and rotary embeddings pair a head's features"};
  const int64_t ffn = c.integer({"intermediate_size"});
  const int64_t vocab = c.integer({"vocab_size"});
  const double eps = c.number("rms_norm_eps", 1e-6);
  // transformers 5 keeps rope_theta (and the scaling) in rope_parameters.
  const json::Object *rope = c.object().getObject("rope_parameters");
  double theta = 10000.0;
  if (c.has("rope_theta"))
    theta = c.number("rope_theta");
  else if (rope && rope->getNumber("rope_theta"))
    theta = *rope->getNumber("rope_theta");
  const std::string act = c.string("hidden_act", "silu");
  if (act != "silu")
    throw ImportError{c.path() + ": 'hidden_act' is \"" + act +
                      "\"; the gated MLP of this family is imported with silu only"};
  // Rotary frequencies: rope_scaling (transformers 4) or rope_parameters (5): none, or Llama
  // 3.1's rescaling of the low frequencies.
  std::string scaling;
  if (c.has("rope_scaling") || rope) {
    const json::Object *r = c.has("rope_scaling") ? c.object().getObject("rope_scaling") : rope;
    const std::string key = c.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (!r)
      throw ImportError{c.path() + ": '" + key + "' should be an object"};
    std::string kind = "default";
    if (auto t = r->getString("rope_type") ? r->getString("rope_type") : r->getString("type"))
      kind = t->str();
    auto field = [&](const char *name, std::optional<double> fallback) {
      std::optional<double> v = r->getNumber(name);
      if (!v && fallback)
        return *fallback;
      if (!v || !(*v > 0))
        throw ImportError{c.path() + ": '" + key + "." + name + "' should be a positive number"};
      return *v;
    };
    if (kind == "llama3") {
      const double factor = field("factor", {}), low = field("low_freq_factor", {});
      const double high = field("high_freq_factor", {});
      std::optional<double> context;
      if (std::optional<int64_t> m = c.object().getInteger("max_position_embeddings"))
        context = static_cast<double>(*m);
      const double original = field("original_max_position_embeddings", context);
      if (!(high > low))
        throw ImportError{c.path() + ": '" + key +
                          "': high_freq_factor must exceed "
                          "low_freq_factor"};
      scaling = ",\n             scaling_factor = " + formatNumber(factor) +
                ", low_freq_factor = " + formatNumber(low) +
                ", high_freq_factor = " + formatNumber(high) +
                ", original_context = " + formatNumber(original);
    } else if (kind != "default") {
      throw ImportError{c.path() + ": '" + key + "' of type \"" + kind +
                        "\" is not supported (plain and llama3 rotary frequencies are)"};
    }
  }
  const bool qwen2 = type == "qwen2", qwen3 = type == "qwen3";
  // Llama may put biases on all four projections; Qwen2 has them on q, k and v.
  const bool qkvBias = qwen2 || c.flag("attention_bias", false);
  const bool outBias = !qwen2 && !qwen3 && c.flag("attention_bias", false);
  if (qwen3 && c.flag("attention_bias", false))
    throw ImportError{c.path() + ": 'attention_bias' true is not supported for qwen3"};
  if (c.flag("mlp_bias", false))
    throw ImportError{c.path() + ": 'mlp_bias' true is not supported (the MLP has no biases)"};
  // Mistral's sliding window: position i sees keys j with i - j < W. Qwen2 and Qwen3 name a
  // window too, but use it only with use_sliding_window (and then on some layers only).
  std::string window;
  if (qwen2 || qwen3) {
    if (c.flag("use_sliding_window", false))
      throw ImportError{c.path() + ": 'use_sliding_window' is true: Qwen's per-layer sliding "
                                   "windows are not imported"};
  } else if (c.has("sliding_window")) {
    window = ", window = " + std::to_string(c.integer({"sliding_window"}));
  }
  const bool tied = c.flag("tie_word_embeddings", false);
  spec.layers = c.integer({"num_hidden_layers"});
  spec.contextLength = c.integer({"max_position_embeddings"}, int64_t(0), 0);
  dims = {{"vocab", vocab},      {"embed", embed}, {"heads", heads},
          {"kv_heads", kvHeads}, {"head", head},   {"ffn", ffn}};

  const std::string L = "model.layers.{layer}.";
  const std::string e = formatNumber(eps);
  auto because = [&](const std::string &what) { return "config.json: " + what; };
  std::string b;
  b += "# Attention: grouped-query when kv_heads < heads, rotary positions on q and k";
  b +=
      qwen3 ? ", q and k\n# normalised per head (RMSNorm over head) before the rotation.\n" : ".\n";
  b += "block self_attn(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  auto proj = [&](const char *n, const char *hs) {
    const int64_t h = std::string(hs) == "heads" ? heads : kvHeads;
    b += std::string("  param ") + n + "_proj: [" + hs + ", head, embed] init " +
         spec.load(L + "self_attn." + n + "_proj.weight", {h * head, embed},
                   because(std::string(hs) + " x head, hidden_size")) +
         "\n";
    if (qkvBias)
      b += std::string("  param ") + n + "_bias: [" + hs + ", head] init " +
           spec.load(L + "self_attn." + n + "_proj.bias", {h * head},
                     because(std::string(hs) + " x head")) +
           "\n";
  };
  proj("q", "heads");
  proj("k", "kv_heads");
  proj("v", "kv_heads");
  b += "  param o_proj: [embed, heads, head] init " +
       spec.load(L + "self_attn.o_proj.weight", {embed, heads * head},
                 because("hidden_size, heads x head")) +
       "\n";
  if (outBias)
    b += "  param o_bias: [embed] init " +
         spec.load(L + "self_attn.o_proj.bias", {embed}, because("hidden_size")) + "\n";
  if (qwen3) {
    b += "  param q_norm: [head] init " +
         spec.load(L + "self_attn.q_norm.weight", {head}, because("head_dim")) + "\n";
    b += "  param k_norm: [head] init " +
         spec.load(L + "self_attn.k_norm.weight", {head}, because("head_dim")) + "\n";
  }
  b += "\n";
  const std::string t = formatNumber(theta) + scaling;
  auto projected = [&](const char *n) {
    std::string p = std::string("x @ ") + n + "_proj";
    if (qkvBias)
      p += std::string(" + ") + n + "_bias";
    return p;
  };
  if (qwen3) {
    b += "  q = rope(rmsnorm(" + projected("q") + ", q_norm, eps = " + e + "), theta = " + t +
         ")   # [batch, seq, heads, head]\n";
    b += "  k = rope(rmsnorm(" + projected("k") + ", k_norm, eps = " + e + "), theta = " + t +
         ")   # [batch, seq, kv_heads, head]\n";
  } else {
    b += "  q = rope(" + projected("q") + ", theta = " + t + ")   # [batch, seq, heads, head]\n";
    b += "  k = rope(" + projected("k") + ", theta = " + t + ")   # [batch, seq, kv_heads, head]\n";
  }
  b += "  v = " + projected("v") + "\n";
  b += "  a = attention(q, k, v, causal = true" + window + ")\n";
  b += std::string("  return a @ o_proj") + (outBias ? " + o_bias" : "") + "\n}\n\n";

  b += "# The gated MLP: silu(x gate) * (x up), projected back down.\n";
  b += "block mlp(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  b += "  param gate_proj: [ffn, embed] init " +
       spec.load(L + "mlp.gate_proj.weight", {ffn, embed},
                 because("intermediate_size, hidden_size")) +
       "\n";
  b +=
      "  param up_proj: [ffn, embed] init " +
      spec.load(L + "mlp.up_proj.weight", {ffn, embed}, because("intermediate_size, hidden_size")) +
      "\n";
  b += "  param down_proj: [embed, ffn] init " +
       spec.load(L + "mlp.down_proj.weight", {embed, ffn},
                 because("hidden_size, intermediate_size")) +
       "\n";
  b += "  return (silu(x @ gate_proj) * (x @ up_proj)) @ down_proj\n}\n\n";

  b += "# One decoder layer: RMSNorm before each sub-layer, residual adds after.\n";
  b += "block decoder_layer(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  b += "  param input_layernorm: [embed] init " +
       spec.load(L + "input_layernorm.weight", {embed}, because("hidden_size")) + "\n";
  b += "  param post_attention_layernorm: [embed] init " +
       spec.load(L + "post_attention_layernorm.weight", {embed}, because("hidden_size")) + "\n";
  b += "  h = x + self_attn(rmsnorm(x, input_layernorm, eps = " + e + "))\n";
  b += "  return h + mlp(rmsnorm(h, post_attention_layernorm, eps = " + e + "))\n}\n";
  spec.blocks = b;

  std::string f;
  f += "    param embed_tokens: [vocab, embed] init " +
       spec.load("model.embed_tokens.weight", {vocab, embed}, because("vocab_size, hidden_size")) +
       "\n";
  f += "    x = embedding(embed_tokens, tokens)      # [batch, seq, embed]\n";
  f += "    repeat layers { x = decoder_layer(x) }\n";
  f += "    param norm: [embed] init " +
       spec.load("model.norm.weight", {embed}, because("hidden_size")) + "\n";
  f += "    x = rmsnorm(x, norm, eps = " + e + ")\n";
  if (tied) {
    f += "    logits = x @ embed_tokens                # tied: the embedding is the head\n";
    spec.ignorable.push_back("lm_head.weight");
  } else {
    f += "    param lm_head: [vocab, embed] init " +
         spec.load("lm_head.weight", {vocab, embed}, because("vocab_size, hidden_size")) + "\n";
    f += "    logits = x @ lm_head                     # [batch, seq, vocab]\n";
  }
  f += "    return cross_entropy(logits, targets)\n";
  forward = f;
  spec.ignorable.push_back("model.layers.{layer}.self_attn.rotary_emb.inv_freq");
}

void writeGpt2(const Config &c, const std::map<std::string, StoredTensor> &stored, Spec &spec,
               std::map<std::string, int64_t> &dims, std::string &forward) {
  const int64_t embed = c.integer({"n_embd", "hidden_size"});
  const int64_t heads = c.integer({"n_head", "num_attention_heads"});
  if (embed % heads != 0)
    throw ImportError{c.path() + ": n_embd (" + std::to_string(embed) +
                      ") is not a multiple of n_head (" + std::to_string(heads) + ")"};
  const int64_t ffn = c.integer({"n_inner"}, 4 * embed);
  const int64_t vocab = c.integer({"vocab_size"});
  const double eps = c.number("layer_norm_epsilon", 1e-5);
  const std::string act = c.string("activation_function", "gelu_new");
  std::string gelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
    gelu = "gelu";
  else if (act == "gelu")
    gelu = "gelu_erf";
  else
    throw ImportError{c.path() + ": 'activation_function' is \"" + act +
                      "\"; GPT-2 is imported with gelu_new (tanh) or gelu (erf)"};
  if (!c.flag("scale_attn_weights", true) || c.flag("scale_attn_by_inverse_layer_idx", false))
    throw ImportError{c.path() + ": GPT-2's attention is imported with scores scaled by "
                                 "1/sqrt(head) only (scale_attn_weights true, "
                                 "scale_attn_by_inverse_layer_idx false)"};
  const bool tied = c.flag("tie_word_embeddings", true);
  spec.layers = c.integer({"n_layer", "num_hidden_layers"});
  spec.contextLength = c.integer({"n_positions", "max_position_embeddings"});
  // GPT2LMHeadModel.save_pretrained writes "transformer."-prefixed names; the published
  // checkpoints have none.
  spec.prefix = stored.count("transformer.wte.weight") ? "transformer." : "";
  const int64_t head = embed / heads;
  dims = {{"vocab", vocab}, {"embed", embed}, {"heads", heads}, {"head", head}, {"ffn", ffn}};

  const std::string L = "h.{layer}.";
  const std::string e = formatNumber(eps);
  auto because = [&](const std::string &what) { return "config.json: " + what; };
  std::string b;
  b += "# GPT-2's attention keeps q, k and v in one Conv1D matrix, c_attn [embed, 3 embed]:\n";
  b += "# each projection loads its third.\n";
  b += "block attn(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  const char *names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i)
    b += std::string("  param ") + names[i] + "_proj: [embed, heads, head] init " +
         spec.load(L + "attn.c_attn.weight", {embed, 3 * embed}, because("n_embd, 3 n_embd"),
                   "part = " + std::to_string(i) + ", parts = 3") +
         "\n";
  for (int i = 0; i < 3; ++i)
    b += std::string("  param ") + names[i] + "_bias: [heads, head] init " +
         spec.load(L + "attn.c_attn.bias", {3 * embed}, because("3 n_embd"),
                   "part = " + std::to_string(i) + ", parts = 3") +
         "\n";
  b += "  param c_proj: [heads, head, embed] init " +
       spec.load(L + "attn.c_proj.weight", {embed, embed}, because("n_embd, n_embd")) + "\n";
  b += "  param c_proj_bias: [embed] init " +
       spec.load(L + "attn.c_proj.bias", {embed}, because("n_embd")) + "\n\n";
  b += "  q = x @ q_proj + q_bias                  # [batch, seq, heads, head]\n";
  b += "  k = x @ k_proj + k_bias\n";
  b += "  v = x @ v_proj + v_bias\n";
  b += "  return attention(q, k, v, causal = true) @ c_proj + c_proj_bias\n}\n\n";

  b += "block mlp(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  b += "  param c_fc: [embed, ffn] init " +
       spec.load(L + "mlp.c_fc.weight", {embed, ffn}, because("n_embd, n_inner")) + "\n";
  b += "  param c_fc_bias: [ffn] init " +
       spec.load(L + "mlp.c_fc.bias", {ffn}, because("n_inner")) + "\n";
  b += "  param c_proj: [ffn, embed] init " +
       spec.load(L + "mlp.c_proj.weight", {ffn, embed}, because("n_inner, n_embd")) + "\n";
  b += "  param c_proj_bias: [embed] init " +
       spec.load(L + "mlp.c_proj.bias", {embed}, because("n_embd")) + "\n";
  b += "  return " + gelu + "(x @ c_fc + c_fc_bias) @ c_proj + c_proj_bias\n}\n\n";

  b += "# One layer, LayerNorm before each sub-layer.\n";
  b += "block layer(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  for (const char *ln : {"ln_1", "ln_2"}) {
    b += std::string("  param ") + ln + "_weight: [embed] init " +
         spec.load(L + ln + ".weight", {embed}, because("n_embd")) + "\n";
    b += std::string("  param ") + ln + "_bias: [embed] init " +
         spec.load(L + ln + ".bias", {embed}, because("n_embd")) + "\n";
  }
  b += "  h = x + attn(layernorm(x, ln_1_weight, ln_1_bias, eps = " + e + "))\n";
  b += "  return h + mlp(layernorm(h, ln_2_weight, ln_2_bias, eps = " + e + "))\n}\n";
  spec.blocks = b;

  std::string f;
  f += "    param wte: [vocab, embed] init " +
       spec.load("wte.weight", {vocab, embed}, because("vocab_size, n_embd")) + "\n";
  f += "    # The position table holds n_positions rows; a sequence uses the first seq.\n";
  f += "    param wpe: [seq, embed] init " +
       spec.load("wpe.weight", {spec.contextLength, embed}, because("n_positions, n_embd"),
                 "rows = seq") +
       "\n";
  f += "    x = embedding(wte, tokens) + wpe          # [batch, seq, embed]\n";
  f += "    repeat layers { x = layer(x) }\n";
  f += "    param ln_f_weight: [embed] init " +
       spec.load("ln_f.weight", {embed}, because("n_embd")) + "\n";
  f += "    param ln_f_bias: [embed] init " + spec.load("ln_f.bias", {embed}, because("n_embd")) +
       "\n";
  f += "    x = layernorm(x, ln_f_weight, ln_f_bias, eps = " + e + ")\n";
  if (tied) {
    f += "    logits = x @ wte                          # tied: the token table is the head\n";
    spec.ignorable.push_back("lm_head.weight");
  } else {
    // The head is outside the base model: never prefixed.
    std::string saved = spec.prefix;
    spec.prefix = "";
    f += "    param lm_head: [vocab, embed] init " +
         spec.load("lm_head.weight", {vocab, embed}, because("vocab_size, n_embd")) + "\n";
    spec.prefix = saved;
    f += "    logits = x @ lm_head\n";
  }
  f += "    return cross_entropy(logits, targets)\n";
  forward = f;
  spec.ignorable.push_back(spec.prefix + L + "attn.bias");
  spec.ignorable.push_back(spec.prefix + L + "attn.masked_bias");
}

} // namespace tessel::importhf
