// TensorPlan: which GGUF tensors a checkpoint becomes — llama.cpp's names, shapes and transforms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "gguf/gguf_writer.h"

namespace gemlet {

// One GGUF tensor and how to produce it. Its rows (of ne[0] values) are the rows of `sources` in order
// (several sources are stacked along the outermost dimension), then `pad_rows` rows of zeros; or,
// with no sources, the values in `generated`, row after row (computed tensors: rope_freqs, a
// re-ordered matrix).
struct PlannedTensor {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length
  std::vector<const StTensor*> sources;
  int64_t pad_rows = 0;
  bool add_one = false;  // gemma/gemma2/gemma3 norms: store 1 + w, as llama.cpp's converter does
  bool keep_f32 = false;  // 1-D, norms, routers, AltUp coefficients: F32 whatever the outtype
  std::vector<float> generated;
  // An index table (a Gemma 4 drafter's token ordering): stored as I32, these values, whatever the outtype.
  std::vector<int32_t> generated_i32;
  std::string hf_name;  // the first source's checkpoint name, for messages

  int64_t n_rows() const;
};

// Streams one planned tensor into a GGUF writer's sink: source rows -> f32 (+1 where add_one) ->
// `type`, then the zero rows of pad_rows (convert.cc).
Status ProducePlannedTensor(const PlannedTensor& p, DType type, ByteSink& sink);

// Maps every decoder tensor of the checkpoint to its GGUF tensor, checking names, shapes and dtypes
// against the config: an unknown tensor name, a missing required tensor or a wrong shape is an error
// that names the tensor. Vision/audio towers of multimodal checkpoints are skipped. Tensors come out
// in llama.cpp's order: generated ones (rope_freqs) first, then by checkpoint name.
Result<std::vector<PlannedTensor>> PlanTensors(const HfConfig& config, const SafetensorsCheckpoint& checkpoint);

// The checkpoint name with a multimodal wrapper's prefix removed ("model.language_model.x" -> "model.x");
// empty for tensors that are not part of the text decoder (vision and audio towers, projectors).
std::string TextDecoderName(const std::string& name);

}  // namespace gemlet
