// Where the kernel tables come from: the scalar reference, and the Highway code compiled per target.
// Model code reaches them through kernels.h (BestKernels, KernelsNamed); this header is for the
// kernel sources, their tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace gemlet {

// The scalar reference kernels (kernels_ref.cc): the specification, and the fallback.
const KernelTable& RefKernels();

// Highway targets compiled into gemlet that this CPU can run, best first (hwy target bits).
std::vector<int64_t> SimdTargets();
// The table compiled for one of SimdTargets(); nullptr for any other target. Thread-safe (the
// tables are looked up once, on first use).
const KernelTable* SimdKernels(int64_t target);
// On x86, AVX2_VNNI: the AVX2 table with vpdpbusd in its packed kernels, where the CPU has AVX-VNNI
// or, with the EVEX encoding of the same instruction, AVX-512 VNNI (AVX3_DL); else null.
const KernelTable* Avx2VnniKernels();
// On aarch64, the tables beyond Highway's NEON that this CPU runs, best first: NEON_I8MM (packed
// weights, prefill on smmla) and NEON_DOTPROD (packed weights on sdot), from matmul_neon.cc;
// empty elsewhere. Highway 1.0 has no target for either, so they are chosen by the CPU's hwcaps.
std::vector<const KernelTable*> NeonPackedTables();
// Every table this CPU runs, best first: NeonPackedTables(), then SimdTargets()' tables with
// Avx2VnniKernels() before AVX2's.
std::vector<const KernelTable*> SimdTables();

// Reads n bytes with the widest loads this CPU has, in several streams, and returns a checksum so
// that the reads cannot be optimised away: the loop memory bandwidth benchmarks time.
uint32_t ReadForBandwidth(const void* data, size_t n);
// The same over n_streams regions of n bytes each, read in lock-step (at most 8), each cache line
// prefetched prefetch_bytes ahead (0: none).
uint32_t ReadStreamsForBandwidth(const uint8_t* const* regions, int n_streams, size_t n, size_t prefetch_bytes);

}  // namespace gemlet
