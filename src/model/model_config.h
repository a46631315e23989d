// ModelConfig: the plain facts of a Gemma model, parsed once from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gemlet {

struct LayerConfig {
  bool sliding = false;   // sliding-window (local) attention layer
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;       // of queries and keys
  int head_dim_v = 0;     // of values
  int ffn_dim = 0;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear RoPE scaling: positions are multiplied by this (1/factor)
  int kv_source = -1;            // >= 0: reuses that earlier layer's K/V (Gemma 3n/4 KV sharing)
};

struct ModelConfig {
  std::string arch;        // general.architecture
  std::string name;        // general.name, informational
  int n_layers = 0;
  int d_model = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int sliding_window = 0;  // tokens a sliding layer sees, itself included
  float norm_eps = 1e-6f;
  float embed_scale = 1.0f;      // Gemma multiplies embeddings by sqrt(d_model)
  float attn_scale = 1.0f;       // multiplies q·k
  float attn_softcap = 0.0f;     // 0: none
  float final_softcap = 0.0f;    // 0: none
  std::vector<LayerConfig> layers;

  int MaxHeadDim() const;
  int MaxFfnDim() const;
  int MaxQueryWidth() const;     // max over layers of n_heads * head_dim(_v)
  int MaxKvWidth() const;        // max over layers of n_kv_heads * head_dim(_v)
};

}  // namespace gemlet
