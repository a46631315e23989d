// The packed-weight cache file: the layouts a kernel table packs a model's matrices into, written
// once to a file and then mapped read-only. Packed in memory, the weights are anonymous pages, the
// memory a phone counts and kills for; mapped from this file they are clean file-backed pages the OS
// may drop and re-read, and a second start packs nothing.
//
// The file: a header (magic, format version, the model file's identity, the kernel table's name,
// one entry per matrix: type, shape, offset, bytes) with a checksum, then each matrix's packed bytes
// at an offset aligned to 16 KiB (the page size of iOS and Android 15+). It is written under a
// temporary name and renamed. A file whose header, checksum, size, identity, kernels or entries do
// not match is never used: it is rebuilt. (The packed bytes themselves carry no checksum: checking
// them would read the whole file at every start.)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace gemlet {

// What happened: the cache was mapped as found, or (re)built and then mapped.
enum class PackedCacheOutcome { kLoaded, kBuilt };

// Maps the cache at `path` into the store's slots (every remembered matrix the table packs), or
// builds it first from the model's rows when it is missing or does not match. `identity` names the
// model file's version (size, modification time, a hash of its ends: see runtime::ModelIdentity).
// Errors (a folder that cannot be written, a full disk) change nothing: the kernels then pack in
// memory on first use, as without a cache. `origin` (the model file's path; empty when unknown) is
// recorded: after a build, cache files in the same folder made from that path for another version
// of the model are removed. Mapped, the cache's matrices' rows in the model file are dropped from the page
// cache (those at `origin`): the memory is left to the packed bytes.
Result<PackedCacheOutcome> UsePackedCache(PackedWeightStore& store, const KernelTable& kernels, const std::string& path,
                                          const std::string& identity, ThreadPool& pool,
                                          const std::string& origin = std::string());

// The model file's byte ranges [begin, end) whose rows the store's mapped cache replaces, sorted,
// neighbours less than 1 MiB apart merged: what UsePackedCache drops from the page cache.
std::vector<std::pair<size_t, size_t>> ReplacedRowRanges(const PackedWeightStore& store);

// 64-bit FNV-1a, continued from `h`: the header checksum, and cheap identities.
uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace gemlet
