// The vision and audio towers and projectors of a multimodal Gemma checkpoint as llama.cpp's mmproj
// GGUF (general.architecture "clip", clip.* keys, v.* / mm.* and a.* / mm.a.* tensors, named and laid
// out as its converter writes them): what `gemlet convert --mmproj-out` writes and the encoders read.
#pragma once

#include <string>

#include "base/status.h"
#include "convert/safetensors.h"
#include "tensor/dtype.h"

namespace gemlet {

struct MmprojOptions {
  std::string hf_dir;       // config.json (+ preprocessor_config.json or image_processor_config.json)
  std::string output_path;  // written through a temporary file
  DType outtype = DType::kF32;  // the matrices; norms, biases, embeddings stay F32
  std::string model_name;   // general.name
};

struct MmprojResult {
  // The projector types written: "gemma3", "gemma4v", "gemma4v, gemma4a", "gemma3nv, gemma3na" or
  // "gemma3na".
  std::string projector;
  size_t n_tensors = 0;
};

// Whether config.json describes a checkpoint with a vision tower gemlet can write an mmproj for.
bool HasVisionTower(const std::string& hf_dir);

// Writes the towers of `checkpoint` (the checkpoint's text decoder goes to the model GGUF). Today:
// Gemma3ForConditionalGeneration (SigLIP + the average-pooling projector),
// Gemma4ForConditionalGeneration (the vision tower, and the audio conformer where the checkpoint has
// one, in one file) and Gemma3nForConditionalGeneration (its MobileNet-V5 vision tower where the
// checkpoint has one, and the audio conformer, in one file); other multimodal checkpoints are refused
// with a message naming them.
Result<MmprojResult> WriteMmproj(const MmprojOptions& options, const SafetensorsCheckpoint& checkpoint);

}  // namespace gemlet
