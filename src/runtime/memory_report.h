// MemoryReport: what a model costs in RAM before it runs — weights that become resident, weights
// that stay on disk (read by rows), KV bytes per token for local and global layers, and the total
// for a context size — plus what the process actually holds, for comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "gemlet/types.hpp"
#include "model/kv_cache.h"
#include "model/model.h"

namespace gemlet::runtime {

struct MemoryReport {
  size_t file_bytes = 0;
  size_t weights_resident = 0;   // read in full for every token: they end up in RAM
  size_t weights_on_demand = 0;  // read by rows (embedding tables): only touched rows get paged in
  int kv_layers_global = 0;      // layers that own a global (full-context) cache
  int kv_layers_local = 0;       // layers that own a sliding-window ring
  int kv_layers_shared = 0;      // layers reusing another layer's cache (no memory)
  int window = 0;
  size_t kv_bytes_per_token_global = 0;  // summed over the global layers
  size_t kv_bytes_per_token_local = 0;   // summed over the local layers (times min(window, n_ctx) in total)
  size_t kv_total = 0;                   // for n_ctx
  size_t activations = 0;                // a session's preallocated buffers (set by the caller: they
                                         // depend on batch size and threads, not on the model alone)
  int n_ctx = 0;
  DType kv_type = DType::kF16;

  std::string ToString() const;
};

// ring_spare: the session's rollback room beyond each sliding window (SessionOptions::rollback_tokens).
MemoryReport ComputeMemoryReport(const Model& model, int n_ctx, DType kv_type, int ring_spare = 0);

// What decoding one token reads, for bandwidth bounds: every weight matrix once, except lookup
// tables (token and per-layer embeddings: one row each; a tied token table is also the output head,
// read whole) and MoE experts (the used fraction).
double DecodeWeightBytesPerToken(const GgufFile& file, const std::string& arch);

// Multiply-accumulates of the weight matrices one prompt token goes through in prefill (what a
// compute bound divides): every matrix's rows x columns, MoE experts the used share; not the
// embedding lookups, nor the output head and the KV-shared tail layers, which a prompt runs on its
// last row only.
double PromptMacsPerToken(const GgufFile& file, const std::string& arch);
// The K and V bytes a decode step at position pos reads: every layer's cache within its window
// (a layer sharing another's cache reads its rows again).
double DecodeKvBytesAt(const Model& model, DType type, int64_t pos);
// llama.cpp's name of general.file_type ("Q4_K_M"), "?" when absent or unknown.
std::string FileTypeName(const GgufFile& file);

// What the process holds now, to set beside the plan: its RSS and peak, and how much of the model
// file is mapped into it — in total and of the tensors read by rows (weights_on_demand). The
// tokenizer's bytes are the engine's to add.
MemoryUsage MeasureMemory(const Model& model);
// One line, "memory now: RSS ...".
std::string DescribeMemoryUsage(const MemoryUsage& usage);

class Session;
// What a session's plan is: the report for its context and KV type, with its workspace.
MemoryPlan SessionMemoryPlan(const Session& session);

// Resident bytes of this process (VmRSS) and its peak (VmHWM), from /proc/self/status; 0 if unknown.
size_t CurrentRssBytes();
size_t PeakRssBytes();
// The process's dirty memory, what a phone counts against the app: the host's reading when it set
// one (SetFootprintReader: iOS's phys_footprint, Android's own), else the anonymous resident bytes
// (RssAnon of /proc/self/status, or smaps_rollup's "Anonymous"); 0 if unknown.
size_t AnonBytes();
// Process-wide: where AnonBytes reads from (empty: /proc). Thread-safe; the reader may be called
// from any thread.
void SetFootprintReader(std::function<uint64_t()> reader);
// Bytes of [begin, begin + size) that are present in this process's page tables (from
// /proc/self/pagemap), i.e. what those pages add to RSS. The page cache alone does not count.
size_t ResidentBytesInRange(const void* begin, size_t size);

}  // namespace gemlet::runtime
