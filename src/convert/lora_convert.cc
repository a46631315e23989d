// `gemlet convert-lora`: PEFT LoRA folders to llama.cpp's GGUF adapter format.
//
// PEFT stores, per adapted nn.Linear `<module>`, `base_model.model.<module>.lora_A.weight` [r, in]
// and `.lora_B.weight` [out, r] (torch order); its forward adds scaling * B (A x) with scaling =
// lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora. llama.cpp's file holds
// `<gguf tensor>.lora_a` (ne [in, r]) and `.lora_b` (ne [r, out]), the same bytes, and one
// adapter.lora.alpha from which it takes alpha / r per pair. rsLoRA is written as alpha * sqrt(r)
// (the same scale under llama.cpp's rule) when every pair has one rank; what one alpha cannot say
// (alpha_pattern, rsLoRA over mixed ranks) is folded into B and no alpha is written (scale 1).
#include "convert/lora_convert.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace gemlet {

namespace {

using Json = nlohmann::json;

// HF module names (the text model's, with or without the multimodal wrappers' prefixes) to the GGUF
// tensor the pair adds to.
const std::map<std::string, std::string>& TargetNames() {
  static const std::map<std::string, std::string> names = {
      {"self_attn.q_proj", "attn_q"},  {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"}};
  return names;
}

struct Pair {
  const StTensor* a = nullptr;
  const StTensor* b = nullptr;
  std::string module;  // the PEFT module name, for messages and alpha_pattern
  int layer = 0;
};

Result<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Error("'" + path + "' is not a JSON object");
  return j;
}

// The value in a PEFT pattern map (rank_pattern, alpha_pattern) whose key matches the module, as
// PEFT matches them: the key is a regex the module's name ends with (after a '.').
const Json* PatternFor(const Json& patterns, const std::string& module) {
  if (!patterns.is_object()) return nullptr;
  for (const auto& [key, value] : patterns.items()) {
    try {
      if (std::regex_match(module, std::regex("(.*\\.)?" + key))) return &value;
    } catch (const std::regex_error&) {
      if (module == key || (module.size() > key.size() && module.ends_with("." + key))) return &value;
    }
  }
  return nullptr;
}

using PairMap = std::map<std::string, Pair>;

// PEFT's lora_A / lora_B weights paired by the GGUF tensor they add to; anything else is refused.
Result<PairMap> PairTensors(const SafetensorsFile& st, const std::string& weights) {
  static const std::regex key_re(R"(^base_model\.model\.(.*)\.lora_([AB])(\.default)?\.weight$)");
  static const std::regex module_re(R"(^(.*\.)?layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)$)");
  PairMap pairs;
  for (const StTensor& t : st.tensors()) {
    std::smatch m;
    if (!std::regex_match(t.name, m, key_re)) {
      return Status::Error("'" + weights + "': tensor '" + t.name + "' is not a LoRA A/B weight of PEFT's naming" +
                           (t.name.find("embed") != std::string::npos || t.name.find("lm_head") != std::string::npos
                                ? " (trained embeddings or new tokens are not supported)"
                                : ""));
    }
    const std::string module = m[1];
    std::smatch mm;
    if (!std::regex_match(module, mm, module_re) || module.find("vision") != std::string::npos ||
        module.find("audio") != std::string::npos) {
      return Status::Error("'" + weights + "' adapts '" + module +
                           "'; gemlet applies adapters to the text decoder's q/k/v/o and gate/up/down projections");
    }
    if (!StDTypeIsConvertible(t.dtype) || t.shape.size() != 2) {
      return Status::Error("'" + weights + "': '" + t.name + "' is " + StDTypeName(t.dtype) + " " + t.ShapeString() +
                           ", expected a 2-D F32/F16/BF16 matrix");
    }
    const int layer = std::stoi(mm[2]);
    const std::string gguf_name = "blk." + std::to_string(layer) + "." + TargetNames().at(mm[3]) + ".weight";
    Pair& p = pairs[gguf_name];
    p.module = module;
    p.layer = layer;
    (m[2] == "A" ? p.a : p.b) = &t;
  }
  return pairs;
}

struct PeftConfig {
  Json json;
  double alpha = 0;
  bool rslora = false;
  Json alpha_pattern = Json::object();
};

// adapter_config.json, refused unless it is a plain LoRA this converter can say in GGUF.
Result<PeftConfig> ReadPeftConfig(const std::string& dir) {
  PeftConfig out;
  ASSIGN_OR_RETURN(out.json, ReadJsonFile(dir + "/adapter_config.json"));
  const Json& config = out.json;
  const std::string where = "'" + dir + "/adapter_config.json'";
  const std::string peft_type = config.value("peft_type", "");
  if (peft_type != "LORA") return Status::Error(where + ": peft_type is '" + peft_type + "'; gemlet converts LORA adapters");
  if (!config.contains("r") || !config["r"].is_number_integer() || config["r"].get<int>() <= 0) {
    return Status::Error(where + ": 'r' is missing or not a positive integer");
  }
  if (!config.contains("lora_alpha") || !config["lora_alpha"].is_number()) {
    return Status::Error(where + ": 'lora_alpha' is missing or not a number");
  }
  if (config.value("fan_in_fan_out", false)) return Status::Error(where + ": fan_in_fan_out adapters (Conv1D bases) are not Gemma's");
  if (config.value("use_dora", false)) return Status::Error(where + ": DoRA adapters (use_dora) are not supported");
  out.alpha = config["lora_alpha"].get<double>();
  out.rslora = config.value("use_rslora", false);
  out.alpha_pattern = config.value("alpha_pattern", Json::object());
  return out;
}

}  // namespace

Result<LoraConvertReport> ConvertLora(const LoraConvertOptions& o) {
  namespace fs = std::filesystem;
  const std::string& dir = o.peft_dir;
  if (!fs::is_directory(dir)) return Status::Error("'" + dir + "' is not a folder (expected a PEFT adapter folder)");
  ASSIGN_OR_RETURN(PeftConfig peft, ReadPeftConfig(dir));
  const Json& config = peft.json;
  const double alpha = peft.alpha;
  const bool rslora = peft.rslora;
  const Json& alpha_pattern = peft.alpha_pattern;

  // The base: its architecture, and where it is a GGUF, its tensors' shapes.
  if (o.base.empty()) {
    return Status::Error("convert-lora needs the base model (--base MODEL.gguf or an HF folder with config.json)");
  }
  std::string arch, base_name;
  std::unique_ptr<GgufFile> base_gguf;
  if (fs::is_directory(o.base)) {
    ASSIGN_OR_RETURN(HfConfig hf, LoadHfConfig(o.base));
    arch = hf.arch;
  } else {
    ASSIGN_OR_RETURN(base_gguf, GgufFile::Open(o.base));
    ASSIGN_OR_RETURN(arch, base_gguf->GetString("general.architecture"));
    auto name = base_gguf->GetString("general.name");
    if (name.ok()) base_name = name.value();
  }
  if (arch.rfind("gemma", 0) != 0) return Status::Error("the base's architecture is '" + arch + "', not a Gemma");

  std::string weights = dir + "/adapter_model.safetensors";
  if (!fs::exists(weights)) {
    return Status::Error("'" + dir + "' has no adapter_model.safetensors (adapter_model.bin, a pickle, is not read: "
                         "save the adapter with safe_serialization=True)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> st, SafetensorsFile::Open(weights));

  ASSIGN_OR_RETURN(PairMap pairs, PairTensors(*st, weights));
  if (pairs.empty()) return Status::Error("'" + weights + "' holds no LoRA weights");

  // Check the pairs, against the base where it is a GGUF; collect the ranks and per-pair scales.
  std::map<int, int> ranks;
  std::map<std::string, double> pair_scale;  // PEFT's scaling of each pair
  for (auto it = pairs.begin(); it != pairs.end();) {
    const std::string& name = it->first;
    const Pair& p = it->second;
    if (p.a == nullptr || p.b == nullptr) {
      return Status::Error("'" + weights + "': '" + p.module + "' has lora_" + (p.a ? "A" : "B") + " but no lora_" + (p.a ? "B" : "A"));
    }
    const int64_t r = p.a->shape[0];
    if (p.b->shape[1] != r) {
      return Status::Error("'" + weights + "': '" + p.module + "' has lora_A " + p.a->ShapeString() + " and lora_B " +
                           p.b->ShapeString() + " (their ranks differ)");
    }
    if (base_gguf) {
      const GgufTensor* w = base_gguf->FindTensor(name);
      if (w == nullptr) {
        // A KV-shared layer of Gemma 3n/4 reads another layer's K/V: its k/v projections exist in HF
        // (and carry PEFT weights) but not in the GGUF, and nothing they compute is used.
        if (name.find(".attn_k.") != std::string::npos || name.find(".attn_v.") != std::string::npos) {
          it = pairs.erase(it);
          continue;
        }
        return Status::Error("'" + p.module + "' (" + name + ") is not in the base model '" + o.base + "': an adapter for another model?");
      }
      if (w->ne[0] != p.a->shape[1] || w->ne[1] != p.b->shape[0]) {
        return Status::Error("'" + p.module + "' maps [" + std::to_string(p.a->shape[1]) + " -> " +
                             std::to_string(p.b->shape[0]) + "], but the base's " + name + " is " + w->ShapeString() +
                             ": an adapter for another model?");
      }
    }
    double a = alpha;
    if (const Json* v = PatternFor(alpha_pattern, p.module); v != nullptr && v->is_number()) a = v->get<double>();
    pair_scale[name] = a / (rslora ? std::sqrt(static_cast<double>(r)) : static_cast<double>(r));
    ++ranks[static_cast<int>(r)];
    ++it;
  }
  if (pairs.empty()) return Status::Error("'" + weights + "' adapts nothing the base model has");

  // One alpha says it all when every pair's scale is alpha' / its rank for one alpha'.
  LoraConvertReport report;
  report.architecture = arch;
  report.rslora = rslora;
  bool one_alpha = true;
  double written_alpha = -1;
  for (const auto& [name, p] : pairs) {
    const double r = static_cast<double>(p.a->shape[0]);
    const double alpha_here = pair_scale[name] * r;
    if (written_alpha < 0) written_alpha = alpha_here;
    if (std::fabs(alpha_here - written_alpha) > 1e-6 * std::max(1.0, std::fabs(written_alpha))) one_alpha = false;
    report.rank = std::max(report.rank, static_cast<int>(r));
  }

  GgufWriter writer;
  writer.SetString("general.architecture", arch);
  writer.SetString("general.type", "adapter");
  writer.SetString("general.name", fs::path(fs::absolute(dir).lexically_normal()).filename().string());
  const std::string base_model = config.value("base_model_name_or_path", base_name);
  if (!base_model.empty()) {
    writer.SetU32("general.base_model.count", 1);
    writer.SetString("general.base_model.0.name", base_model);
  }
  writer.SetString("adapter.type", "lora");
  if (one_alpha) {
    writer.SetF32("adapter.lora.alpha", static_cast<float>(written_alpha));
    report.alpha = static_cast<float>(written_alpha);
  }
  for (const auto& [name, p] : pairs) {
    const float b_scale = one_alpha ? 1.0f : static_cast<float>(pair_scale[name]);
    for (const bool is_a : {true, false}) {
      const StTensor* t = is_a ? p.a : p.b;
      const int64_t row = t->shape[1], rows = t->shape[0];
      DType to = o.outtype;
      if (to == DType::kQ8_0 && row % 32 != 0) to = DType::kF16;  // as llama.cpp's converter falls back
      const float scale = is_a ? 1.0f : b_scale;
      RETURN_IF_ERROR(writer.AddTensor(name + (is_a ? ".lora_a" : ".lora_b"), to, {row, rows},
                                       [t, to, row, rows, scale](ByteSink& sink) -> Status {
                                         std::vector<float> f(static_cast<size_t>(row));
                                         std::vector<uint8_t> out(RowBytes(to, row));
                                         for (int64_t r = 0; r < rows; ++r) {
                                           t->ReadRowF32(r, f.data());
                                           if (scale != 1.0f) for (float& x : f) x *= scale;
                                           QuantizeRow(to, f.data(), out.data(), row);
                                           RETURN_IF_ERROR(sink.Write(out.data(), out.size()));
                                         }
                                         return Status::Ok();
                                       }));
    }
    ++report.pairs;
  }
  RETURN_IF_ERROR(writer.Write(o.output_path));
  std::error_code ec;
  report.bytes_out = fs::file_size(o.output_path, ec);
  return report;
}

}  // namespace gemlet
