// 64-bit ARM's packed-weight matmul (matmul_neon.cc, gemm_neon_i8mm.cc): what the dot-product
// part (ARMv8.2 dotprod: sdot) hands the 8-bit matrix-multiply part (i8mm: smmla) for prefill.
// Only compiled for aarch64; nothing here is included elsewhere.
//
// Highway 1.0 (Debian 12's) has no target for dotprod or i8mm (its NEON target is ARMv8.0), so
// these kernels are compiled with their own -march flags, per file, and their tables are offered
// only where the kernel reports the features (getauxval: HWCAP_ASIMDDP, HWCAP2_I8MM).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace gemlet::neon {

constexpr int kRows = 16;  // rows per packed group and per panel

// A panel: 16 weight rows decoded to signed bytes (zero points taken off), laid out for sdot: per
// 32-value block 8 vectors of 64 bytes, vector k holding values 4k..4k+3 of row r at byte 4r (so
// each 16-byte register holds 4 rows). The 32-value types (Q4_0, Q5_0, Q8_0) give each row's float
// scale per block, w = scale * q; the K types each row's integer scale per scale group (kGroups: 1,
// or 2 for 16-value groups), which the GEMM applies in integers as their GEMV does, their float
// scales and mins left to the GEMV's Finish.
struct Panel {
  int8_t* q = nullptr;        // [block][8][16 rows][4]
  float* scale = nullptr;     // [block][16 rows], or null
  int32_t* iscale = nullptr;  // [block][groups][16 rows], or null
};

// Activations in natural order: x ~= d * q, d per 32 values (or null: the K types' values alone,
// their scales per 256 kept by the caller).
struct Acts32 {
  const int8_t* q = nullptr;  // [token][n_blocks * 32]
  const float* d = nullptr;   // [token][n_blocks]
};

// What the i8mm GEMM needs of a matrix: its shape, and how to fill the panel of rows row0.. (16
// rows: packed matrices have whole groups).
struct PanelSource {
  int64_t n_blocks = 0;  // 32-value blocks per row
  int64_t n_out = 0;
  int groups = 1;
  const void* state = nullptr;
  void (*fill)(const void* state, int64_t row0, const Panel& panel) = nullptr;
  // Set for the K types (the panel filled with iscale, acts with q alone): takes sums[super-block][kSuperTileTokens][16 rows], each token's integer sums of a 256-value
  // super-block with the groups' integer scales applied, for tokens t0..t0+nt-1 and rows row0..,
  // and finishes them with the GEMV's float operations.
  void (*finish)(const void* state, int64_t row0, const int32_t* sums, int64_t t0, int nt) = nullptr;
};

constexpr int kSuperTileTokens = 4;  // tokens per tile of the i8mm GEMM's K-type tiles

// y[t, o] for all n_tokens tokens (more than a decode step's) through smmla: panels of 16 rows
// decoded once and re-laid for smmla (2 rows x 8 values per register), tiles of 8 rows x 4 tokens.
void GemmI8mm(const PanelSource& w, const Acts32& acts, int64_t n_tokens, float* y, KernelContext& ctx);

}  // namespace gemlet::neon
