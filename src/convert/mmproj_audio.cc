// The audio towers of multimodal Gemma checkpoints in llama.cpp's mmproj layout (a.* and mm.a.*
// tensors, clip.audio.* keys), beside the vision tower in the same file: Gemma 4's conformer
// ("gemma4a") and Gemma 3n's ("gemma3na").
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "convert/mmproj_parts.h"

namespace gemlet::mmproj {

namespace {

// The mel bins the feature extractor makes: its feature_size (feature_extractor_config.json as
// save_pretrained writes it, preprocessor_config.json on the hub, or nested in processor_config.json),
// else `fallback`.
Result<int64_t> MelBins(const std::string& hf_dir, int64_t fallback) {
  for (const char* name : {"feature_extractor_config.json", "preprocessor_config.json", "processor_config.json"}) {
    const std::filesystem::path path = std::filesystem::path(hf_dir) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    ASSIGN_OR_RETURN(Json j, ReadJsonFile(path));
    const Json* fe = &j;
    if (auto nested = j.find("feature_extractor"); nested != j.end() && nested->is_object()) fe = &*nested;
    if (fe->contains("feature_size")) return PositiveInt(*fe, "feature_size", path.string());
  }
  return fallback;
}

// What a 3x3 stride-2 convolution padded by 1 leaves of n rows (HF's Conv2d, padding=1).
int64_t Halved(int64_t n) { return (n - 1) / 2 + 1; }

// Gemma4AudioConfig's fields, HF's defaults where a key is absent.
struct Gemma4Audio {
  int64_t hidden, n_layers, n_heads, ch0, ch1, out_dim, text_hidden, n_mels;
  int64_t chunk, context_left, context_right, kernel;
  double eps, logit_cap, residual_weight;
  bool clipped;
};

Result<Gemma4Audio> ReadGemma4Audio(const Json& config, const std::string& hf_dir, const std::string& label) {
  ASSIGN_OR_RETURN(const Json* audio, SubConfig(config, "audio_config", label));
  ASSIGN_OR_RETURN(const Json* text, SubConfig(config, "text_config", label));
  const std::string where = label + " audio_config";
  const Json& a = *audio;
  Gemma4Audio t{};
  const auto int_or = [&](const char* key, int64_t fallback) -> Result<int64_t> {
    if (!a.contains(key) || a[key].is_null()) return fallback;
    return PositiveInt(a, key, where);
  };
  ASSIGN_OR_RETURN(t.hidden, int_or("hidden_size", 1536));
  ASSIGN_OR_RETURN(t.n_layers, int_or("num_hidden_layers", 12));
  ASSIGN_OR_RETURN(t.n_heads, int_or("num_attention_heads", 8));
  ASSIGN_OR_RETURN(t.out_dim, int_or("output_proj_dims", 1536));
  ASSIGN_OR_RETURN(t.chunk, int_or("attention_chunk_size", 12));
  ASSIGN_OR_RETURN(t.context_left, int_or("attention_context_left", 13));
  ASSIGN_OR_RETURN(t.kernel, int_or("conv_kernel_size", 5));
  t.context_right = 0;
  if (a.contains("attention_context_right") && !a["attention_context_right"].is_null()) {
    if (!a["attention_context_right"].is_number_integer() || a["attention_context_right"].get<int64_t>() < 0) {
      return Status::Error(where + ": 'attention_context_right' must be a non-negative integer");
    }
    t.context_right = a["attention_context_right"].get<int64_t>();
  }
  t.ch0 = 128;
  t.ch1 = 32;
  if (auto it = a.find("subsampling_conv_channels"); it != a.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() || !(*it)[1].is_number_integer() ||
        (*it)[0].get<int64_t>() <= 0 || (*it)[1].get<int64_t>() <= 0) {
      return Status::Error(where + ": 'subsampling_conv_channels' must be two positive integers");
    }
    t.ch0 = (*it)[0].get<int64_t>();
    t.ch1 = (*it)[1].get<int64_t>();
  }
  ASSIGN_OR_RETURN(t.eps, NumberOr(a, "rms_norm_eps", 1e-6, where));
  ASSIGN_OR_RETURN(t.logit_cap, NumberOr(a, "attention_logit_cap", 50.0, where));
  ASSIGN_OR_RETURN(t.residual_weight, NumberOr(a, "residual_weight", 0.5, where));
  ASSIGN_OR_RETURN(t.clipped, BoolOr(a, "use_clipped_linears", true, where));
  ASSIGN_OR_RETURN(t.text_hidden, PositiveInt(*text, "hidden_size", label + " text_config"));
  if (std::string act = a.value("hidden_act", std::string("silu")); act != "silu") {
    return Status::Error(where + ": hidden_act '" + act + "' (gemlet's conformer runs silu)");
  }
  if (t.hidden % t.n_heads != 0 || t.context_left < 2 || !(t.logit_cap > 0)) {
    return Status::Error(where + ": " + std::to_string(t.hidden) + " over " + std::to_string(t.n_heads) +
                         " heads, attention_context_left " + std::to_string(t.context_left) +
                         " do not make a Gemma 4 conformer");
  }
  // HF sizes the input projection as if the mel bins were subsampling_conv_channels[0].
  ASSIGN_OR_RETURN(t.n_mels, MelBins(hf_dir, t.ch0));
  if (Halved(Halved(t.n_mels)) != t.ch0 / 4) {
    return Status::Error(where + ": " + std::to_string(t.n_mels) + " mel bins do not fit the input projection's " +
                         std::to_string(t.ch0 / 4) + " frequency rows (subsampling_conv_channels[0] / 4)");
  }
  return t;
}

// softplus in float, as the converter computes it on the checkpoint's float32 tensor.
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }


// A [a, b] pair of positive integers (Gemma3nAudioConfig's sscp_* lists), or the default.
Result<std::pair<int64_t, int64_t>> PairOr(const Json& object, const char* key, std::pair<int64_t, int64_t> fallback,
                                           const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() || !(*it)[1].is_number_integer() ||
      (*it)[0].get<int64_t>() <= 0 || (*it)[1].get<int64_t>() <= 0) {
    return Status::Error(where + ": '" + key + "' must be two positive integers");
  }
  return std::pair{(*it)[0].get<int64_t>(), (*it)[1].get<int64_t>()};
}

// Gemma3nAudioConfig's fields (and the soft-token count and text vocabulary around them), HF's
// defaults where a key is absent.
struct Gemma3nAudio {
  int64_t hidden, n_layers, n_heads, ch0, ch1, n_mels, text_hidden, text_vocab;
  int64_t chunk, context_left, context_right, kernel, reduction, vocab_offset, vocab_size, soft_tokens;
  double eps, conv_norm_eps, logit_cap, residual_weight;
};

Result<Gemma3nAudio> ReadGemma3nAudio(const Json& config, const std::string& label) {
  ASSIGN_OR_RETURN(const Json* audio, SubConfig(config, "audio_config", label));
  ASSIGN_OR_RETURN(const Json* text, SubConfig(config, "text_config", label));
  const std::string where = label + " audio_config";
  const Json& a = *audio;
  Gemma3nAudio t{};
  const auto int_or = [&](const Json& o, const char* key, int64_t fallback, const std::string& in) -> Result<int64_t> {
    if (!o.contains(key) || o[key].is_null()) return fallback;
    return PositiveInt(o, key, in);
  };
  ASSIGN_OR_RETURN(t.hidden, int_or(a, "hidden_size", 1536, where));
  ASSIGN_OR_RETURN(t.n_layers, int_or(a, "conf_num_hidden_layers", 12, where));
  ASSIGN_OR_RETURN(t.n_heads, int_or(a, "conf_num_attention_heads", 8, where));
  ASSIGN_OR_RETURN(t.n_mels, int_or(a, "input_feat_size", 128, where));
  ASSIGN_OR_RETURN(t.chunk, int_or(a, "conf_attention_chunk_size", 12, where));
  ASSIGN_OR_RETURN(t.context_left, int_or(a, "conf_attention_context_left", 13, where));
  ASSIGN_OR_RETURN(t.kernel, int_or(a, "conf_conv_kernel_size", 5, where));
  ASSIGN_OR_RETURN(t.reduction, int_or(a, "conf_reduction_factor", 4, where));
  ASSIGN_OR_RETURN(t.vocab_offset, int_or(a, "vocab_offset", 262272, where));
  ASSIGN_OR_RETURN(t.vocab_size, int_or(a, "vocab_size", 128, where));
  ASSIGN_OR_RETURN(t.soft_tokens, int_or(config, "audio_soft_tokens_per_image", 188, label));
  ASSIGN_OR_RETURN(t.text_hidden, PositiveInt(*text, "hidden_size", label + " text_config"));
  ASSIGN_OR_RETURN(t.text_vocab, PositiveInt(*text, "vocab_size", label + " text_config"));
  t.context_right = 0;
  if (a.contains("conf_attention_context_right") && !a["conf_attention_context_right"].is_null()) {
    if (!a["conf_attention_context_right"].is_number_integer() || a["conf_attention_context_right"].get<int64_t>() < 0) {
      return Status::Error(where + ": 'conf_attention_context_right' must be a non-negative integer");
    }
    t.context_right = a["conf_attention_context_right"].get<int64_t>();
  }
  ASSIGN_OR_RETURN(auto channels, PairOr(a, "sscp_conv_channel_size", {128, 32}, where));
  t.ch0 = channels.first;
  t.ch1 = channels.second;
  // gemlet's tower runs the released shape: 3x3 kernels, stride 2 both ways.
  for (const char* key : {"sscp_conv_kernel_size", "sscp_conv_stride_size"}) {
    auto it = a.find(key);
    if (it == a.end() || it->is_null()) continue;
    const int64_t want = std::string(key) == "sscp_conv_kernel_size" ? 3 : 2;
    bool ok = it->is_array() && it->size() == 2;
    for (size_t i = 0; ok && i < 2; ++i) {
      const Json& e = (*it)[i];
      ok = e.is_array() && e.size() == 2 && e[0].is_number_integer() && e[1].is_number_integer() &&
           e[0].get<int64_t>() == want && e[1].get<int64_t>() == want;
    }
    if (!ok) return Status::Error(where + ": '" + key + "' must be [[" + std::to_string(want) + ", " + std::to_string(want) +
                                  "], [" + std::to_string(want) + ", " + std::to_string(want) + "]] (gemlet's subsampling)");
  }
  ASSIGN_OR_RETURN(t.eps, NumberOr(a, "rms_norm_eps", 1e-6, where));
  ASSIGN_OR_RETURN(t.conv_norm_eps, NumberOr(a, "sscp_conv_group_norm_eps", 1e-3, where));
  ASSIGN_OR_RETURN(t.logit_cap, NumberOr(a, "conf_attention_logit_cap", 50.0, where));
  ASSIGN_OR_RETURN(t.residual_weight, NumberOr(a, "conf_residual_weight", 0.5, where));
  if (t.hidden % t.n_heads != 0 || !(t.logit_cap > 0)) {
    return Status::Error(where + ": " + std::to_string(t.hidden) + " over " + std::to_string(t.n_heads) +
                         " heads do not make a Gemma 3n conformer");
  }
  // HF pads the encoder output with the embedding of the text vocabulary's last id, an audio hard token.
  if (t.text_vocab - 1 < t.vocab_offset || t.text_vocab - 1 >= t.vocab_offset + t.vocab_size) {
    return Status::Error(where + ": the text vocabulary's last id " + std::to_string(t.text_vocab - 1) +
                         " is not one of the audio embedder's ids [" + std::to_string(t.vocab_offset) + ", " +
                         std::to_string(t.vocab_offset + t.vocab_size) + ")");
  }
  return t;
}
}  // namespace

// Gemma 4's USM conformer: two 3x3 stride-2 convolutions (LayerNorm over channels, ReLU), the input
// projection, conformer blocks (two half-step FFNs, chunked local attention with relative positions,
// light convolution), output_proj, and the embedder's projection. Names, shapes and transforms as
// llama.cpp's converter writes them (gemma4a).
Status PlanGemma4Audio(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck,
                       GgufWriter& writer, std::vector<PlannedTensor>& plan) {
  const std::string label = hf_dir + "/config.json";
  ASSIGN_OR_RETURN(Gemma4Audio t, ReadGemma4Audio(config, hf_dir, label));
  const std::string tower = "model.audio_tower.";
  const int64_t d = t.hidden, ffn = 4 * d, hd = t.hidden / t.n_heads;
  const auto add = [&](const std::string& hf, std::vector<int64_t> shape, std::string gguf, bool keep_f32) -> Status {
    ASSIGN_OR_RETURN(const StTensor* s, NeedTensor(ck, hf, shape));
    plan.push_back(Planned(*s, std::move(gguf), keep_f32));
    return Status::Ok();
  };
  // Linears with HF's 0-d clip bounds (use_clipped_linears), which become 1-element F32 tensors
  // beside the weight, as llama.cpp names them.
  const auto clipped = [&](const std::string& hf, int64_t n_out, int64_t n_in, const std::string& gguf) -> Status {
    RETURN_IF_ERROR(add(hf + ".linear.weight", {n_out, n_in}, gguf + ".weight", false));
    if (!t.clipped) return Status::Ok();
    for (const char* bound : {"input_min", "input_max", "output_min", "output_max"}) {
      RETURN_IF_ERROR(add(hf + "." + bound, {}, gguf + "." + bound, true));
    }
    return Status::Ok();
  };
  // llama.cpp keeps every convolution and the input projection F32 whatever the outtype.
  const std::string sub = tower + "subsample_conv_projection.";
  RETURN_IF_ERROR(add(sub + "layer0.conv.weight", {t.ch0, 1, 3, 3}, "a.conv1d.0.weight", true));
  RETURN_IF_ERROR(add(sub + "layer0.norm.weight", {t.ch0}, "a.conv1d.0.norm.weight", true));
  RETURN_IF_ERROR(add(sub + "layer1.conv.weight", {t.ch1, t.ch0, 3, 3}, "a.conv1d.1.weight", true));
  RETURN_IF_ERROR(add(sub + "layer1.norm.weight", {t.ch1}, "a.conv1d.1.norm.weight", true));
  RETURN_IF_ERROR(add(sub + "input_proj_linear.weight", {d, t.ch0 / 4 * t.ch1}, "a.input_projection.weight", true));
  for (int64_t l = 0; l < t.n_layers; ++l) {
    const std::string hf = tower + "layers." + std::to_string(l) + ".";
    const std::string gg = "a.blk." + std::to_string(l) + ".";
    const struct {
      const char* hf;
      const char* gg;
    } norms[] = {{"feed_forward1.pre_layer_norm", "ffn_norm"},    {"feed_forward1.post_layer_norm", "ffn_post_norm"},
                 {"feed_forward2.pre_layer_norm", "ffn_norm_1"},  {"feed_forward2.post_layer_norm", "ffn_post_norm_1"},
                 {"norm_pre_attn", "attn_pre_norm"},              {"norm_post_attn", "attn_post_norm"},
                 // llama.cpp's table names the light conv's pre-norm conv_norm and its inner norm
                 // norm_conv (its loader swaps them back).
                 {"lconv1d.pre_layer_norm", "conv_norm"},         {"lconv1d.conv_norm", "norm_conv"},
                 {"norm_out", "ln2"}};
    for (const auto& n : norms) RETURN_IF_ERROR(add(hf + n.hf + ".weight", {d}, gg + n.gg + ".weight", true));
    RETURN_IF_ERROR(clipped(hf + "feed_forward1.ffw_layer_1", ffn, d, gg + "ffn_up"));
    RETURN_IF_ERROR(clipped(hf + "feed_forward1.ffw_layer_2", d, ffn, gg + "ffn_down"));
    RETURN_IF_ERROR(clipped(hf + "feed_forward2.ffw_layer_1", ffn, d, gg + "ffn_up_1"));
    RETURN_IF_ERROR(clipped(hf + "feed_forward2.ffw_layer_2", d, ffn, gg + "ffn_down_1"));
    RETURN_IF_ERROR(clipped(hf + "self_attn.q_proj", d, d, gg + "attn_q"));
    RETURN_IF_ERROR(clipped(hf + "self_attn.k_proj", d, d, gg + "attn_k"));
    RETURN_IF_ERROR(clipped(hf + "self_attn.v_proj", d, d, gg + "attn_v"));
    RETURN_IF_ERROR(clipped(hf + "self_attn.post", d, d, gg + "attn_out"));
    RETURN_IF_ERROR(add(hf + "self_attn.relative_k_proj.weight", {d, d}, gg + "attn_k_rel.weight", false));
    // llama.cpp stores softplus(per_dim_scale), the factor HF multiplies the queries by.
    ASSIGN_OR_RETURN(const StTensor* scale, NeedTensor(ck, hf + "self_attn.per_dim_scale", {hd}));
    PlannedTensor softplus;
    softplus.name = gg + "per_dim_scale.weight";
    softplus.ne = {hd};
    softplus.keep_f32 = true;
    softplus.hf_name = scale->name;
    softplus.generated.resize(static_cast<size_t>(hd));
    scale->ReadRowF32(0, softplus.generated.data());
    for (float& v : softplus.generated) v = Softplus(v);
    plan.push_back(std::move(softplus));
    RETURN_IF_ERROR(clipped(hf + "lconv1d.linear_start", 2 * d, d, gg + "conv_pw1"));
    RETURN_IF_ERROR(clipped(hf + "lconv1d.linear_end", d, d, gg + "conv_pw2"));
    // The depthwise kernel [channels, 1, K] loses its middle axis: GGUF ne [K, channels].
    ASSIGN_OR_RETURN(const StTensor* dw, NeedTensor(ck, hf + "lconv1d.depthwise_conv1d.weight", {d, 1, t.kernel}));
    PlannedTensor conv = Planned(*dw, gg + "conv_dw.weight", true);
    conv.ne = {t.kernel, d};
    plan.push_back(std::move(conv));
  }
  RETURN_IF_ERROR(add(tower + "output_proj.weight", {t.out_dim, d}, "a.pre_encode.out.weight", false));
  RETURN_IF_ERROR(add(tower + "output_proj.bias", {t.out_dim}, "a.pre_encode.out.bias", true));
  RETURN_IF_ERROR(add("model.embed_audio.embedding_projection.weight", {t.text_hidden, t.out_dim},
                      "mm.a.input_projection.weight", false));

  writer.SetString("clip.audio.projector_type", "gemma4a");
  writer.SetBool("clip.has_audio_encoder", true);
  writer.SetU32("clip.audio.projection_dim", static_cast<uint32_t>(t.text_hidden));
  writer.SetU32("clip.audio.embedding_length", static_cast<uint32_t>(d));
  writer.SetU32("clip.audio.feed_forward_length", static_cast<uint32_t>(ffn));
  writer.SetU32("clip.audio.block_count", static_cast<uint32_t>(t.n_layers));
  writer.SetU32("clip.audio.attention.head_count", static_cast<uint32_t>(t.n_heads));
  // llama.cpp writes 128 (input_feat_size, which Gemma4AudioConfig lacks) and 1e-6 (layer_norm_eps,
  // likewise): these are the extractor's feature_size and rms_norm_eps themselves, the same values
  // in the released checkpoints.
  writer.SetU32("clip.audio.num_mel_bins", static_cast<uint32_t>(t.n_mels));
  writer.SetF32("clip.audio.attention.layer_norm_epsilon", static_cast<float>(t.eps));
  // Hard-coded in llama.cpp's gemma4a graph; gemlet's reader takes them from here (llama.cpp's names
  // where it has the key for another projector).
  writer.SetU32("clip.audio.chunk_size", static_cast<uint32_t>(t.chunk));
  writer.SetU32("clip.audio.attention.context_left", static_cast<uint32_t>(t.context_left));
  writer.SetU32("clip.audio.attention.context_right", static_cast<uint32_t>(t.context_right));
  writer.SetF32("clip.audio.attention.logit_softcapping", static_cast<float>(t.logit_cap));
  writer.SetU32("clip.audio.conv_kernel_size", static_cast<uint32_t>(t.kernel));
  writer.SetF32("clip.audio.residual_weight", static_cast<float>(t.residual_weight));
  return Status::Ok();
}

// Gemma 3n's USM conformer: two 3x3 stride-2 convolutions padded only after each frame (cumulative
// group norm, ReLU), the input projection, the conformer blocks, the reduction, and the embedder's
// hard (token) and soft (encoder output) paths. Names and shapes as llama.cpp's converter writes them
// (gemma3na, which llama.cpp does not run): input_proj_linear under a.pre_encode.out, per_dim_scale
// raw and without .weight, the depthwise kernel as [K, 1, channels]. llama.cpp has no name for the
// convolutions' norms (its converter stops there); gemlet writes them as a.conv1d.N.norm, Gemma 4's.
Status PlanGemma3nAudio(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck,
                        GgufWriter& writer, std::vector<PlannedTensor>& plan) {
  const std::string label = hf_dir + "/config.json";
  ASSIGN_OR_RETURN(Gemma3nAudio t, ReadGemma3nAudio(config, label));
  const std::string tower = "model.audio_tower.";
  const int64_t d = t.hidden, ffn = 4 * d, hd = t.hidden / t.n_heads;
  const auto add = [&](const std::string& hf, std::vector<int64_t> shape, std::string gguf, bool keep_f32) -> Status {
    ASSIGN_OR_RETURN(const StTensor* s, NeedTensor(ck, hf, shape));
    plan.push_back(Planned(*s, std::move(gguf), keep_f32));
    return Status::Ok();
  };
  const std::string sub = tower + "subsample_conv_projection.";
  RETURN_IF_ERROR(add(sub + "conv_0.conv.weight", {t.ch0, 1, 3, 3}, "a.conv1d.0.weight", true));
  RETURN_IF_ERROR(add(sub + "conv_0.norm.weight", {t.ch0}, "a.conv1d.0.norm.weight", true));
  RETURN_IF_ERROR(add(sub + "conv_1.conv.weight", {t.ch1, t.ch0, 3, 3}, "a.conv1d.1.weight", true));
  RETURN_IF_ERROR(add(sub + "conv_1.norm.weight", {t.ch1}, "a.conv1d.1.norm.weight", true));
  RETURN_IF_ERROR(add(sub + "input_proj_linear.weight", {d, Halved(Halved(t.n_mels)) * t.ch1}, "a.pre_encode.out.weight", false));
  for (int64_t l = 0; l < t.n_layers; ++l) {
    const std::string hf = tower + "conformer." + std::to_string(l) + ".";
    const std::string gg = "a.blk." + std::to_string(l) + ".";
    const struct {
      const char* hf;
      const char* gg;
    } norms[] = {{"ffw_layer_start.pre_layer_norm", "ffn_norm"},   {"ffw_layer_start.post_layer_norm", "ffn_post_norm"},
                 {"ffw_layer_end.pre_layer_norm", "ffn_norm_1"},   {"ffw_layer_end.post_layer_norm", "ffn_post_norm_1"},
                 {"attention.pre_attn_norm", "ln1"},               {"attention.post_norm", "ln2"},
                 {"lconv1d.pre_layer_norm", "conv_norm"},          {"lconv1d.conv_norm", "norm_conv"},
                 {"norm", "layer_pre_norm"}};
    for (const auto& n : norms) RETURN_IF_ERROR(add(hf + n.hf + ".weight", {d}, gg + n.gg + ".weight", true));
    const struct {
      const char* hf;
      const char* gg;
      int64_t n_out, n_in;
    } linears[] = {{"ffw_layer_start.ffw_layer_1", "ffn_up", ffn, d},  {"ffw_layer_start.ffw_layer_2", "ffn_down", d, ffn},
                   {"ffw_layer_end.ffw_layer_1", "ffn_up_1", ffn, d},  {"ffw_layer_end.ffw_layer_2", "ffn_down_1", d, ffn},
                   {"attention.attn.q_proj", "attn_q", d, d},          {"attention.attn.k_proj", "attn_k", d, d},
                   {"attention.attn.v_proj", "attn_v", d, d},          {"attention.post", "attn_out", d, d},
                   {"attention.attn.relative_position_embedding.pos_proj", "linear_pos", d, d},
                   {"lconv1d.linear_start", "conv_pw1", 2 * d, d},     {"lconv1d.linear_end", "conv_pw2", d, d}};
    for (const auto& lin : linears) {
      RETURN_IF_ERROR(add(hf + lin.hf + ".weight", {lin.n_out, lin.n_in}, gg + lin.gg + ".weight", false));
    }
    RETURN_IF_ERROR(add(hf + "attention.attn.per_dim_scale", {hd}, gg + "per_dim_scale", true));
    RETURN_IF_ERROR(add(hf + "lconv1d.depthwise_conv1d.weight", {d, 1, t.kernel}, gg + "conv_dw.weight", true));
  }
  const std::string embed = "model.embed_audio.";
  RETURN_IF_ERROR(add(embed + "embedding.weight", {t.vocab_size, d}, "mm.a.embedding.weight", false));
  RETURN_IF_ERROR(add(embed + "hard_embedding_norm.weight", {d}, "mm.a.hard_emb_norm.weight", true));
  RETURN_IF_ERROR(add(embed + "soft_embedding_norm.weight", {d}, "mm.a.soft_emb_norm.weight", true));
  RETURN_IF_ERROR(add(embed + "embedding_projection.weight", {t.text_hidden, d}, "mm.a.input_projection.weight", false));

  writer.SetString("clip.audio.projector_type", "gemma3na");
  writer.SetBool("clip.has_audio_encoder", true);
  writer.SetU32("clip.audio.projection_dim", static_cast<uint32_t>(t.text_hidden));
  writer.SetU32("clip.audio.embedding_length", static_cast<uint32_t>(d));
  writer.SetU32("clip.audio.feed_forward_length", static_cast<uint32_t>(ffn));
  writer.SetU32("clip.audio.block_count", static_cast<uint32_t>(t.n_layers));
  writer.SetU32("clip.audio.attention.head_count", static_cast<uint32_t>(t.n_heads));
  writer.SetU32("clip.audio.num_mel_bins", static_cast<uint32_t>(t.n_mels));
  // llama.cpp writes 1e-5 here; this is rms_norm_eps.
  writer.SetF32("clip.audio.attention.layer_norm_epsilon", static_cast<float>(t.eps));
  // gemlet's keys (llama.cpp has no Gemma 3n audio graph), as for gemma4a, and what 3n adds: the
  // convolutions' norm eps, the reduction after the conformer, the fixed soft-token count, and
  // where the audio hard tokens (boa, eoa, the padding token) start in the text vocabulary.
  writer.SetU32("clip.audio.chunk_size", static_cast<uint32_t>(t.chunk));
  writer.SetU32("clip.audio.attention.context_left", static_cast<uint32_t>(t.context_left));
  writer.SetU32("clip.audio.attention.context_right", static_cast<uint32_t>(t.context_right));
  writer.SetF32("clip.audio.attention.logit_softcapping", static_cast<float>(t.logit_cap));
  writer.SetU32("clip.audio.conv_kernel_size", static_cast<uint32_t>(t.kernel));
  writer.SetF32("clip.audio.residual_weight", static_cast<float>(t.residual_weight));
  writer.SetF32("clip.audio.conv_norm_epsilon", static_cast<float>(t.conv_norm_eps));
  writer.SetU32("clip.audio.reduction_factor", static_cast<uint32_t>(t.reduction));
  writer.SetU32("clip.audio.soft_token_count", static_cast<uint32_t>(t.soft_tokens));
  writer.SetU32("clip.audio.vocab_offset", static_cast<uint32_t>(t.vocab_offset));
  writer.SetU32("clip.audio.padding_token_id", static_cast<uint32_t>(t.text_vocab - 1));
  return Status::Ok();
}

}  // namespace gemlet::mmproj
