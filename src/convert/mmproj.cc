// WriteMmproj: a multimodal checkpoint's towers and projectors -> llama.cpp's mmproj GGUF; here the
// vision towers, in mmproj_audio.cc the audio ones.
#include "convert/mmproj.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include "convert/mmproj_parts.h"
#include "gguf/gguf_writer.h"

namespace gemlet {

namespace {

using mmproj::BoolOr;
using mmproj::Json;
using mmproj::NeedTensor;
using mmproj::NumberOr;
using mmproj::Planned;
using mmproj::PositiveInt;
using mmproj::ReadJsonFile;

// The image processor's settings: preprocessor_config.json as the hub has it, or what a processor's
// save_pretrained writes (image_processor_config.json). Mean and std default to SigLIP's 0.5.
struct ProcessorStats {
  std::vector<float> mean{0.5f, 0.5f, 0.5f};
  std::vector<float> std{0.5f, 0.5f, 0.5f};
  int64_t max_soft_tokens = 0;  // Gemma 4's patch budget; 0: not given
};

Result<ProcessorStats> ReadProcessorStats(const std::string& dir) {
  ProcessorStats stats;
  for (const char* name : {"preprocessor_config.json", "image_processor_config.json"}) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    ASSIGN_OR_RETURN(Json j, ReadJsonFile(path));
    for (auto [key, out] : {std::pair{"image_mean", &stats.mean}, std::pair{"image_std", &stats.std}}) {
      auto it = j.find(key);
      if (it == j.end()) continue;
      if (!it->is_array() || it->size() != 3) return Status::Error(path.string() + ": '" + key + "' must hold 3 numbers");
      for (size_t c = 0; c < 3; ++c) {
        if (!(*it)[c].is_number()) return Status::Error(path.string() + ": '" + key + "' must hold 3 numbers");
        (*out)[c] = (*it)[c].get<float>();
      }
    }
    if (j.contains("max_soft_tokens")) {
      ASSIGN_OR_RETURN(stats.max_soft_tokens, PositiveInt(j, "max_soft_tokens", path.string()));
    }
    break;
  }
  return stats;
}

struct Gemma3Tower {
  int64_t image_size, patch_size, hidden, ffn, n_layers, n_heads, text_hidden, tokens_per_image;
  double eps;
};

Result<Gemma3Tower> ReadGemma3Tower(const Json& config, const std::string& label) {
  auto vit = config.find("vision_config");
  if (vit == config.end() || !vit->is_object()) return Status::Error(label + ": no vision_config");
  auto text = config.find("text_config");
  if (text == config.end() || !text->is_object()) return Status::Error(label + ": no text_config");
  const std::string where = label + " vision_config";
  Gemma3Tower t{};
  ASSIGN_OR_RETURN(t.image_size, PositiveInt(*vit, "image_size", where));
  ASSIGN_OR_RETURN(t.patch_size, PositiveInt(*vit, "patch_size", where));
  ASSIGN_OR_RETURN(t.hidden, PositiveInt(*vit, "hidden_size", where));
  ASSIGN_OR_RETURN(t.ffn, PositiveInt(*vit, "intermediate_size", where));
  ASSIGN_OR_RETURN(t.n_layers, PositiveInt(*vit, "num_hidden_layers", where));
  ASSIGN_OR_RETURN(t.n_heads, PositiveInt(*vit, "num_attention_heads", where));
  ASSIGN_OR_RETURN(t.text_hidden, PositiveInt(*text, "hidden_size", label + " text_config"));
  t.tokens_per_image = 256;  // Gemma3Config's default
  if (config.contains("mm_tokens_per_image")) {
    ASSIGN_OR_RETURN(t.tokens_per_image, PositiveInt(config, "mm_tokens_per_image", label));
  }
  t.eps = vit->value("layer_norm_eps", 1e-6);
  if (t.image_size % t.patch_size != 0 || t.hidden % t.n_heads != 0) {
    return Status::Error(where + ": image_size must be a multiple of patch_size and hidden_size of num_attention_heads");
  }
  const int64_t side = t.image_size / t.patch_size;
  const int64_t pooled = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(t.tokens_per_image))));
  if (pooled * pooled != t.tokens_per_image || pooled == 0 || side % pooled != 0) {
    return Status::Error(label + ": mm_tokens_per_image " + std::to_string(t.tokens_per_image) +
                         " is not a square that divides the " + std::to_string(side) + "x" + std::to_string(side) +
                         " patch grid");
  }
  return t;
}

// Gemma 3: SigLIP (biased LayerNorms, GELU-tanh MLP) + average pooling + (1 + w) RMSNorm + projection.
// Hub checkpoints name the tower "vision_tower.vision_model.*", transformers 5 "vision_tower.*".
Status PlanGemma3(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck, DType outtype,
                  GgufWriter& writer, std::vector<PlannedTensor>& plan) {
  const std::string label = hf_dir + "/config.json";
  ASSIGN_OR_RETURN(Gemma3Tower t, ReadGemma3Tower(config, label));
  ASSIGN_OR_RETURN(ProcessorStats stats, ReadProcessorStats(hf_dir));
  const std::string tower = ck.Find("vision_tower.vision_model.embeddings.patch_embedding.weight") != nullptr
                                ? "vision_tower.vision_model."
                                : "vision_tower.";
  const int64_t d = t.hidden, p = t.patch_size, side = t.image_size / t.patch_size;
  const bool patch_f32 = outtype != DType::kF16;  // llama.cpp: F16 with --outtype f16, else F32
  const auto add = [&](const std::string& hf, std::vector<int64_t> shape, std::string gguf, bool keep_f32,
                       bool add_one = false) -> Status {
    ASSIGN_OR_RETURN(const StTensor* s, NeedTensor(ck, hf, shape));
    plan.push_back(Planned(*s, std::move(gguf), keep_f32, add_one));
    return Status::Ok();
  };
  RETURN_IF_ERROR(add(tower + "embeddings.patch_embedding.weight", {d, 3, p, p}, "v.patch_embd.weight", patch_f32));
  RETURN_IF_ERROR(add(tower + "embeddings.patch_embedding.bias", {d}, "v.patch_embd.bias", true));
  RETURN_IF_ERROR(add(tower + "embeddings.position_embedding.weight", {side * side, d}, "v.position_embd.weight", true));
  for (int64_t l = 0; l < t.n_layers; ++l) {
    const std::string hf = tower + "encoder.layers." + std::to_string(l) + ".";
    const std::string gg = "v.blk." + std::to_string(l) + ".";
    for (auto [hf_norm, gg_norm] : {std::pair{"layer_norm1", "ln1"}, std::pair{"layer_norm2", "ln2"}}) {
      RETURN_IF_ERROR(add(hf + hf_norm + ".weight", {d}, gg + gg_norm + ".weight", true));
      RETURN_IF_ERROR(add(hf + hf_norm + ".bias", {d}, gg + gg_norm + ".bias", true));
    }
    for (auto [hf_proj, gg_proj] : {std::pair{"q_proj", "attn_q"}, std::pair{"k_proj", "attn_k"},
                                    std::pair{"v_proj", "attn_v"}, std::pair{"out_proj", "attn_out"}}) {
      RETURN_IF_ERROR(add(hf + "self_attn." + hf_proj + ".weight", {d, d}, gg + gg_proj + ".weight", false));
      RETURN_IF_ERROR(add(hf + "self_attn." + hf_proj + ".bias", {d}, gg + gg_proj + ".bias", true));
    }
    RETURN_IF_ERROR(add(hf + "mlp.fc1.weight", {t.ffn, d}, gg + "ffn_up.weight", false));
    RETURN_IF_ERROR(add(hf + "mlp.fc1.bias", {t.ffn}, gg + "ffn_up.bias", true));
    RETURN_IF_ERROR(add(hf + "mlp.fc2.weight", {d, t.ffn}, gg + "ffn_down.weight", false));
    RETURN_IF_ERROR(add(hf + "mlp.fc2.bias", {d}, gg + "ffn_down.bias", true));
  }
  RETURN_IF_ERROR(add(tower + "post_layernorm.weight", {d}, "v.post_ln.weight", true));
  RETURN_IF_ERROR(add(tower + "post_layernorm.bias", {d}, "v.post_ln.bias", true));
  // ref: Gemma3RMSNorm is x * (1 + w); llama.cpp stores 1 + w and multiplies.
  RETURN_IF_ERROR(add("multi_modal_projector.mm_soft_emb_norm.weight", {d}, "mm.soft_emb_norm.weight", true, true));
  // Used as x @ W ([vision hidden, text hidden]) and stored so: GGUF rows of text-hidden values, one
  // per vision feature (llama.cpp transposes it when it multiplies). llama.cpp forces F16 here; the
  // outtype is kept, so an f32 conversion stays exact.
  RETURN_IF_ERROR(add("multi_modal_projector.mm_input_projection_weight", {d, t.text_hidden},
                      "mm.input_projection.weight", false));

  writer.SetString("clip.projector_type", "gemma3");
  writer.SetBool("clip.has_vision_encoder", true);
  writer.SetU32("clip.vision.projection_dim", static_cast<uint32_t>(t.text_hidden));
  writer.SetU32("clip.vision.image_size", static_cast<uint32_t>(t.image_size));
  writer.SetU32("clip.vision.patch_size", static_cast<uint32_t>(t.patch_size));
  writer.SetU32("clip.vision.embedding_length", static_cast<uint32_t>(t.hidden));
  writer.SetU32("clip.vision.feed_forward_length", static_cast<uint32_t>(t.ffn));
  writer.SetU32("clip.vision.block_count", static_cast<uint32_t>(t.n_layers));
  writer.SetU32("clip.vision.attention.head_count", static_cast<uint32_t>(t.n_heads));
  writer.SetF32("clip.vision.attention.layer_norm_epsilon", static_cast<float>(t.eps));
  writer.SetF32Array("clip.vision.image_mean", stats.mean);
  writer.SetF32Array("clip.vision.image_std", stats.std);
  writer.SetBool("clip.use_gelu", true);
  // The patch grid is average-pooled by this factor per side; llama.cpp assumes 4 (896 / 14 / 16)
  // without the key, so it is written whenever it differs.
  const int64_t pool = side / static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(t.tokens_per_image))));
  if (pool != 4) writer.SetU32("clip.vision.projector.scale_factor", static_cast<uint32_t>(pool));
  return Status::Ok();
}

// Gemma4VisionConfig's fields, HF's defaults where a key is absent.
struct Gemma4Tower {
  int64_t patch_size, hidden, ffn, n_layers, n_heads, n_kv_heads, head_dim, pool, position_size, text_hidden;
  double eps, rope_theta;
  bool standardize, clipped;
  bool two_way_text;  // text_config.use_bidirectional_attention == "vision"
};

Result<Gemma4Tower> ReadGemma4Tower(const Json& config, const std::string& label) {
  auto vit = config.find("vision_config");
  if (vit == config.end() || !vit->is_object()) return Status::Error(label + ": no vision_config");
  auto text = config.find("text_config");
  if (text == config.end() || !text->is_object()) return Status::Error(label + ": no text_config");
  const std::string where = label + " vision_config";
  Gemma4Tower t{};
  ASSIGN_OR_RETURN(t.patch_size, PositiveInt(*vit, "patch_size", where));
  ASSIGN_OR_RETURN(t.hidden, PositiveInt(*vit, "hidden_size", where));
  ASSIGN_OR_RETURN(t.ffn, PositiveInt(*vit, "intermediate_size", where));
  ASSIGN_OR_RETURN(t.n_layers, PositiveInt(*vit, "num_hidden_layers", where));
  ASSIGN_OR_RETURN(t.n_heads, PositiveInt(*vit, "num_attention_heads", where));
  ASSIGN_OR_RETURN(t.text_hidden, PositiveInt(*text, "hidden_size", label + " text_config"));
  const auto int_or = [&](const char* key, int64_t fallback) -> Result<int64_t> {
    if (!vit->contains(key) || (*vit)[key].is_null()) return fallback;
    return PositiveInt(*vit, key, where);
  };
  ASSIGN_OR_RETURN(t.n_kv_heads, int_or("num_key_value_heads", t.n_heads));
  ASSIGN_OR_RETURN(t.head_dim, int_or("head_dim", t.hidden / t.n_heads));
  ASSIGN_OR_RETURN(t.pool, int_or("pooling_kernel_size", 3));
  ASSIGN_OR_RETURN(t.position_size, int_or("position_embedding_size", 10240));
  ASSIGN_OR_RETURN(t.eps, NumberOr(*vit, "rms_norm_eps", 1e-6, where));
  t.rope_theta = 100.0;
  if (auto rope = vit->find("rope_parameters"); rope != vit->end() && rope->is_object()) {
    ASSIGN_OR_RETURN(t.rope_theta, NumberOr(*rope, "rope_theta", 100.0, where + " rope_parameters"));
  }
  ASSIGN_OR_RETURN(t.standardize, BoolOr(*vit, "standardize", false, where));
  if (auto two_way = text->find("use_bidirectional_attention"); two_way != text->end() && two_way->is_string()) {
    t.two_way_text = two_way->get<std::string>() == "vision";
  }
  ASSIGN_OR_RETURN(t.clipped, BoolOr(*vit, "use_clipped_linears", false, where));
  if (std::string act = vit->value("hidden_activation", std::string("gelu_pytorch_tanh")); act != "gelu_pytorch_tanh") {
    return Status::Error(where + ": hidden_activation '" + act + "' (gemlet's tower runs gelu_pytorch_tanh)");
  }
  // Each head is two halves rotated by x and y, each "rotate half" (HF apply_multidimensional_rope).
  if (t.n_heads % t.n_kv_heads != 0 || t.head_dim % 4 != 0) {
    return Status::Error(where + ": " + std::to_string(t.n_heads) + " heads over " + std::to_string(t.n_kv_heads) +
                         " KV heads of " + std::to_string(t.head_dim) + " values do not make a Gemma 4 tower");
  }
  return t;
}

// Gemma 4: a ViT over patches with learned x/y position tables, 2D RoPE, RMSNorm sandwiches, gated
// GELU MLP and (on-device models) clipped linears; its own position pooling; the embedder. Names,
// shapes and transforms as llama.cpp's converter writes them (gemma4v).
Status PlanGemma4(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck, DType outtype,
                  GgufWriter& writer, std::vector<PlannedTensor>& plan) {
  const std::string label = hf_dir + "/config.json";
  ASSIGN_OR_RETURN(Gemma4Tower t, ReadGemma4Tower(config, label));
  ASSIGN_OR_RETURN(ProcessorStats stats, ReadProcessorStats(hf_dir));
  const std::string tower = "model.vision_tower.";
  const int64_t d = t.hidden, p = t.patch_size, hd = t.head_dim;
  const int64_t q_width = t.n_heads * hd, kv_width = t.n_kv_heads * hd;
  const auto add = [&](const std::string& hf, std::vector<int64_t> shape, std::string gguf, bool keep_f32) -> Status {
    ASSIGN_OR_RETURN(const StTensor* s, NeedTensor(ck, hf, shape));
    plan.push_back(Planned(*s, std::move(gguf), keep_f32));
    return Status::Ok();
  };
  // HF's Linear over patches flattened (row, column, channel) becomes the conv kernel [D, 3, p, p]
  // llama.cpp convolves the image with; F16 with an f16 outtype, else F32, as llama.cpp does.
  ASSIGN_OR_RETURN(const StTensor* patch, NeedTensor(ck, tower + "patch_embedder.input_proj.weight", {d, 3 * p * p}));
  PlannedTensor conv;
  conv.name = "v.patch_embd.weight";
  conv.ne = {p, p, 3, d};
  conv.keep_f32 = outtype != DType::kF16;
  conv.hf_name = patch->name;
  conv.generated.resize(static_cast<size_t>(d * 3 * p * p));
  std::vector<float> row(static_cast<size_t>(3 * p * p));
  for (int64_t o = 0; o < d; ++o) {
    patch->ReadRowF32(o, row.data());
    for (int64_t y = 0; y < p; ++y) {
      for (int64_t x = 0; x < p; ++x) {
        for (int64_t c = 0; c < 3; ++c) {
          conv.generated[static_cast<size_t>(((o * 3 + c) * p + y) * p + x)] = row[static_cast<size_t>((y * p + x) * 3 + c)];
        }
      }
    }
  }
  plan.push_back(std::move(conv));
  RETURN_IF_ERROR(add(tower + "patch_embedder.position_embedding_table", {2, t.position_size, d},
                      "v.position_embd.weight", true));
  for (int64_t l = 0; l < t.n_layers; ++l) {
    const std::string hf = tower + "encoder.layers." + std::to_string(l) + ".";
    const std::string gg = "v.blk." + std::to_string(l) + ".";
    for (auto [hf_norm, gg_norm] : {std::pair{"input_layernorm", "ln1"}, std::pair{"post_attention_layernorm", "attn_post_norm"},
                                    std::pair{"pre_feedforward_layernorm", "ln2"},
                                    std::pair{"post_feedforward_layernorm", "ffn_post_norm"}}) {
      RETURN_IF_ERROR(add(hf + hf_norm + ".weight", {d}, gg + gg_norm + ".weight", true));
    }
    RETURN_IF_ERROR(add(hf + "self_attn.q_norm.weight", {hd}, gg + "attn_q_norm.weight", true));
    RETURN_IF_ERROR(add(hf + "self_attn.k_norm.weight", {hd}, gg + "attn_k_norm.weight", true));
    const struct {
      const char* hf;
      const char* gg;
      int64_t n_out, n_in;
    } linears[] = {{"self_attn.q_proj", "attn_q", q_width, d},  {"self_attn.k_proj", "attn_k", kv_width, d},
                   {"self_attn.v_proj", "attn_v", kv_width, d}, {"self_attn.o_proj", "attn_out", d, q_width},
                   {"mlp.gate_proj", "ffn_gate", t.ffn, d},     {"mlp.up_proj", "ffn_up", t.ffn, d},
                   {"mlp.down_proj", "ffn_down", d, t.ffn}};
    for (const auto& lin : linears) {
      RETURN_IF_ERROR(add(hf + lin.hf + ".linear.weight", {lin.n_out, lin.n_in}, gg + lin.gg + ".weight", false));
      if (!t.clipped) continue;
      // HF's 0-d clip bounds become 1-element F32 tensors beside the weight (llama.cpp's names).
      for (const char* bound : {"input_min", "input_max", "output_min", "output_max"}) {
        RETURN_IF_ERROR(add(hf + lin.hf + "." + bound, {}, gg + lin.gg + "." + bound, true));
      }
    }
  }
  if (t.standardize) {
    RETURN_IF_ERROR(add(tower + "std_bias", {d}, "v.std_bias", true));
    RETURN_IF_ERROR(add(tower + "std_scale", {d}, "v.std_scale", true));
  }
  // An nn.Linear [text hidden, vision hidden] (not Gemma 3's x @ W layout under the same name).
  RETURN_IF_ERROR(add("model.embed_vision.embedding_projection.weight", {t.text_hidden, d}, "mm.input_projection.weight",
                      false));

  writer.SetString("clip.vision.projector_type", "gemma4v");
  writer.SetBool("clip.has_vision_encoder", true);
  writer.SetU32("clip.vision.projection_dim", static_cast<uint32_t>(t.text_hidden));
  writer.SetU32("clip.vision.image_size", 224);  // llama.cpp writes this dummy: the image size varies
  writer.SetU32("clip.vision.patch_size", static_cast<uint32_t>(p));
  writer.SetU32("clip.vision.embedding_length", static_cast<uint32_t>(d));
  writer.SetU32("clip.vision.feed_forward_length", static_cast<uint32_t>(t.ffn));
  writer.SetU32("clip.vision.block_count", static_cast<uint32_t>(t.n_layers));
  writer.SetU32("clip.vision.attention.head_count", static_cast<uint32_t>(t.n_heads));
  // llama.cpp reads the eps from layer_norm_eps, which Gemma 4 lacks, and always writes 1e-6: this is
  // rms_norm_eps itself (the same value in every released checkpoint).
  writer.SetF32("clip.vision.attention.layer_norm_epsilon", static_cast<float>(t.eps));
  writer.SetF32Array("clip.vision.image_mean", stats.mean);
  writer.SetF32Array("clip.vision.image_std", stats.std);
  // Not written by llama.cpp's converter, which leaves its loader to hard-code or infer them; gemlet's
  // reader takes them from here (llama.cpp's loader reads the first three too):
  // the pooling kernel (llama.cpp assumes 3; gemma4_bidir_image-like towers use 2),
  writer.SetU32("clip.vision.projector.scale_factor", static_cast<uint32_t>(t.pool));
  // head size and KV heads (llama.cpp: hidden / heads and no GQA),
  writer.SetU32("clip.vision.attention.head_dim", static_cast<uint32_t>(hd));
  writer.SetU32("clip.vision.attention.head_count_kv", static_cast<uint32_t>(t.n_kv_heads));
  // tanh-GELU, HF's hidden_activation (without the key llama.cpp would run its quick GELU),
  writer.SetBool("clip.use_gelu", true);
  // the RoPE base (llama.cpp hard-codes 100) and the processor's patch budget (HF resizes every
  // image to it; llama.cpp has its own token range).
  writer.SetF32("clip.vision.rope.freq_base", static_cast<float>(t.rope_theta));
  if (stats.max_soft_tokens > 0) writer.SetU32("clip.vision.max_soft_tokens", static_cast<uint32_t>(stats.max_soft_tokens));
  // Whether the text model attends both ways over an image's soft tokens (HF text_config's
  // use_bidirectional_attention = "vision"): llama.cpp guesses it from the text width (all but E2B
  // and E4B), which the tiny checkpoints defeat.
  writer.SetBool("clip.vision.text_bidirectional", t.two_way_text);
  return Status::Ok();
}

}  // namespace

bool HasVisionTower(const std::string& hf_dir) {
  auto config = ReadJsonFile(std::filesystem::path(hf_dir) / "config.json");
  return config.ok() && config.value().contains("vision_config") && config.value()["vision_config"].is_object();
}

Result<MmprojResult> WriteMmproj(const MmprojOptions& o, const SafetensorsCheckpoint& checkpoint) {
  ASSIGN_OR_RETURN(Json config, ReadJsonFile(std::filesystem::path(o.hf_dir) / "config.json"));
  std::string architecture;
  if (auto it = config.find("architectures"); it != config.end() && it->is_array() && !it->empty() &&
                                              (*it)[0].is_string()) {
    architecture = (*it)[0].get<std::string>();
  }
  if (o.outtype != DType::kF32 && o.outtype != DType::kF16 && o.outtype != DType::kBF16 && o.outtype != DType::kQ8_0) {
    return Status::Error(std::string("unsupported mmproj type ") + DTypeName(o.outtype) + " (choose f32, f16, bf16 or q8_0)");
  }
  GgufWriter writer;
  writer.SetString("general.architecture", "clip");
  writer.SetString("general.type", "mmproj");
  writer.SetString("general.name", o.model_name);
  // llama.cpp's file types: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
  writer.SetU32("general.file_type", o.outtype == DType::kF16    ? 1
                                     : o.outtype == DType::kQ8_0 ? 7
                                     : o.outtype == DType::kBF16 ? 32
                                                                 : 0);
  writer.SetU32("general.quantization_version", 2);
  std::vector<PlannedTensor> plan;
  MmprojResult result;
  if (architecture == "Gemma3ForConditionalGeneration") {
    RETURN_IF_ERROR(PlanGemma3(config, o.hf_dir, checkpoint, o.outtype, writer, plan));
    result.projector = "gemma3";
  } else if (architecture == "Gemma4ForConditionalGeneration") {
    RETURN_IF_ERROR(PlanGemma4(config, o.hf_dir, checkpoint, o.outtype, writer, plan));
    result.projector = "gemma4v";
    // The audio tower goes into the same file, as llama.cpp's converter writes it (the large
    // models have none: audio_config null).
    if (auto audio = config.find("audio_config"); audio != config.end() && audio->is_object()) {
      RETURN_IF_ERROR(mmproj::PlanGemma4Audio(config, o.hf_dir, checkpoint, writer, plan));
      result.projector += ", gemma4a";
    }
  } else if (architecture == "Gemma3nForConditionalGeneration") {
    // Vision and audio in one file, as llama.cpp's converter writes them. A checkpoint whose vision
    // tower is not a MobileNet-V5 (the hf-mm audio model carries a small timm stand-in) gets the
    // audio tower alone.
    if (checkpoint.Find("model.vision_tower.timm_model.msfa.norm.weight") != nullptr) {
      RETURN_IF_ERROR(mmproj::PlanGemma3nVision(config, o.hf_dir, checkpoint, writer, plan));
      result.projector = "gemma3nv, ";
    }
    RETURN_IF_ERROR(mmproj::PlanGemma3nAudio(config, o.hf_dir, checkpoint, writer, plan));
    result.projector += "gemma3na";
  } else {
    return Status::Error("no mmproj writer for '" + (architecture.empty() ? std::string("?") : architecture) +
                         "' yet (Gemma3ForConditionalGeneration, Gemma3nForConditionalGeneration and "
                         "Gemma4ForConditionalGeneration have one)");
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor* p = &plan[i];
    DType type = p->keep_f32 ? DType::kF32 : o.outtype;
    // Q8_0 blocks are 32 values of a row: other matrices stay F16, as llama.cpp's converter keeps them.
    if (type == DType::kQ8_0 && (p->ne.size() < 2 || p->ne[0] % 32 != 0)) type = DType::kF16;
    RETURN_IF_ERROR(writer.AddTensor(p->name, type, p->ne, [p, type](ByteSink& sink) {
      return ProducePlannedTensor(*p, type, sink).WithContext(p->hf_name);
    }));
  }
  RETURN_IF_ERROR(writer.Write(o.output_path));
  result.n_tensors = plan.size();
  return result;
}

}  // namespace gemlet
