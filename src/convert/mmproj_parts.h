// Inside src/convert: what the mmproj writers of each tower share (mmproj.cc: the vision towers and
// the file; mmproj_audio.cc: the audio towers; mmproj_vision3n.cc: Gemma 3n's MobileNet-V5), and the
// planners mmproj.cc calls.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "convert/safetensors.h"
#include "convert/tensor_plan.h"
#include "gguf/gguf_writer.h"

namespace gemlet::mmproj {

using Json = nlohmann::json;

Result<Json> ReadJsonFile(const std::filesystem::path& path);
Result<int64_t> PositiveInt(const Json& object, const char* key, const std::string& where);
// A number or bool with HF's default when the key is absent or null; another type is an error.
Result<double> NumberOr(const Json& object, const char* key, double fallback, const std::string& where);
Result<bool> BoolOr(const Json& object, const char* key, bool fallback, const std::string& where);
// The object config[key], or an error naming it.
Result<const Json*> SubConfig(const Json& config, const char* key, const std::string& label);

// A checkpoint tensor planned under its GGUF name, its data as stored (GGUF's ne is the shape
// reversed, so nothing moves).
PlannedTensor Planned(const StTensor& t, std::string name, bool keep_f32, bool add_one = false);
// The tensor, checked to have this shape.
Result<const StTensor*> NeedTensor(const SafetensorsCheckpoint& ck, const std::string& name,
                                   const std::vector<int64_t>& shape);

// The audio towers (mmproj_audio.cc): tensors into `plan`, clip.audio.* keys into `writer`.
Status PlanGemma4Audio(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck,
                       GgufWriter& writer, std::vector<PlannedTensor>& plan);
Status PlanGemma3nAudio(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck,
                        GgufWriter& writer, std::vector<PlannedTensor>& plan);

// Gemma 3n's MobileNet-V5 and vision embedder (mmproj_vision3n.cc): tensors into `plan`, clip.vision.*
// keys into `writer`.
Status PlanGemma3nVision(const Json& config, const std::string& hf_dir, const SafetensorsCheckpoint& ck,
                         GgufWriter& writer, std::vector<PlannedTensor>& plan);

}  // namespace gemlet::mmproj
