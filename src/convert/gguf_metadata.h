// The GGUF metadata of a converted Gemma: llama.cpp's keys per architecture, plus gemlet's two extensions.
#pragma once

#include <string>

#include "convert/hf_config.h"
#include "gguf/gguf_writer.h"

namespace gemlet {

// Writes {arch}.* hyperparameters exactly as llama.cpp's convert_hf_to_gguf.py does for this family,
// and, where a config departs from what llama.cpp assumes, gemlet's extension keys (both use
// llama.cpp's key strings and are read by llama.cpp where it reads them at all):
//   {arch}.attention.scale                 f32, query_pre_attn_scalar^-1/2 (gemma2/gemma3, when it
//                                          differs from llama.cpp's 1/sqrt(key_length) / 27B rule);
//   {arch}.attention.sliding_window_pattern bool per layer, true = sliding (gemma2/gemma3 whenever they
//                                          have sliding layers; llama.cpp otherwise assumes every 2nd /
//                                          every 6th layer is global);
//   {arch}.rope.freq_base                  gemma/gemma2 only when it is not llama.cpp's default 1e4;
//   {arch}.rope.scaling.*                  gemma/gemma2 linear/yarn scaling (llama.cpp drops it there).
Status WriteModelMetadata(const HfConfig& config, GgufWriter& writer);

// general.* keys: architecture, type, name, file_type, quantization_version.
void WriteGeneralMetadata(const HfConfig& config, const std::string& name, uint32_t file_type, GgufWriter& writer);

// The stand-in vocabulary of checkpoints without a tokenizer (the shared test models): <pad>, <eos>,
// <bos>, <unk> as CONTROL, then <t4>... as USER_DEFINED up to vocab_size, so llama.cpp can load it.
void WritePlaceholderVocab(const HfConfig& config, GgufWriter& writer);

// The standard normal quantile: Phi^-1(p) = sqrt(2) erfinv(2p - 1); -inf at 0.
double NormalQuantile(double p);

}  // namespace gemlet
