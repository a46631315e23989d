// Budget planning: what a session costs in dirty memory before it exists, and the session options
// that fit a memory budget (its context, prompt chunk and KV precision lowered in turn).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "gemlet/types.hpp"
#include "kernels/kernel_context.h"
#include "model/model.h"

namespace gemlet::runtime {

// What building the tokenizer adds to anonymous memory, per piece of the vocabulary (measured:
// 41 MiB for Gemma 4's 262,144 pieces, 0.8 MiB for the demo model's 8,192), rounded up.
inline constexpr uint64_t kTokenizerBytesPerPiece = 170;

// Weights the kernels will pack into anonymous memory: the packable matrices nothing has packed or
// mapped yet (none when packing is off), and those packed in memory already.
uint64_t PackedInMemoryBytes(const Model& model, const KernelTable& kernels, const KernelOptions& options);

// A session's cost on a model, all but the baseline (the caller's: the process as it is).
SessionCost SessionCostOn(const Model& model, const SessionOptions& options, uint64_t packed_in_memory);

// The options that fit `budget`: `wanted` if its cost does; else the context is kept longest: at
// each context (halving down to 256) the prompt chunks (the wanted one, 256, 128, 64) and the KV
// precisions (the wanted one, then q8_0 and q4_0 where every head size is a multiple of 32) are
// tried before a smaller context. `note` (nullable) says what changed; `floor_bytes` (nullable)
// receives the cost of the least (n_ctx 256, the smallest chunk and KV). Below that floor:
// kInvalidArgument, the floor's parts in the message.
using CostOf = std::function<SessionCost(const SessionOptions&)>;
Result<SessionOptions> FitToBudget(const CostOf& cost, const Model& model, uint64_t budget, SessionOptions wanted,
                                   std::string* note, uint64_t* floor_bytes);

// The budget when none is given: the cgroup's memory limit if there is one, else half of
// MemAvailable; 0 if neither is known.
uint64_t DefaultMemoryBudget();
// "300M", "1.5G", "512K", "1048576" (bytes; K/M/G/T are powers of 1024, with or without iB); 0 on error.
uint64_t ParseByteSize(std::string_view text);

}  // namespace gemlet::runtime
