// Synthetic models: a released Gemma's real dimensions, metadata and vocabulary with random weights,
// streamed row by row from a counter-based RNG (and quantized on the fly) into a GGUF file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "quantize/quant_mix.h"

namespace gemlet {

struct SynthPreset {
  const char* name;         // "gemma3-4b"
  const char* description;  // one line for --help
  const char* config_json;  // the HF config.json (text decoder) the GGUF metadata is derived from
  bool tiny;                // a test-sized model: placeholder vocabulary unless a tokenizer is given
};

const std::vector<SynthPreset>& SynthPresets();
const SynthPreset* FindSynthPreset(const std::string& name);

struct SynthOptions {
  std::string preset;
  std::string output_path;  // written through a temporary file: nothing appears here on failure
  FileType ftype = FileType::kF16;
  // tokenizer.json (or .json.xz, with tokenizer_config.json[.xz] beside it), or a GGUF whose
  // tokenizer.* keys are copied, or "none" for the placeholder vocabulary (<t4>, <t5>, ...).
  // Empty: "none" for the tiny presets; the others need one named (Gemma 3's tokenizer.json for
  // Gemma 2/3 presets, Gemma 4's vocabulary for gemma4 ones): the library ships no vocabulary.
  std::string tokenizer;
  uint64_t seed = 0;
  int n_layers = 0;  // > 0: keep only this many layers (KV-shared layers scale along)
  int n_threads = 0;
  // > 0: each tensor's first N rows are generated and encoded, and every further row repeats one of
  // them, picked by the same counter-based hash (same shapes, types and bytes per row, no search
  // per row): a 26 B-parameter file in minutes, for speed tests only (the weights are not random).
  int64_t distinct_rows = 0;
  std::function<void(uint64_t done, uint64_t total)> progress;  // elements generated
};

struct SynthReport {
  std::string arch;
  size_t n_tensors = 0;
  uint64_t n_elements = 0;
  uint64_t bytes = 0;  // tensor data
  int n_vocab = 0;
  double seconds = 0;
};

Result<SynthReport> WriteSynthModel(const SynthOptions& options);

// The config.json of a preset with num_hidden_layers cut to n_layers (0: unchanged).
Result<std::string> SynthConfigJson(const SynthPreset& preset, int n_layers);

// The tensors a preset's file holds, GGUF names and shapes (ne order), in the order written.
Result<std::vector<std::pair<std::string, std::vector<int64_t>>>> SynthTensorShapes(const SynthPreset& preset, int n_layers);

// A test model that plays back scripted answers (general.architecture "gemlet-scripted", see
// model/scripted.cc): what a test needs from a model that no random-weight one does by itself.
struct ScriptedModelOptions {
  std::string tokenizer;             // a GGUF (or .gguf.xz) whose tokenizer.* keys, chat template included, are copied
  std::vector<std::string> answers;  // the n-th cue of a context is answered by answers[n-1] (cycling)
  // Texts after which the model speaks; special tokens spelled out. Empty: the model turn and the
  // end of a tool's result of the vocabulary's chat format.
  std::vector<std::string> cues;
  int context_length = 8192;
  std::string name;
  std::string output_path;
};

struct ScriptedModelReport {
  int n_vocab = 0;
  size_t n_cues = 0;
  std::vector<int32_t> answer_tokens;  // each answer's length in tokens
};

Result<ScriptedModelReport> WriteScriptedModel(const ScriptedModelOptions& options);
// answers, cues, context_length and name from a JSON script file (tokenizer and output left empty).
Result<ScriptedModelOptions> ReadModelScript(const std::string& json_path);

}  // namespace gemlet

