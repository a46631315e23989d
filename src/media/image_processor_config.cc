// Gemma 3 / Gemma 4 image parameters from HF's preprocessor_config.json (or a processor_config.json
// that nests them under "image_processor"), through the project's one JSON entry.
#include <cmath>
#include <limits>
#include <string>

#include "base/json_input.h"
#include "media/image_preprocess.h"

namespace gemlet::media {
namespace {

using nlohmann::json;

// HF writes None as null: a null key keeps the class default, like an absent one.
const json* Find(const json& config, const char* key) {
  const auto it = config.find(key);
  return it == config.end() || it->is_null() ? nullptr : &*it;
}

Status WrongType(const char* key, const char* expected) {
  return Status::Error(std::string("image processor config: '") + key + "' must be " + expected);
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
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (1 << 20)) {
    return WrongType(key, "a non-negative integer up to 1048576");
  }
  *out = static_cast<int>(v->get<int64_t>());
  return Status::Ok();
}

Status ReadDouble(const json& config, const char* key, double* out) {
  const json* v = Find(config, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number()) return WrongType(key, "a number");
  *out = v->get<double>();
  return Status::Ok();
}

// A number that float32 holds (HF keeps means and stds as float32 tensors).
bool AsFloat(const json& v, float* out) {
  if (!v.is_number()) return false;
  const double d = v.get<double>();
  if (!(std::abs(d) <= std::numeric_limits<float>::max())) return false;
  *out = static_cast<float>(d);
  return true;
}

// image_mean / image_std: one number for every channel, or three.
Status ReadTriple(const json& config, const char* key, std::array<float, 3>* out) {
  const json* v = Find(config, key);
  if (v == nullptr) return Status::Ok();
  float one = 0.f;
  if (AsFloat(*v, &one)) {
    out->fill(one);
    return Status::Ok();
  }
  if (!v->is_array() || v->size() != 3) return WrongType(key, "a float32 number or a list of 3");
  for (size_t c = 0; c < 3; ++c) {
    if (!AsFloat((*v)[c], &(*out)[c])) return WrongType(key, "a float32 number or a list of 3");
  }
  return Status::Ok();
}

Status ReadResample(const json& config, Resample* out) {
  int code = -1;
  RETURN_IF_ERROR(ReadInt(config, "resample", &code));
  if (code < 0) return Status::Ok();
  ASSIGN_OR_RETURN(*out, ResampleFromPil(code));
  return Status::Ok();
}

Status ReadScaling(const json& config, PixelScaling* s) {
  RETURN_IF_ERROR(ReadBool(config, "do_rescale", &s->do_rescale));
  RETURN_IF_ERROR(ReadDouble(config, "rescale_factor", &s->rescale_factor));
  RETURN_IF_ERROR(ReadBool(config, "do_normalize", &s->do_normalize));
  RETURN_IF_ERROR(ReadTriple(config, "image_mean", &s->mean));
  return ReadTriple(config, "image_std", &s->std);
}

// The image processor's own object: the whole text, or its "image_processor" member.
Result<json> ImageProcessorObject(std::string_view json_text, const char* family) {
  ASSIGN_OR_RETURN(json config, ParseJson(json_text, "image processor config"));
  if (!config.is_object()) return Status::Error("image processor config: not a JSON object");
  if (const json* nested = Find(config, "image_processor"); nested != nullptr && nested->is_object()) {
    config = *nested;
  }
  if (const json* type = Find(config, "image_processor_type"); type != nullptr) {
    // Gemma3ImageProcessor, Gemma3ImageProcessorFast, Gemma3ImageProcessorPil: one family.
    const std::string prefix = std::string(family) + "ImageProcessor";
    if (!type->is_string() || type->get<std::string>().rfind(prefix, 0) != 0) {
      return Status::Error("image processor config: image_processor_type is " + type->dump() + ", not " + prefix);
    }
  }
  return config;
}

}  // namespace

Result<Gemma3ImageParams> Gemma3ImageParamsFromHfJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(const json config, ImageProcessorObject(json_text, "Gemma3"));
  Gemma3ImageParams params;
  if (const json* size = Find(config, "size"); size != nullptr) {
    // get_size_dict(default_to_square=True): a single number is a square.
    if (size->is_number_integer()) {
      RETURN_IF_ERROR(ReadInt(config, "size", &params.height));
      params.width = params.height;
    } else if (size->is_object() && size->contains("height") && size->contains("width")) {
      RETURN_IF_ERROR(ReadInt(*size, "height", &params.height));
      RETURN_IF_ERROR(ReadInt(*size, "width", &params.width));
    } else {
      return WrongType("size", "{\"height\": H, \"width\": W} or one integer");
    }
  }
  RETURN_IF_ERROR(ReadBool(config, "do_resize", &params.do_resize));
  RETURN_IF_ERROR(ReadResample(config, &params.resample));
  RETURN_IF_ERROR(ReadScaling(config, &params.scaling));
  PanAndScanParams& pas = params.pan_and_scan;
  RETURN_IF_ERROR(ReadBool(config, "do_pan_and_scan", &pas.enabled));
  RETURN_IF_ERROR(ReadInt(config, "pan_and_scan_min_crop_size", &pas.min_crop_size));
  RETURN_IF_ERROR(ReadInt(config, "pan_and_scan_max_num_crops", &pas.max_num_crops));
  RETURN_IF_ERROR(ReadDouble(config, "pan_and_scan_min_ratio_to_activate", &pas.min_ratio_to_activate));
  return params;
}

Result<Gemma4ImageParams> Gemma4ImageParamsFromHfJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(const json config, ImageProcessorObject(json_text, "Gemma4"));
  Gemma4ImageParams params;
  RETURN_IF_ERROR(ReadInt(config, "patch_size", &params.patch_size));
  RETURN_IF_ERROR(ReadInt(config, "pooling_kernel_size", &params.pooling_kernel_size));
  RETURN_IF_ERROR(ReadInt(config, "max_soft_tokens", &params.max_soft_tokens));
  if (params.patch_size <= 0 || params.pooling_kernel_size <= 0 || params.max_soft_tokens <= 0) {
    return Status::Error("image processor config: patch_size, pooling_kernel_size and max_soft_tokens must be positive");
  }
  RETURN_IF_ERROR(ReadBool(config, "do_resize", &params.do_resize));
  RETURN_IF_ERROR(ReadResample(config, &params.resample));
  RETURN_IF_ERROR(ReadScaling(config, &params.scaling));
  return params;
}

}  // namespace gemlet::media
