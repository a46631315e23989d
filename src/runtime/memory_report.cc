// MemoryReport: classify tensors by how the forward pass reads them; size the KV cache.
#include "runtime/memory_report.h"
#include "runtime/session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

namespace gemlet::runtime {

namespace {
bool ReadByRows(const std::string& name, bool tied_output) {
  // Token embeddings are gathered row by row, unless the same matrix is the LM head (tied), which
  // reads all of it for every token. Per-layer embedding tables (Gemma 3n/4) are only gathered.
  if (name == "per_layer_token_embd.weight") return true;
  if (name == "token_embd.weight") return !tied_output;
  return false;
}

size_t ProcStatusBytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) return static_cast<size_t>(std::strtoull(line.c_str() + prefix.size(), nullptr, 10)) * 1024;
  }
  return 0;
}

std::string Mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}
}  // namespace

double DecodeWeightBytesPerToken(const GgufFile& f, const std::string& arch) {
  const bool has_output = f.FindTensor("output.weight") != nullptr;
  auto u32_or_zero = [&](const std::string& key) {
    auto v = f.GetU32Or(key, 0);
    return v.ok() ? static_cast<double>(v.value()) : 0.0;
  };
  const double n_expert = u32_or_zero(arch + ".expert_count"), n_used = u32_or_zero(arch + ".expert_used_count");
  double bytes = 0;
  for (const GgufTensor& t : f.tensors()) {
    const bool lookup = t.name.rfind("token_embd", 0) == 0 || t.name.rfind("per_layer_token_embd", 0) == 0;
    if (lookup) {
      bytes += static_cast<double>(t.nbytes) / static_cast<double>(std::max<int64_t>(1, t.n_rows()));
      if (t.name == "token_embd.weight" && !has_output) bytes += static_cast<double>(t.nbytes);
    } else if (t.name.find("_exps") != std::string_view::npos && n_expert > 0) {
      bytes += static_cast<double>(t.nbytes) * n_used / n_expert;
    } else {
      bytes += static_cast<double>(t.nbytes);
    }
  }
  return bytes;
}

double PromptMacsPerToken(const GgufFile& f, const std::string& arch) {
  auto u32_or_zero = [&](const std::string& key) {
    auto v = f.GetU32Or(key, 0);
    return v.ok() ? static_cast<int64_t>(v.value()) : int64_t{0};
  };
  const double n_expert = static_cast<double>(u32_or_zero(arch + ".expert_count"));
  const double n_used = static_cast<double>(u32_or_zero(arch + ".expert_used_count"));
  const int64_t first_shared = u32_or_zero(arch + ".block_count") - u32_or_zero(arch + ".attention.shared_kv_layers");
  double macs = 0;
  for (const GgufTensor& t : f.tensors()) {
    if (t.n_dims < 2 || t.name.rfind("token_embd", 0) == 0 || t.name.rfind("per_layer_token_embd", 0) == 0 ||
        t.name.rfind("output.", 0) == 0) {
      continue;
    }
    if (t.name.rfind("blk.", 0) == 0 && u32_or_zero(arch + ".attention.shared_kv_layers") > 0) {
      const int64_t layer = std::strtoll(std::string(t.name.substr(4)).c_str(), nullptr, 10);
      if (layer >= first_shared) continue;
    }
    double n = 1;
    for (int d = 0; d < t.n_dims; ++d) n *= static_cast<double>(t.ne[d]);
    if (t.name.find("_exps") != std::string_view::npos && n_expert > 0) n *= n_used / n_expert;
    macs += n;
  }
  return macs;
}

double DecodeKvBytesAt(const Model& model, DType type, int64_t pos) {
  // A layer that shares another's cache reads those rows again: it counts like its source.
  double bytes = 0;
  for (const KvLayerSpec& s : model.KvLayout()) {
    const int64_t n = s.window > 0 ? std::min<int64_t>(pos + 1, s.window) : pos + 1;
    bytes += static_cast<double>(n) * static_cast<double>(KvCache::RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k) +
                                                          KvCache::RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v));
  }
  return bytes;
}

std::string FileTypeName(const GgufFile& f) {
  auto t = f.GetU32Or("general.file_type", 1000);
  if (!t.ok()) return "?";
  switch (t.value()) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return "?";
  }
}

MemoryReport ComputeMemoryReport(const Model& model, int n_ctx, DType kv_type, int ring_spare) {
  MemoryReport r;
  const GgufFile& f = model.gguf();
  r.file_bytes = f.file_size();
  const bool tied = f.FindTensor("output.weight") == nullptr;
  for (const GgufTensor& t : f.tensors()) {
    (ReadByRows(std::string(t.name), tied) ? r.weights_on_demand : r.weights_resident) += t.nbytes;
  }
  for (const KvLayerSpec& s : model.KvLayout()) {
    const size_t per_token = KvCache::RowBytes(kv_type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k) +
                             KvCache::RowBytes(kv_type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v);
    if (s.source >= 0) {
      ++r.kv_layers_shared;
    } else if (s.window > 0) {
      ++r.kv_layers_local;
      r.kv_bytes_per_token_local += per_token;
      r.window = s.window;
    } else {
      ++r.kv_layers_global;
      r.kv_bytes_per_token_global += per_token;
    }
  }
  r.n_ctx = n_ctx;
  r.kv_type = kv_type;
  r.kv_total = KvCache::PlanBytes(model.KvLayout(), n_ctx, kv_type, ring_spare);
  return r;
}

std::string MemoryReport::ToString() const {
  std::ostringstream o;
  o << "memory plan (n_ctx " << n_ctx << ", KV " << KvTypeName(kv_type) << ")\n"
    << "  file                      " << Mib(file_bytes) << "\n"
    << "  weights resident          " << Mib(weights_resident) << "  (read for every token)\n"
    << "  weights on demand         " << Mib(weights_on_demand) << "  (embedding rows: mapped, read per token, not kept resident)\n"
    << "  KV layers                 " << kv_layers_global << " global, " << kv_layers_local << " local (window "
    << window << "), " << kv_layers_shared << " shared\n"
    << "  KV per token              " << kv_bytes_per_token_global << " B global + " << kv_bytes_per_token_local
    << " B local\n"
    << "  KV total                  " << Mib(kv_total) << "\n";
  if (activations > 0) o << "  activations               " << Mib(activations) << "\n";
  o << "  expected resident         " << Mib(weights_resident + kv_total + activations) << "  (weights + KV"
    << (activations > 0 ? " + activations" : "") << "; code and the vocabulary come on top)\n";
  return o.str();
}

MemoryUsage MeasureMemory(const Model& model) {
  MemoryUsage m;
  m.rss_bytes = CurrentRssBytes();
  m.peak_rss_bytes = PeakRssBytes();
  m.anon_bytes = AnonBytes();
  m.packed_weight_bytes = model.PackedWeightBytes();
  m.packed_mapped_bytes = m.packed_weight_bytes - model.packed_store().PackedBytesInMemory();
  const GgufFile& f = model.gguf();
  if (f.mapping() != nullptr) m.model_file_resident_bytes = ResidentBytesInRange(f.mapping()->data(), f.mapping()->size());
  const bool tied = f.FindTensor("output.weight") == nullptr;
  for (const GgufTensor& t : f.tensors()) {
    if (ReadByRows(std::string(t.name), tied)) m.on_demand_resident_bytes += ResidentBytesInRange(t.data, t.nbytes);
  }
  return m;
}

std::string DescribeMemoryUsage(const MemoryUsage& m) {
  std::ostringstream o;
  o << "memory now: RSS " << Mib(m.rss_bytes) << " (peak " << Mib(m.peak_rss_bytes) << "), anonymous " << Mib(m.anon_bytes)
    << ", of it model file " << Mib(m.model_file_resident_bytes) << ", of that embedding tables read by rows "
    << Mib(m.on_demand_resident_bytes);
  if (m.packed_weight_bytes > 0) {
    o << "; packed weights " << Mib(m.packed_mapped_bytes) << " mapped from the cache, "
      << Mib(m.packed_weight_bytes - m.packed_mapped_bytes) << " in memory";
  }
  if (m.tokenizer_bytes > 0) o << "; tokenizer " << Mib(m.tokenizer_bytes);
  o << "\n";
  return o.str();
}

MemoryPlan SessionMemoryPlan(const Session& session) {
  MemoryReport r = ComputeMemoryReport(session.engine().model(), session.n_ctx(), session.cache().type(),
                                       session.ring_spare());
  r.activations = session.activation_bytes();
  MemoryPlan p;
  p.file_bytes = r.file_bytes;
  p.weights_resident_bytes = r.weights_resident;
  p.weights_on_demand_bytes = r.weights_on_demand;
  p.kv_cache_bytes = r.kv_total;
  p.activation_bytes = r.activations;
  p.n_ctx = r.n_ctx;
  p.text = r.ToString();
  return p;
}

size_t CurrentRssBytes() { return ProcStatusBytes("VmRSS"); }

namespace {
std::mutex& FootprintMutex() {
  static std::mutex m;
  return m;
}
std::function<uint64_t()>& FootprintReader() {
  static std::function<uint64_t()> reader;
  return reader;
}
}  // namespace

void SetFootprintReader(std::function<uint64_t()> reader) {
  std::lock_guard<std::mutex> lock(FootprintMutex());
  FootprintReader() = std::move(reader);
}

size_t AnonBytes() {
  {
    std::lock_guard<std::mutex> lock(FootprintMutex());
    if (FootprintReader()) return static_cast<size_t>(FootprintReader()());
  }
  // /proc/self/status's RssAnon is a counter the kernel keeps; smaps_rollup walks every page table
  // of every mapping, which for a mapped multi-GiB model costs milliseconds of a core each read (a
  // sampler reading it every 10 ms took 40% of E2B's decode speed away). The same pages either way.
  if (const size_t rss_anon = ProcStatusBytes("RssAnon"); rss_anon > 0) return rss_anon;
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Anonymous:", 0) == 0) return static_cast<size_t>(std::strtoull(line.c_str() + 10, nullptr, 10)) * 1024;
  }
  return 0;
}
size_t PeakRssBytes() { return ProcStatusBytes("VmHWM"); }

size_t ResidentBytesInRange(const void* begin, size_t size) {
  // /proc/self/pagemap has one 64-bit entry per virtual page; bit 63 says the page is present in
  // this process's page tables — touched by us, not merely sitting in the page cache.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(begin) / page, hi = (reinterpret_cast<uintptr_t>(begin) + size + page - 1) / page;
  std::FILE* f = std::fopen("/proc/self/pagemap", "rb");
  if (f == nullptr) return 0;
  size_t present = 0;
  if (std::fseek(f, static_cast<long>(lo * 8), SEEK_SET) == 0) {
    uint64_t entries[512];
    for (uintptr_t p = lo; p < hi;) {
      const size_t want = static_cast<size_t>(std::min<uintptr_t>(512, hi - p));
      const size_t got = std::fread(entries, 8, want, f);
      for (size_t i = 0; i < got; ++i) present += (entries[i] >> 63) & 1;
      if (got < want) break;
      p += got;
    }
  }
  std::fclose(f);
  return present * page;
}

}  // namespace gemlet::runtime
