// Gemma 3n / Gemma 4 log-mel parameters from HF's feature extractor config (feature_extractor_config.json,
// preprocessor_config.json, or processor_config.json's "feature_extractor"), through the one JSON entry.
#include <cmath>
#include <string>

#include "base/json_input.h"
#include "media/audio_features.h"

namespace gemlet::media {
namespace {

using nlohmann::json;

// HF writes None as null: a null key keeps the class default, like an absent one.
const json* Find(const json& config, const char* key) {
  const auto it = config.find(key);
  return it == config.end() || it->is_null() ? nullptr : &*it;
}

Status WrongType(const char* key, const char* expected) {
  return Status::Error(std::string("feature extractor config: '") + key + "' must be " + expected);
}

Status ReadBool(const json& config, const char* key, bool* out) {
  const json* v = Find(config, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return WrongType(key, "true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status ReadInt(const json& config, const char* key, int* out) {
  const json* v = Find(config, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (1 << 22)) {
    return WrongType(key, "a non-negative integer up to 4194304");
  }
  *out = static_cast<int>(v->get<int64_t>());
  return Status::Ok();
}

Status ReadDouble(const json& config, const char* key, double* out) {
  const json* v = Find(config, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number() || !std::isfinite(v->get<double>())) return WrongType(key, "a finite number");
  *out = v->get<double>();
  return Status::Ok();
}

Status ReadBins(const json& config, const char* key, int feature_size, std::vector<double>* out) {
  const json* v = Find(config, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_array() || v->size() != static_cast<size_t>(feature_size)) {
    return Status::Error(std::string("feature extractor config: '") + key +
                         "' must be null or a list of feature_size (" + std::to_string(feature_size) + ") numbers");
  }
  out->clear();
  for (const json& x : *v) {
    if (!x.is_number() || !std::isfinite(x.get<double>())) return WrongType(key, "a list of finite numbers");
    out->push_back(x.get<double>());
  }
  return Status::Ok();
}

// HF's int(round(sampling_rate * ms / 1000)); Python rounds halves to even, as nearbyint does.
Status ReadMilliseconds(const json& config, const char* key, int sampling_rate, int* out) {
  double ms = -1.0;
  RETURN_IF_ERROR(ReadDouble(config, key, &ms));
  if (ms < 0.0) return Status::Ok();
  const double samples = std::nearbyint(sampling_rate * ms / 1000.0);
  if (!(samples >= 1.0 && samples <= (1 << 20))) return WrongType(key, "a duration of 1 to 1048576 samples");
  *out = static_cast<int>(samples);
  return Status::Ok();
}

// The extractor's own object and the defaults of the class it names.
Result<json> ExtractorObject(std::string_view json_text, LogMelParams* params) {
  ASSIGN_OR_RETURN(json config, ParseJson(json_text, "feature extractor config"));
  if (!config.is_object()) return Status::Error("feature extractor config: not a JSON object");
  if (const json* nested = Find(config, "feature_extractor"); nested != nullptr && nested->is_object()) {
    config = *nested;
  }
  const json* type = Find(config, "feature_extractor_type");
  const std::string name = type != nullptr && type->is_string() ? type->get<std::string>() : "";
  if (name == "Gemma3nAudioFeatureExtractor") {
    *params = Gemma3nLogMelParams();
  } else if (name == "Gemma4AudioFeatureExtractor") {
    *params = Gemma4LogMelParams();
  } else {
    return Status::Error("feature extractor config: feature_extractor_type is " +
                         (type == nullptr ? std::string("missing") : type->dump()) +
                         ", not Gemma3nAudioFeatureExtractor or Gemma4AudioFeatureExtractor");
  }
  return config;
}

// Frame and FFT sizes: the config HF saved holds the sizes it used (frame_length, hop_length,
// fft_length); without them they follow from the durations and fft_overdrive as HF derives them.
Status ReadSizes(const json& config, LogMelParams* p) {
  RETURN_IF_ERROR(ReadMilliseconds(config, "frame_length_ms", p->sampling_rate, &p->frame_length));
  RETURN_IF_ERROR(ReadMilliseconds(config, "hop_length_ms", p->sampling_rate, &p->hop_length));
  RETURN_IF_ERROR(ReadInt(config, "frame_length", &p->frame_length));
  RETURN_IF_ERROR(ReadInt(config, "hop_length", &p->hop_length));
  bool overdrive = p->style == LogMelStyle::kGemma3n;
  RETURN_IF_ERROR(ReadBool(config, "fft_overdrive", &overdrive));
  if (p->frame_length < 2) return WrongType("frame_length", "at least 2");
  int fft = 1;
  while (fft < p->frame_length) fft *= 2;
  p->fft_length = overdrive ? 2 * fft : fft;
  return ReadInt(config, "fft_length", &p->fft_length);
}

}  // namespace

Result<LogMelParams> LogMelParamsFromHfJson(std::string_view json_text) {
  LogMelParams p;
  ASSIGN_OR_RETURN(const json config, ExtractorObject(json_text, &p));
  RETURN_IF_ERROR(ReadInt(config, "sampling_rate", &p.sampling_rate));
  RETURN_IF_ERROR(ReadInt(config, "feature_size", &p.feature_size));
  RETURN_IF_ERROR(ReadSizes(config, &p));
  RETURN_IF_ERROR(ReadDouble(config, "min_frequency", &p.min_frequency));
  RETURN_IF_ERROR(ReadDouble(config, "max_frequency", &p.max_frequency));
  RETURN_IF_ERROR(ReadDouble(config, "preemphasis", &p.preemphasis));
  RETURN_IF_ERROR(ReadBool(config, "preemphasis_htk_flavor", &p.preemphasis_htk_flavor));
  RETURN_IF_ERROR(ReadDouble(config, "mel_floor", &p.mel_floor));
  RETURN_IF_ERROR(ReadDouble(config, "input_scale_factor", &p.input_scale_factor));
  RETURN_IF_ERROR(ReadDouble(config, "dither", &p.dither));
  double padding_value = 0.0;
  RETURN_IF_ERROR(ReadDouble(config, "padding_value", &padding_value));
  p.padding_value = static_cast<float>(padding_value);
  if (const json* side = Find(config, "padding_side"); side != nullptr) {
    if (!side->is_string() || (*side != "right" && *side != "left")) {
      return WrongType("padding_side", "\"right\" or \"left\"");
    }
    p.pad_left = *side == "left";
  }
  RETURN_IF_ERROR(ReadBins(config, "per_bin_mean", p.feature_size, &p.per_bin_mean));
  RETURN_IF_ERROR(ReadBins(config, "per_bin_stddev", p.feature_size, &p.per_bin_stddev));
  if (p.sampling_rate <= 0 || p.feature_size <= 0 || p.hop_length <= 0) {
    return Status::Error("feature extractor config: sampling_rate, feature_size and hop_length must be positive");
  }
  return p;
}

}  // namespace gemlet::media
