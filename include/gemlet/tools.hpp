// gemlet's tools API: what the CLI's model-making subcommands (convert, quantize, synth, eval,
// inspect) and benchmarks stand on, beside the runtime API of gemlet.hpp. Nothing of the library's
// own headers is reachable from it.
//
// These are build-machine tools: they are in the gemlet_tools library the CLI links, not in
// libgemlet (an app on a phone loads models; it does not make them). Every call is synchronous and
// reentrant; callbacks run on the calling thread. Output files are written under a temporary name
// and renamed: nothing appears at the output path on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gemlet/status.hpp"

namespace gemlet::tools {

// ---- convert: a Hugging Face Gemma checkpoint folder to GGUF ----

struct ConvertOptions {
  std::string hf_dir;       // config.json + *.safetensors (+ tokenizer.json or tokenizer.model)
  std::string output_path;  // the text model; may be empty when mmproj_output_path is set (towers only)
  // "f32", "f16" or "bf16" for the large matrices (norms and small tensors stay f32). Empty: the
  // checkpoint's own float type, so the default conversion is lossless.
  std::string outtype;
  std::string weights_path;    // a .safetensors file or model.safetensors.index.json instead of the folder's
  std::string tokenizer_path;  // a tokenizer.json or tokenizer.model instead of the folder's
  std::string model_name;      // general.name; empty: the folder's name
  // Non-empty: the checkpoint's vision tower and projector also go to this llama.cpp mmproj GGUF
  // (Gemma3ForConditionalGeneration today); a checkpoint without a tower is an error.
  std::string mmproj_output_path;
  // The mmproj's matrices: "f32", "f16", "bf16" or "q8_0" (norms, biases, embeddings and convolutions
  // stay F32, matrices whose rows are not whole Q8_0 blocks F16). Empty: the text model's type.
  std::string mmproj_outtype;
  std::function<void(size_t index, size_t count, const std::string& tensor)> progress{};
  std::function<void(const std::string& warning)> warn{};
};

struct ConvertReport {
  std::string arch;
  std::string outtype;  // "F32", "F16", "BF16"
  size_t n_tensors = 0;
  bool placeholder_vocab = false;  // neither tokenizer.json nor tokenizer.model: a stand-in vocabulary
  std::string tokenizer_source;
  std::string mmproj_projector;  // clip.projector_type of the mmproj written ("gemma3"); empty: none
  size_t mmproj_tensors = 0;
};

Result<ConvertReport> Convert(const ConvertOptions& options);

// What an mmproj GGUF's towers take: its vision tower (images) and audio tower (clips). An error
// for a file that is not an mmproj.
struct TowerInfo {
  bool images = false;
  bool audio = false;
};
Result<TowerInfo> ReadTowers(const std::string& mmproj_path);

// ---- quantize: re-encode a GGUF's weights with llama-quantize's per-tensor mixes ----

struct FileTypeDescription {
  std::string name;         // "Q4_K_M"
  std::string description;  // one line
};
// Every file type quantize and synth write, in llama-quantize's order.
std::vector<FileTypeDescription> FileTypes();

struct QuantizeOptions {
  std::string input_path;
  std::string output_path;
  std::string type = "Q8_0";          // a FileTypes() name (any case; Q3_K/Q4_K/Q5_K mean the _M mixes)
  bool pure = false;                  // no mix: every quantizable tensor gets the base type
  bool allow_requantize = false;      // accept already-quantized input tensors
  bool dry_run = false;               // choose the types and report sizes, write nothing
  std::string token_embedding_type;   // a tensor type ("Q6_K") for the embedding tables; empty: the mix's
  // As llama-quantize's --tensor-type: REGEX=TYPE, e.g. blk\.[0-3]\.ffn_.*=Q8_0; a tensor whose name
  // the regex matches (anywhere) gets TYPE, the first match winning, before the mix's rules.
  std::vector<std::string> tensor_types;
  std::vector<std::string> overrides; // metadata to set, as llama-quantize: KEY=TYPE:VALUE (int, float, bool, str)
  int n_threads = 0;                  // 0: every hardware thread
  std::function<void(uint64_t done, uint64_t total)> progress{};  // elements converted
  std::function<void(const std::string& warning)> warn{};
};

struct QuantizedTensor {
  std::string name;
  std::vector<int64_t> shape;  // GGUF ne order
  std::string from, to;        // tensor type names
  uint64_t bytes_in = 0, bytes_out = 0;
  bool fallback = false;       // the row length did not suit the mix's type
};

struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;  // in the order written
  uint64_t bytes_in = 0, bytes_out = 0, n_elements = 0;
  int n_fallback = 0;
  double seconds = 0;
};

// kInvalidArgument for an unknown type name or a malformed override.
Result<QuantizeReport> Quantize(const QuantizeOptions& options);

// ---- LoRA adapters: PEFT folders to GGUF, and merging adapters into a base ----

struct ConvertLoraOptions {
  std::string peft_dir;     // adapter_config.json + adapter_model.safetensors
  std::string output_path;  // llama.cpp's GGUF adapter format
  std::string base;         // the base: a GGUF model (checked tensor by tensor) or an HF folder (config.json)
  std::string outtype = "f32";  // f32, f16, bf16 or q8_0
};
struct ConvertLoraReport {
  std::string architecture;
  int pairs = 0;  // adapted projections
  int rank = 0;   // the largest
  float alpha = 0;  // adapter.lora.alpha as written (0: none; the scales are in B)
  bool rslora = false;
  uint64_t bytes_out = 0;
};
Result<ConvertLoraReport> ConvertLora(const ConvertLoraOptions& options);

struct MergeLoraOptions {
  std::string base_path;
  std::string output_path;
  std::vector<std::pair<std::string, float>> adapters;  // (path, scale), added in order
  std::string merged_type;  // "" keeps each matrix's type (quantized ones quantized again); f32, f16, bf16
  int n_threads = 0;
};
struct MergeLoraReport {
  int tensors_merged = 0;
  int tensors_copied = 0;
  uint64_t bytes_out = 0;
  double seconds = 0;
};
Result<MergeLoraReport> MergeLora(const MergeLoraOptions& options);

// A random adapter of the base's shapes (benchmarks: what an adapter of this rank costs).
struct SynthLoraOptions {
  std::string base_path;
  std::string output_path;
  int rank = 16;
  float alpha = 32.0f;
  std::string type = "f16";          // f32, f16, bf16 or q8_0
  std::vector<std::string> targets;  // attn_q ... ffn_down; empty: all seven
  uint64_t seed = 1;
};
struct SynthLoraReport {
  int pairs = 0;
  uint64_t bytes_out = 0;
};
Result<SynthLoraReport> SynthLora(const SynthLoraOptions& options);

// ---- synth: a released Gemma's shapes, metadata and vocabulary with random weights ----

struct SynthPreset {
  std::string name;         // "gemma3-4b"
  std::string description;
  bool tiny = false;        // test-sized; placeholder vocabulary unless a tokenizer is given
};
std::vector<SynthPreset> SynthPresets();

struct SynthOptions {
  std::string preset;
  std::string output_path;
  std::string type = "F16";  // F32, F16, BF16 or a FileTypes() name
  // tokenizer.json[.xz], a GGUF to copy tokenizer.* from, or "none" (placeholder tokens). Empty:
  // "none" for tiny presets; the others need one.
  std::string tokenizer;
  uint64_t seed = 0;
  int n_layers = 0;   // > 0: keep only this many layers
  int n_threads = 0;
  // > 0: encode only each tensor's first N rows and repeat them (picked by a hash) for the rest:
  // the real shapes and types in minutes at 26 B parameters, for speed measurements only.
  int64_t distinct_rows = 0;
  std::function<void(uint64_t done, uint64_t total)> progress{};  // elements generated
};

struct SynthReport {
  std::string arch;
  size_t n_tensors = 0;
  uint64_t n_elements = 0;
  uint64_t bytes = 0;
  int n_vocab = 0;
  double seconds = 0;
};

Result<SynthReport> Synth(const SynthOptions& options);

// A test model that plays back scripted answers instead of computing (general.architecture
// "gemlet-scripted"): for testing what a client does with tool calls, thinking and streaming, which
// no random-weight model emits by itself. After the n-th cue in its context (by default the places
// the chat format hands the turn to the model: a model turn opens, a tool's result ends) it answers
// with answers[n-1], cycling, special tokens spelled out ("<|tool_call>call:f{}<tool_call|>").
struct ScriptedModelOptions {
  std::string tokenizer;             // a GGUF[.xz] whose tokenizer.* keys (chat template included) are copied
  std::vector<std::string> answers;
  std::vector<std::string> cues;     // empty: the chat format's own
  int context_length = 8192;
  std::string name;                  // general.name; empty: "scripted"
  std::string output_path;
};
struct ScriptedModelReport {
  int n_vocab = 0;
  size_t n_cues = 0;
  std::vector<int32_t> answer_tokens;  // each answer's length in tokens
};
Result<ScriptedModelReport> WriteScriptedModel(const ScriptedModelOptions& options);
// Options from a script file: {"answers": [...], "cues": [...]?, "context_length": N?, "name": S?}.
Result<ScriptedModelOptions> ReadModelScript(const std::string& json_path);

// ---- eval: perplexity, and drift against a reference model ----

struct EvalOptions {
  std::string model_path;
  std::string ref_model_path;  // empty: perplexity only
  std::string text;            // UTF-8, tokenized with the model's tokenizer
  int n_ctx = 512;             // tokens per window (llama-perplexity's windows: BOS first)
  bool score_all = false;      // score every token after BOS, not only each window's second half
  int max_chunks = 0;          // 0: every window
  int n_threads = 0;
  // The KV cache of each side ("f16", "f32", "q8_0", "q4_0"): the model as its own reference with a
  // cheaper cache measures what that cache costs.
  std::string kv_type = "f16";
  std::string ref_kv_type = "f16";
  std::function<void(int chunk, int n_chunks)> progress{};
};

struct EvalReport {
  int n_ctx = 0;
  int n_chunks = 0;
  int64_t n_text_tokens = 0;
  int64_t n_tokens = 0;       // scored
  double nll_mean = 0, ppl = 0, ppl_stderr = 0;
  bool has_ref = false;       // the rest needs ref_model_path; KL(P_ref || P_model) in nats
  double ref_ppl = 0;
  double kld_mean = 0, kld_median = 0, kld_p99 = 0, kld_max = 0;
  double top1_agree = 0;
  double max_abs_dlogit = 0, rms_dlogit = 0;
  double seconds = 0;
};

Result<EvalReport> Eval(const EvalOptions& options);

// ---- inspect: a GGUF file's header, metadata and tensors ----

struct InspectOptions {
  bool tensors = false;  // list every tensor
  bool json = false;     // JSON instead of text (arrays over 64 elements abbreviated)
};
// The report as text (or JSON), ready to print.
Result<std::string> Inspect(const std::string& gguf_path, const InspectOptions& options = {});

// ---- measurement ----

// This machine's streaming read bandwidth in GB/s: a fresh buffer of `bytes` read by `threads`
// threads at once with the widest loads the CPU has, the median of `reps` runs after a warm-up.
double MeasureReadBandwidthGBs(int threads, size_t bytes, int reps);

// The bound decode speed is held against: the best of several probes, so that no engine's reads
// can beat it. Each probe reads a fresh `bytes` buffer with `threads` threads, each thread its slice
// in 1, 2 or 4 lock-step streams, with no software prefetch or lines prefetched 512 B, 2 KiB or
// 4 KiB ahead; a probe counts its best run of `reps` (after a warm-up).
struct BandwidthProbe {
  int streams = 1;
  size_t prefetch_bytes = 0;
  double gbs = 0;
};
struct BandwidthBound {
  double gbs = 0;  // the best probe's
  BandwidthProbe best;
  std::vector<BandwidthProbe> probes;
};
BandwidthBound MeasureReadBandwidthBound(int threads, size_t bytes = size_t{1} << 30, int reps = 2);

// The int8 multiply-accumulate peak this CPU's cores sustain for each instruction sequence gemlet's
// packed GEMMs issue (12 independent chains a thread over registers, every thread at once): the
// compute bound prefill is held against. One entry per sequence the CPU runs; kernels names the
// table that uses it ("AVX3_DL": zmm vpdpbusd, "AVX2_VNNI": ymm vpdpbusd, "AVX2": vpmaddubsw +
// vpmaddwd + vpaddd, "NEON_DOTPROD": sdot).
struct Int8Peak {
  std::string kernels;
  std::string sequence;
  int macs_per_step = 0;  // int8 products one step of the sequence makes
  double gmacs = 0;       // all threads together, the best of reps runs
};
std::vector<Int8Peak> MeasureInt8Peaks(int threads, int reps = 3);

}  // namespace gemlet::tools
