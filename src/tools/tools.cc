// The tools API (include/gemlet/tools.hpp) over the converter, the quantizer, the synthesizer and
// the evaluator: option and report translation only.
#include "gemlet/tools.hpp"

#include <filesystem>
#include <memory>
#include <regex>

#include "convert/convert.h"
#include "convert/lora_convert.h"
#include "convert/mmproj.h"
#include "convert/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/peak_probe.h"
#include "quantize/eval.h"
#include "quantize/lora_tools.h"
#include "quantize/quant_mix.h"
#include "encoders/mmproj.h"
#include "quantize/quantize.h"
#include "quantize/synth.h"
#include "tensor/dtype.h"

namespace gemlet::tools {

namespace {

// A towers-only conversion's default matrix type: the checkpoint's own float type (its first
// floating tensor), so the default stays lossless as the text conversion's is.
DType TowerOwnType(const SafetensorsCheckpoint& checkpoint) {
  for (const StTensor* t : checkpoint.tensors()) {
    if (t->dtype == StDType::kF16) return DType::kF16;
    if (t->dtype == StDType::kBF16) return DType::kBF16;
    if (t->dtype == StDType::kF32) return DType::kF32;
  }
  return DType::kF32;
}

}  // namespace

Result<ConvertReport> Convert(const ConvertOptions& o) {
  gemlet::ConvertOptions c;
  c.hf_dir = o.hf_dir;
  c.output_path = o.output_path;
  if (!o.outtype.empty()) {
    Result<DType> type = ParseOutType(o.outtype);
    if (!type.ok()) return Status::Error(StatusCode::kInvalidArgument, type.message());
    c.outtype = *type;
  }
  c.weights_path = o.weights_path;
  c.tokenizer_path = o.tokenizer_path;
  c.model_name = o.model_name;
  c.progress = o.progress;
  c.warn = o.warn;
  if (!o.mmproj_output_path.empty() && !HasVisionTower(o.hf_dir)) {
    return Status::Error(StatusCode::kInvalidArgument,
                         "--mmproj-out: '" + o.hf_dir + "/config.json' has no vision_config (a text-only checkpoint)");
  }
  if (o.output_path.empty() && o.mmproj_output_path.empty()) {
    return Status::Error(StatusCode::kInvalidArgument, "convert: name an output GGUF, an mmproj output, or both");
  }
  // No text output: only the towers, as llama.cpp's converter writes with --mmproj.
  ConvertResult r;
  if (!o.output_path.empty()) {
    ASSIGN_OR_RETURN(r, ConvertHfToGguf(c));
  }
  ConvertReport report;
  if (!o.mmproj_output_path.empty()) {
    std::unique_ptr<SafetensorsCheckpoint> checkpoint;
    if (!o.weights_path.empty()) {
      ASSIGN_OR_RETURN(checkpoint, SafetensorsCheckpoint::Open(o.weights_path));
    } else {
      ASSIGN_OR_RETURN(checkpoint, SafetensorsCheckpoint::OpenDir(o.hf_dir));
    }
    MmprojOptions m;
    m.hf_dir = o.hf_dir;
    m.output_path = o.mmproj_output_path;
    m.outtype = c.outtype.value_or(o.output_path.empty() ? TowerOwnType(*checkpoint) : r.outtype);
    if (o.mmproj_outtype == "q8_0" || o.mmproj_outtype == "Q8_0") {
      m.outtype = DType::kQ8_0;
    } else if (!o.mmproj_outtype.empty()) {
      Result<DType> type = ParseOutType(o.mmproj_outtype);
      if (!type.ok()) return Status::Error(StatusCode::kInvalidArgument, "--mmproj-type: " + type.message() + " or q8_0");
      m.outtype = *type;
    }
    m.model_name = !o.model_name.empty()     ? o.model_name
                   : !o.output_path.empty() ? std::filesystem::path(o.output_path).stem().string()
                                            : std::filesystem::path(o.hf_dir).filename().string();
    ASSIGN_OR_RETURN(MmprojResult mr, WriteMmproj(m, *checkpoint));
    report.mmproj_projector = mr.projector;
    report.mmproj_tensors = mr.n_tensors;
  }
  if (o.output_path.empty()) return report;
  report.arch = r.arch;
  report.outtype = DTypeName(r.outtype);
  report.n_tensors = r.n_tensors;
  report.placeholder_vocab = r.placeholder_vocab;
  report.tokenizer_source = r.tokenizer_source;
  return report;
}

Result<TowerInfo> ReadTowers(const std::string& mmproj_path) {
  ASSIGN_OR_RETURN(MmprojTowers t, ReadMmprojTowers(mmproj_path));
  return TowerInfo{t.vision, t.audio};
}

std::vector<FileTypeDescription> FileTypes() {
  std::vector<FileTypeDescription> out;
  for (const FileTypeInfo& info : gemlet::FileTypes()) out.push_back({info.name, info.description});
  return out;
}

namespace {
Status UnknownFileType(const std::string& name) {
  return Status::Error(StatusCode::kInvalidArgument,
                       "unknown type '" + name + "' (choose one of " + FileTypeNames() + ")");
}
}  // namespace

Result<ConvertLoraReport> ConvertLora(const ConvertLoraOptions& o) {
  LoraConvertOptions c;
  c.peft_dir = o.peft_dir;
  c.output_path = o.output_path;
  c.base = o.base;
  if (!ParseDTypeName(o.outtype, &c.outtype) ||
      (c.outtype != DType::kF32 && c.outtype != DType::kF16 && c.outtype != DType::kBF16 && c.outtype != DType::kQ8_0)) {
    return Status::Error(StatusCode::kInvalidArgument, "--outtype '" + o.outtype + "' is not one of f32, f16, bf16, q8_0");
  }
  ASSIGN_OR_RETURN(LoraConvertReport r, gemlet::ConvertLora(c));
  return ConvertLoraReport{r.architecture, r.pairs, r.rank, r.alpha, r.rslora, r.bytes_out};
}

Result<MergeLoraReport> MergeLora(const MergeLoraOptions& o) {
  LoraMergeOptions m;
  m.base_path = o.base_path;
  m.output_path = o.output_path;
  for (const auto& [path, scale] : o.adapters) m.adapters.push_back({path, scale});
  if (!o.merged_type.empty()) {
    DType t;
    if (!ParseDTypeName(o.merged_type, &t) || (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16)) {
      return Status::Error(StatusCode::kInvalidArgument, "--outtype '" + o.merged_type + "' is not one of f32, f16, bf16");
    }
    m.merged_type = t;
  }
  m.n_threads = o.n_threads;
  ASSIGN_OR_RETURN(LoraMergeReport r, gemlet::MergeLora(m));
  return MergeLoraReport{r.tensors_merged, r.tensors_copied, r.bytes_out, r.seconds};
}

Result<SynthLoraReport> SynthLora(const SynthLoraOptions& o) {
  LoraSynthOptions s;
  s.base_path = o.base_path;
  s.output_path = o.output_path;
  s.rank = o.rank;
  s.alpha = o.alpha;
  if (!ParseDTypeName(o.type, &s.type)) {
    return Status::Error(StatusCode::kInvalidArgument, "--type '" + o.type + "' is not one of f32, f16, bf16, q8_0");
  }
  s.targets = o.targets;
  s.seed = o.seed;
  ASSIGN_OR_RETURN(LoraSynthReport r, gemlet::SynthLora(s));
  return SynthLoraReport{r.pairs, r.bytes_out};
}

Result<QuantizeReport> Quantize(const QuantizeOptions& o) {
  gemlet::QuantizeOptions q;
  if (!ParseFileType(o.type, &q.ftype)) return UnknownFileType(o.type);
  if (!o.token_embedding_type.empty()) {
    DType t;
    if (!ParseDTypeName(o.token_embedding_type, &t)) {
      return Status::Error(StatusCode::kInvalidArgument, "unknown tensor type '" + o.token_embedding_type + "'");
    }
    q.token_embedding_type = t;
  }
  for (const std::string& spec : o.tensor_types) {
    const size_t eq = spec.rfind('=');
    DType t;
    if (eq == std::string::npos || eq == 0 || !ParseDTypeName(spec.substr(eq + 1), &t)) {
      return Status::Error(StatusCode::kInvalidArgument,
                           "--tensor-type '" + spec + "' is not REGEX=TYPE with a tensor type such as Q8_0");
    }
    const std::string pattern = spec.substr(0, eq);
    try {
      std::regex check(pattern);
    } catch (const std::regex_error& e) {
      return Status::Error(StatusCode::kInvalidArgument, "--tensor-type '" + pattern + "' is not a regex: " + e.what());
    }
    q.tensor_types.emplace_back(pattern, t);
  }
  for (const std::string& spec : o.overrides) {
    Result<MetadataOverride> m = ParseMetadataOverride(spec);
    if (!m.ok()) return Status::Error(StatusCode::kInvalidArgument, m.message());
    q.overrides.push_back(*m);
  }
  q.input_path = o.input_path;
  q.output_path = o.output_path;
  q.pure = o.pure;
  q.allow_requantize = o.allow_requantize;
  q.dry_run = o.dry_run;
  q.n_threads = o.n_threads;
  q.progress = o.progress;
  q.warn = o.warn;
  ASSIGN_OR_RETURN(gemlet::QuantizeReport r, QuantizeGguf(q));
  QuantizeReport report;
  for (const gemlet::QuantizedTensor& t : r.tensors) {
    report.tensors.push_back({t.name, t.ne, DTypeName(t.from), DTypeName(t.to), t.bytes_in, t.bytes_out, t.fallback});
  }
  report.bytes_in = r.bytes_in;
  report.bytes_out = r.bytes_out;
  report.n_elements = r.n_elements;
  report.n_fallback = r.n_fallback;
  report.seconds = r.seconds;
  return report;
}

std::vector<SynthPreset> SynthPresets() {
  std::vector<SynthPreset> out;
  for (const gemlet::SynthPreset& p : gemlet::SynthPresets()) out.push_back({p.name, p.description, p.tiny});
  return out;
}

Result<SynthReport> Synth(const SynthOptions& o) {
  gemlet::SynthOptions s;
  if (!ParseFileType(o.type, &s.ftype)) return UnknownFileType(o.type);
  s.preset = o.preset;
  s.output_path = o.output_path;
  s.tokenizer = o.tokenizer;
  s.seed = o.seed;
  s.n_layers = o.n_layers;
  s.n_threads = o.n_threads;
  s.distinct_rows = o.distinct_rows;
  s.progress = o.progress;
  ASSIGN_OR_RETURN(gemlet::SynthReport r, WriteSynthModel(s));
  return SynthReport{r.arch, r.n_tensors, r.n_elements, r.bytes, r.n_vocab, r.seconds};
}

namespace {
gemlet::ScriptedModelOptions ToInternal(const ScriptedModelOptions& o) {
  return {o.tokenizer, o.answers, o.cues, o.context_length, o.name, o.output_path};
}
}  // namespace

Result<ScriptedModelReport> WriteScriptedModel(const ScriptedModelOptions& o) {
  ASSIGN_OR_RETURN(gemlet::ScriptedModelReport r, gemlet::WriteScriptedModel(ToInternal(o)));
  return ScriptedModelReport{r.n_vocab, r.n_cues, r.answer_tokens};
}

Result<ScriptedModelOptions> ReadModelScript(const std::string& json_path) {
  ASSIGN_OR_RETURN(gemlet::ScriptedModelOptions s, gemlet::ReadModelScript(json_path));
  return ScriptedModelOptions{s.tokenizer, s.answers, s.cues, s.context_length, s.name, s.output_path};
}

Result<EvalReport> Eval(const EvalOptions& o) {
  gemlet::EvalOptions e;
  e.model_path = o.model_path;
  e.ref_model_path = o.ref_model_path;
  e.text = o.text;
  e.n_ctx = o.n_ctx;
  e.score_all = o.score_all;
  e.max_chunks = o.max_chunks;
  e.n_threads = o.n_threads;
  e.progress = o.progress;
  if (!ParseKvType(o.kv_type, &e.kv_type) || !ParseKvType(o.ref_kv_type, &e.ref_kv_type)) {
    return Status::Error(StatusCode::kInvalidArgument, "unknown KV type '" + o.kv_type + "' or '" + o.ref_kv_type +
                                                           "' (f16, f32, q8_0, q4_0)");
  }
  ASSIGN_OR_RETURN(EvalResult r, EvaluateText(e));
  EvalReport report;
  report.n_ctx = r.n_ctx;
  report.n_chunks = r.n_chunks;
  report.n_text_tokens = r.n_text_tokens;
  report.n_tokens = r.n_tokens;
  report.nll_mean = r.nll_mean;
  report.ppl = r.ppl;
  report.ppl_stderr = r.ppl_stderr;
  report.has_ref = r.has_ref;
  report.ref_ppl = r.ref_ppl;
  report.kld_mean = r.kld_mean;
  report.kld_median = r.kld_median;
  report.kld_p99 = r.kld_p99;
  report.kld_max = r.kld_max;
  report.top1_agree = r.top1_agree;
  report.max_abs_dlogit = r.max_abs_dlogit;
  report.rms_dlogit = r.rms_dlogit;
  report.seconds = r.seconds;
  return report;
}

double MeasureReadBandwidthGBs(int threads, size_t bytes, int reps) {
  return gemlet::MeasureReadBandwidthGBs(threads, bytes, reps);
}

BandwidthBound MeasureReadBandwidthBound(int threads, size_t bytes, int reps) {
  const gemlet::BandwidthBound b = gemlet::MeasureReadBandwidthBound(threads, bytes, reps);
  BandwidthBound out;
  out.gbs = b.gbs;
  out.best = {b.best.streams, b.best.prefetch_bytes, b.best.gbs};
  for (const gemlet::BandwidthProbe& p : b.probes) out.probes.push_back({p.streams, p.prefetch_bytes, p.gbs});
  return out;
}

std::vector<Int8Peak> MeasureInt8Peaks(int threads, int reps) {
  std::vector<Int8Peak> out;
  for (const gemlet::Int8Peak& p : gemlet::MeasureInt8Peaks(threads, reps)) {
    out.push_back({p.kernels, p.sequence, p.macs_per_step, p.gmacs});
  }
  return out;
}

}  // namespace gemlet::tools
