// Gemma 3n's vision tower for the mmproj: MobileNet-V5 (timm names under model.vision_tower.timm_model)
// and the vision embedder, named, shaped and keyed as llama.cpp's converter writes "gemma3nv"
// (conversion/gemma.py, Gemma3nVisionAudioModel), plus the keys gemlet's reader wants.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "convert/mmproj_parts.h"

namespace gemlet::mmproj {

namespace {

// The double-indexed block tensors llama.cpp maps one to one (blocks.{stage}.{index}.<suffix> ->
// v.blk.{stage}.{index}.<suffix>); any other tower tensor is refused rather than dropped.
constexpr const char* kBlockSuffixes[] = {
    "conv_exp.weight",           "bn1.weight",                   "conv_pwl.weight",         "bn2.weight",
    "dw_start.conv.weight",      "dw_start.bn.weight",           "dw_mid.conv.weight",      "dw_mid.bn.weight",
    "pw_exp.conv.weight",        "pw_exp.bn.weight",             "pw_proj.conv.weight",     "pw_proj.bn.weight",
    "layer_scale.gamma",         "attn.query.proj.weight",       "attn.key.proj.weight",    "attn.value.proj.weight",
    "attn.output.proj.weight",   "attn.key.down_conv.weight",    "attn.key.norm.weight",    "attn.value.down_conv.weight",
    "attn.value.norm.weight",    "norm.weight"};

constexpr const char* kTopLevel[][2] = {
    {"conv_stem.conv.weight", "v.conv_stem.conv.weight"},
    {"conv_stem.conv.bias", "v.conv_stem.conv.bias"},
    {"conv_stem.bn.weight", "v.conv_stem.bn.weight"},
    {"msfa.ffn.pw_exp.conv.weight", "v.msfa.ffn.pw_exp.conv.weight"},
    {"msfa.ffn.pw_exp.bn.weight", "v.msfa.ffn.pw_exp.bn.weight"},
    {"msfa.ffn.pw_proj.conv.weight", "v.msfa.ffn.pw_proj.conv.weight"},
    {"msfa.ffn.pw_proj.bn.weight", "v.msfa.ffn.pw_proj.bn.weight"},
    {"msfa.norm.weight", "v.msfa.norm.weight"}};

// "blocks.S.I.<suffix>" -> "v.blk.S.I.<suffix>", or "" when it is not a block tensor llama.cpp maps.
std::string BlockName(const std::string& local) {
  if (local.rfind("blocks.", 0) != 0) return "";
  const size_t a = local.find('.', 7);
  if (a == std::string::npos) return "";
  const size_t b = local.find('.', a + 1);
  if (b == std::string::npos) return "";
  const std::string stage = local.substr(7, a - 7), index = local.substr(a + 1, b - a - 1), suffix = local.substr(b + 1);
  const auto digits = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
  if (!digits(stage) || !digits(index)) return "";
  for (const char* known : kBlockSuffixes) {
    if (suffix == known) return "v.blk." + stage + "." + index + "." + suffix;
  }
  return "";
}

// The image processor's square side and soft-token count: HF's processor config (size.height,
// image_seq_length), config.json's vision_soft_tokens_per_image winning where present.
Status ReadImageGeometry(const Json& config, const std::string& hf_dir, int64_t* image_size, int64_t* tokens) {
  *image_size = 768;
  *tokens = 256;
  for (const char* name : {"preprocessor_config.json", "image_processor_config.json", "processor_config.json"}) {
    const std::filesystem::path path = std::filesystem::path(hf_dir) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    ASSIGN_OR_RETURN(Json j, ReadJsonFile(path));
    const Json* p = j.contains("image_processor") && j["image_processor"].is_object() ? &j["image_processor"] : &j;
    if (auto size = p->find("size"); size != p->end() && size->is_object() && size->contains("height")) {
      ASSIGN_OR_RETURN(*image_size, PositiveInt(*size, "height", path.string() + " size"));
    }
    if (j.contains("image_seq_length")) {
      ASSIGN_OR_RETURN(*tokens, PositiveInt(j, "image_seq_length", path.string()));
    }
  }
  if (config.contains("vision_soft_tokens_per_image")) {
    ASSIGN_OR_RETURN(*tokens, PositiveInt(config, "vision_soft_tokens_per_image", hf_dir + "/config.json"));
  }
  const int64_t side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(*tokens))));
  if (side * side != *tokens || *image_size % *tokens != 0) {
    return Status::Error(hf_dir + ": " + std::to_string(*tokens) + " soft tokens per image are not a square grid that " +
                         std::to_string(*image_size) + " divides (llama.cpp's patch_size = image_size / tokens)");
  }
  return Status::Ok();
}

// A [c] vector stored [1, c, 1, 1] (GGUF [1, 1, c]) as llama.cpp's converter reshapes the stem bias
// and the layer scales, so they broadcast over its [w, h, c] maps.
PlannedTensor ChannelVector(const StTensor& s, std::string name) {
  PlannedTensor p;
  p.name = std::move(name);
  p.ne = {1, 1, s.shape[0]};
  p.keep_f32 = true;
  p.hf_name = s.name;
  p.generated.resize(static_cast<size_t>(s.shape[0]));
  s.ReadRowF32(0, p.generated.data());
  return p;
}

}  // namespace

Status PlanGemma3nVision(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck,
                         GgufWriter& writer, std::vector<PlannedTensor>& plan) {
  const std::string label = hf_dir + "/config.json";
  ASSIGN_OR_RETURN(const Json* vision, SubConfig(config, "vision_config", label));
  ASSIGN_OR_RETURN(const Json* text, SubConfig(config, "text_config", label));
  const std::string where = label + " vision_config";
  const auto int_or = [&](const char* key, int64_t fallback) -> Result<int64_t> {
    if (!vision->contains(key) || (*vision)[key].is_null()) return fallback;
    return PositiveInt(*vision, key, where);
  };
  // Gemma3nVisionConfig's defaults; timm's MobileNetV5Encoder always gives 2048 features.
  ASSIGN_OR_RETURN(const int64_t d, int_or("hidden_size", 2048));
  ASSIGN_OR_RETURN(const int64_t offset, int_or("vocab_offset", 262144));
  ASSIGN_OR_RETURN(const int64_t vocab, int_or("vocab_size", 128));
  ASSIGN_OR_RETURN(const int64_t text_hidden, PositiveInt(*text, "hidden_size", label + " text_config"));
  ASSIGN_OR_RETURN(const double eps, NumberOr(*vision, "rms_norm_eps", 1e-6, where));
  int64_t image_size = 0, tokens = 0;
  RETURN_IF_ERROR(ReadImageGeometry(config, hf_dir, &image_size, &tokens));

  const std::string tower = "model.vision_tower.timm_model.";
  size_t n_tower = 0;
  for (const StTensor* s : ck.tensors()) {
    if (s->name.rfind("model.vision_tower.", 0) != 0) continue;
    if (s->name.rfind(tower, 0) != 0) return Status::Error("'" + s->name + "' is not a timm MobileNet-V5 tensor");
    const std::string local = s->name.substr(tower.size());
    std::string gguf = BlockName(local);
    for (const auto& [hf, gg] : kTopLevel) {
      if (local == hf) gguf = gg;
    }
    if (gguf.empty()) return Status::Error("'" + s->name + "' is not a MobileNet-V5 tensor llama.cpp's gemma3nv names");
    ++n_tower;
    if (local == "conv_stem.conv.bias" || local.ends_with("layer_scale.gamma")) {
      if (s->shape.size() != 1) return Status::Error("'" + s->name + "' has shape " + s->ShapeString() + ", not [channels]");
      plan.push_back(ChannelVector(*s, gguf));
      continue;
    }
    // Convolution kernels keep PyTorch's [out, in, kh, kw] (GGUF [kw, kh, in, out]); llama.cpp keeps
    // the stem F32.
    plan.push_back(Planned(*s, std::move(gguf), local.rfind("conv_stem.", 0) == 0));
  }
  if (n_tower == 0) return Status::Error("no MobileNet-V5 tensors (" + tower + "*) in the checkpoint");
  const auto add = [&](const std::string& hf, std::vector<int64_t> shape, std::string gguf, bool keep_f32) -> Status {
    ASSIGN_OR_RETURN(const StTensor* s, NeedTensor(ck, hf, shape));
    plan.push_back(Planned(*s, std::move(gguf), keep_f32));
    return Status::Ok();
  };
  const std::string embed = "model.embed_vision.";
  RETURN_IF_ERROR(add(embed + "embedding.weight", {vocab, d}, "mm.embedding.weight", false));
  RETURN_IF_ERROR(add(embed + "hard_embedding_norm.weight", {d}, "mm.hard_emb_norm.weight", true));
  // Gemma3nRMSNorm is x * w: stored as is (no 1 + w, unlike Gemma 3's projector norm).
  RETURN_IF_ERROR(add(embed + "soft_embedding_norm.weight", {d}, "mm.soft_emb_norm.weight", true));
  // An nn.Linear [text hidden, vision hidden]; llama.cpp forces F16, the outtype is kept here.
  RETURN_IF_ERROR(add(embed + "embedding_projection.weight", {text_hidden, d}, "mm.input_projection.weight", false));

  writer.SetString("clip.vision.projector_type", "gemma3nv");
  writer.SetBool("clip.has_vision_encoder", true);
  writer.SetU32("clip.vision.projection_dim", static_cast<uint32_t>(text_hidden));
  writer.SetU32("clip.vision.image_size", static_cast<uint32_t>(image_size));
  // llama.cpp's fake patch size: image_size / patch_size is its token count (768 / 3 = 256); gemlet's
  // reader takes the fusion adapter's output grid from it too (sqrt(256) = 16 a side), which
  // llama.cpp's graph hard-codes.
  writer.SetU32("clip.vision.patch_size", static_cast<uint32_t>(image_size / tokens));
  writer.SetU32("clip.vision.embedding_length", static_cast<uint32_t>(d));
  // Fake too, as llama.cpp writes them: the tower's shape is in its tensors.
  writer.SetU32("clip.vision.feed_forward_length", static_cast<uint32_t>(4 * d));
  writer.SetU32("clip.vision.block_count", 128);
  writer.SetU32("clip.vision.attention.head_count", 8);
  writer.SetF32("clip.vision.attention.layer_norm_epsilon", static_cast<float>(eps));
  // MobileNet-V5 takes v / 255 (the processor does not normalise).
  writer.SetF32Array("clip.vision.image_mean", {0.0f, 0.0f, 0.0f});
  writer.SetF32Array("clip.vision.image_std", {1.0f, 1.0f, 1.0f});
  // gemlet's: where the vision hard tokens start (end-of-image is the first).
  writer.SetU32("clip.vision.vocab_offset", static_cast<uint32_t>(offset));
  return Status::Ok();
}

}  // namespace gemlet::mmproj
