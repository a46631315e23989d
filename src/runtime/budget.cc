// Budget planning (budget.h): a session's cost from the model's layout and the options, and the
// search for options that fit.
#include "runtime/budget.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/packed_weights.h"
#include "runtime/session.h"

namespace gemlet::runtime {

uint64_t PackedInMemoryBytes(const Model& model, const KernelTable& kernels, const KernelOptions& options) {
  if (!options.pack_weights) return 0;
  uint64_t bytes = 0;
  for (const WeightMatrix& w : model.packed_store().matrices()) {
    const PackedLayout* layout = kernels.packed_layout(w.type);
    if (layout == nullptr || w.packed->bytes() > 0) continue;
    bytes += static_cast<uint64_t>(w.n_out / PackedWeights::kGroupRows) * layout->group_bytes(w);
  }
  return bytes + model.packed_store().PackedBytesInMemory();
}

SessionCost SessionCostOn(const Model& model, const SessionOptions& options, uint64_t packed_in_memory) {
  SessionCost c;
  c.kv_bytes = Session::PlanKvBytes(model, options);
  c.activation_bytes = Session::PlanActivationBytes(model, options);
  c.packed_in_memory_bytes = packed_in_memory;
  return c;
}

namespace {

std::string MiB(uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; }

const char* KvName(KvCacheType type) { return KvTypeName(KvDType(type)); }

}  // namespace

Result<SessionOptions> FitToBudget(const CostOf& cost, const Model& model, uint64_t budget, SessionOptions wanted,
                                   std::string* note, uint64_t* floor_bytes) {
  bool blocks_ok = true;  // block rows hold whole 32-value blocks: every layer's head sizes must be multiples of 32
  for (const KvLayerSpec& s : model.KvLayout()) {
    if (s.source < 0 && (s.head_dim_k % 32 != 0 || s.head_dim_v % 32 != 0)) blocks_ok = false;
  }
  // The wanted precision, then the smaller ones in order (never a larger one than asked for).
  std::vector<KvCacheType> types = {wanted.kv_cache_type};
  if (blocks_ok && (wanted.kv_cache_type == KvCacheType::kF16 || wanted.kv_cache_type == KvCacheType::kF32)) {
    types.push_back(KvCacheType::kQ8_0);
  }
  if (blocks_ok && wanted.kv_cache_type != KvCacheType::kQ4_0) types.push_back(KvCacheType::kQ4_0);
  // The prompt's chunk: its activations (attention scores of a chunk against the whole context)
  // are most of a small model's floor, and a smaller chunk costs only prefill speed.
  const std::vector<int> batches = [&] {
    std::vector<int> b = {wanted.max_batch};
    for (int x : {256, 128, 64}) {
      if (x < b.back()) b.push_back(x);
    }
    return b;
  }();
  SessionOptions floor = wanted;
  floor.n_ctx = std::min(wanted.n_ctx, 256);
  floor.kv_cache_type = types.back();
  floor.max_batch = std::min(batches.back(), floor.n_ctx);
  const SessionCost floor_cost = cost(floor);
  if (floor_bytes != nullptr) *floor_bytes = floor_cost.total();
  if (cost(wanted).total() <= budget) return wanted;
  // The context is kept longest, then the chunk, then the precision.
  for (int n = wanted.n_ctx; ; n = std::max(256, n / 2)) {
    for (int batch : batches) {
      for (KvCacheType type : types) {
        SessionOptions o = wanted;
        o.n_ctx = n;
        o.kv_cache_type = type;
        o.max_batch = std::min(batch, n);
        const uint64_t total = cost(o).total();
        if (total > budget) continue;
        if (note != nullptr) {
          std::vector<std::string> changes;
          if (n != wanted.n_ctx) changes.push_back("n_ctx " + std::to_string(wanted.n_ctx) + " -> " + std::to_string(n));
          if (o.max_batch != std::min(wanted.max_batch, n)) {
            changes.push_back("prompt chunk " + std::to_string(wanted.max_batch) + " -> " + std::to_string(o.max_batch));
          }
          if (type != wanted.kv_cache_type) changes.push_back(std::string("KV ") + KvName(type));
          note->clear();
          for (const std::string& c : changes) *note += (note->empty() ? "" : ", ") + c;
          *note += " (" + MiB(total) + " of the " + MiB(budget) + " budget)";
        }
        return o;
      }
    }
    if (n <= 256) break;
  }
  const SessionCost& c = floor_cost;
  return Status::Error(StatusCode::kInvalidArgument,
                       "a memory budget of " + MiB(budget) + " is below this model's floor of " + MiB(c.total()) +
                           " (n_ctx " + std::to_string(floor.n_ctx) + ", prompt chunk " + std::to_string(floor.max_batch) + ", KV " +
                           KvName(floor.kv_cache_type) + ": KV " + MiB(c.kv_bytes) + ", activations " + MiB(c.activation_bytes) +
                           ", packed weights in memory " + MiB(c.packed_in_memory_bytes) + ", the process " +
                           MiB(c.baseline_bytes) + ")" +
                           (c.packed_in_memory_bytes > 0 ? "; a packed-weight cache folder would save the packed weights" : ""));
}

uint64_t DefaultMemoryBudget() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::FILE* f = std::fopen(path, "r");
    if (f == nullptr) continue;
    char buf[64] = {};
    const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
    std::fclose(f);
    const unsigned long long v = got ? std::strtoull(buf, nullptr, 10) : 0;
    if (v > 0 && v < (1ull << 60)) return v;  // "max" and the v1 "unlimited" value mean no limit
  }
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[128];
  uint64_t available = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "MemAvailable:", 13) == 0) available = std::strtoull(line + 13, nullptr, 10) * 1024;
  }
  std::fclose(f);
  return available / 2;
}

uint64_t ParseByteSize(std::string_view text) {
  std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !(v > 0)) return 0;
  std::string unit(end);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "IB") unit.resize(unit.size() - 2);
  else if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return 0;
  return static_cast<uint64_t>(v * scale);
}

}  // namespace gemlet::runtime
