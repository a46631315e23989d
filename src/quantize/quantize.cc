// The quantize driver: GGUF in -> per-tensor types (quant_mix) -> rows re-encoded in parallel -> GGUF out.
#include "quantize/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <thread>

#include "runtime/session.h"

namespace gemlet {

namespace {

// Output bytes per slab: big enough that the pool's threads each get many rows, small next to RAM.
constexpr size_t kSlabBytes = size_t{8} << 20;

// Drops a tensor's pages from this process once it is written, so quantizing a model larger than RAM
// keeps only the current tensor resident (the kernel may still cache the file).
void ReleasePages(const uint8_t* data, size_t nbytes) {
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kPage - 1) / kPage * kPage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + nbytes) / kPage * kPage;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Layer 0's value of a key that is a scalar or a per-layer array; 0 when absent.
Result<int> FirstLayerValue(const GgufFile& file, const std::string& key) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return 0;
  if (v->type == GgufType::kArray) {
    if (!v->IsNumericArray() || v->count == 0 || v->IsFloat()) {
      return Status::Error("metadata key '" + key + "' should be an integer array");
    }
    return static_cast<int>(v->IntAt(0));
  }
  if (!v->IsInteger()) return Status::Error("metadata key '" + key + "' should be an integer");
  return static_cast<int>(v->type == GgufType::kInt32 || v->type == GgufType::kInt64 ? v->i64 : static_cast<int64_t>(v->u64));
}

std::vector<int64_t> ShapeOf(const GgufTensor& t) {
  // ggml writes only the dimensions up to the last one > 1; so do we, for byte-identical files.
  std::vector<int64_t> ne(t.ne, t.ne + kGgufMaxDims);
  ne.resize(static_cast<size_t>(EffectiveDims(ne)));
  return ne;
}

// Keys llama-quantize rewrites (quantization_version, file_type go last) or drops (split.*).
bool SkipCopy(std::string_view key) {
  return key == "general.quantization_version" || key == "general.file_type" || key == "split.no" ||
         key == "split.count" || key == "split.tensors.count";
}

}  // namespace

Result<MixModel> MixModelFromGguf(const GgufFile& file) {
  MixModel m;
  if (!file.Has("general.architecture")) return m;  // a bare tensor container: no layer facts
  ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
  ASSIGN_OR_RETURN(m.n_layer, FirstLayerValue(file, arch + ".block_count"));
  ASSIGN_OR_RETURN(m.n_head, FirstLayerValue(file, arch + ".attention.head_count"));
  ASSIGN_OR_RETURN(m.n_head_kv, FirstLayerValue(file, arch + ".attention.head_count_kv"));
  ASSIGN_OR_RETURN(m.n_expert, FirstLayerValue(file, arch + ".expert_count"));
  if (file.Find(arch + ".attention.head_count_kv") == nullptr) m.n_head_kv = m.n_head;  // llama.cpp's default
  return m;
}

Status EncodeRows(DType type, int64_t ne0, int64_t n_rows, const RowSource& source, ThreadPool& pool, ByteSink& sink,
                  const std::function<void(int64_t)>& on_rows) {
  const size_t row_bytes = RowBytes(type, ne0);
  const int64_t slab_rows = std::clamp<int64_t>(static_cast<int64_t>(kSlabBytes / std::max<size_t>(row_bytes, 1)), 1, n_rows);
  std::vector<uint8_t> slab(static_cast<size_t>(slab_rows) * row_bytes);
  // One f32 row per thread, reused for every row that thread converts.
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()), std::vector<float>(static_cast<size_t>(ne0)));
  for (int64_t r0 = 0; r0 < n_rows; r0 += slab_rows) {
    const int64_t count = std::min(slab_rows, n_rows - r0);
    pool.ParallelFor(static_cast<size_t>(count), [&](size_t begin, size_t end, int thread) {
      float* row = scratch[static_cast<size_t>(thread)].data();
      for (size_t r = begin; r < end; ++r) {
        source(r0 + static_cast<int64_t>(r), row);
        QuantizeRow(type, row, slab.data() + r * row_bytes, ne0);
      }
    });
    RETURN_IF_ERROR(sink.Write(slab.data(), static_cast<size_t>(count) * row_bytes));
    if (on_rows) on_rows(count);
  }
  return Status::Ok();
}

Result<MetadataOverride> ParseMetadataOverride(const std::string& spec) {
  const size_t eq = spec.find('=');
  const size_t colon = eq == std::string::npos ? std::string::npos : spec.find(':', eq);
  if (eq == 0 || colon == std::string::npos) {
    return Status::Error("metadata override '" + spec + "' should look like KEY=TYPE:VALUE (TYPE: int, float, bool, str)");
  }
  MetadataOverride m;
  m.key = spec.substr(0, eq);
  const std::string type = spec.substr(eq + 1, colon - eq - 1), value = spec.substr(colon + 1);
  if (m.key == "general.file_type" || m.key == "general.quantization_version" || m.key == "general.architecture") {
    return Status::Error("metadata override: '" + m.key + "' is set by the quantizer or the model, not by hand");
  }
  const auto bad_value = [&] { return Status::Error("metadata override '" + spec + "': '" + value + "' is not a valid " + type); };
  if (type == "str") {
    m.type = GgufType::kString;
    m.text = value;
  } else if (type == "int") {
    m.type = GgufType::kInt64;
    char* end = nullptr;
    errno = 0;
    m.i = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno == ERANGE) return bad_value();
  } else if (type == "float") {
    m.type = GgufType::kFloat64;
    char* end = nullptr;
    m.f = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(m.f)) return bad_value();
  } else if (type == "bool") {
    m.type = GgufType::kBool;
    if (value != "true" && value != "false") return bad_value();
    m.b = value == "true";
  } else {
    return Status::Error("metadata override '" + spec + "': unknown type '" + type + "' (int, float, bool or str)");
  }
  return m;
}

Result<QuantizeReport> QuantizeGguf(const QuantizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> owned, GgufFile::Open(o.input_path));
  std::shared_ptr<const GgufFile> in(std::move(owned));
  ASSIGN_OR_RETURN(MixModel model, MixModelFromGguf(*in));

  // llama-quantize's order: by layer, then name. The mix rules count tensors in this order too.
  std::vector<const GgufTensor*> order;
  for (const GgufTensor& t : in->tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [](const GgufTensor* a, const GgufTensor* b) { return LlamaTensorLess(a->name, b->name); });
  std::vector<MixTensor> mix_tensors;
  for (const GgufTensor* t : order) mix_tensors.push_back({std::string(t->name), t->type, ShapeOf(*t)});
  MixOptions mix_options;
  mix_options.ftype = o.ftype;
  mix_options.pure = o.pure;
  mix_options.token_embedding_type = o.token_embedding_type;
  mix_options.tensor_types = o.tensor_types;
  auto encodable = [](DType type) {
    const DTypeInfo& info = GetDTypeInfo(type);
    return info.can_compute && type != DType::kQ8_K && type != DType::kQ8_1;
  };
  if (o.token_embedding_type && !encodable(*o.token_embedding_type)) {
    return Status::Error(std::string("cannot write token embeddings as ") + DTypeName(*o.token_embedding_type));
  }
  for (const auto& [pattern, type] : o.tensor_types) {
    if (!encodable(type)) return Status::Error("cannot write tensors matching '" + pattern + "' as " + DTypeName(type));
  }
  const std::vector<MixDecision> decisions = ChooseTensorTypes(model, mix_tensors, mix_options);

  QuantizeReport report;
  uint64_t total_elements = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const GgufTensor& t = *order[i];
    const MixDecision& d = decisions[i];
    QuantizedTensor q;
    q.name = mix_tensors[i].name;
    q.ne = mix_tensors[i].ne;
    q.from = t.type;
    q.to = d.type;
    q.bytes_in = t.nbytes;
    q.bytes_out = RowBytes(d.type, t.ne[0]) * static_cast<size_t>(t.n_rows());
    q.fallback = d.fallback;
    if (d.fallback) {
      ++report.n_fallback;
      if (o.warn) o.warn(q.name + ": " + d.note);
    }
    if (q.from != q.to) {
      if (!GetDTypeInfo(q.from).can_compute) {
        return Status::Error("tensor '" + q.name + "' is " + DTypeName(q.from) + ", which gemlet cannot convert");
      }
      if (GetDTypeInfo(q.from).block_size > 1 && !o.allow_requantize) {
        return Status::Error("tensor '" + q.name + "' is already quantized (" + DTypeName(q.from) +
                             "); quantize from an F32/F16/BF16 model, or allow requantizing (quality suffers)");
      }
      total_elements += static_cast<uint64_t>(t.n_elements());
    }
    report.bytes_in += q.bytes_in;
    report.bytes_out += q.bytes_out;
    report.n_elements += static_cast<uint64_t>(t.n_elements());
    report.tensors.push_back(std::move(q));
  }
  if (o.dry_run) {
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
  }

  GgufWriter writer;
  for (const auto& [key, value] : in->metadata()) {
    if (SkipCopy(key)) continue;
    RETURN_IF_ERROR(writer.SetValue(std::string(key), value).WithContext("copying metadata key '" + std::string(key) + "'"));
  }
  for (const MetadataOverride& m : o.overrides) {
    switch (m.type) {
      case GgufType::kInt64: writer.SetI64(m.key, m.i); break;
      case GgufType::kFloat64: writer.SetF64(m.key, m.f); break;
      case GgufType::kBool: writer.SetBool(m.key, m.b); break;
      default: writer.SetString(m.key, m.text); break;
    }
  }
  writer.SetU32("general.quantization_version", kQuantizationVersion);
  writer.SetU32("general.file_type", static_cast<uint32_t>(o.ftype));

  const int n_threads = runtime::ResolveThreads(o.n_threads);
  auto pool = std::make_shared<ThreadPool>(n_threads);
  auto done = std::make_shared<uint64_t>(0);
  for (size_t i = 0; i < order.size(); ++i) {
    const GgufTensor* t = order[i];
    const QuantizedTensor& q = report.tensors[i];
    const DType to = q.to;
    auto produce = [t, to, pool, done, total_elements, &o](ByteSink& sink) -> Status {
      if (t->type == to) {  // nothing to convert: copy the bytes
        RETURN_IF_ERROR(sink.Write(t->data, t->nbytes));
      } else {
        const int64_t ne0 = t->ne[0];
        const size_t in_row = RowBytes(t->type, ne0);
        const DType from = t->type;
        const uint8_t* base = t->data;
        RowSource source = [from, base, in_row, ne0](int64_t r, float* out) {
          DequantizeRow(from, base + static_cast<size_t>(r) * in_row, out, ne0);
        };
        RETURN_IF_ERROR(EncodeRows(to, ne0, t->n_rows(), source, *pool, sink, [&](int64_t rows) {
          *done += static_cast<uint64_t>(rows * ne0);
          if (o.progress) o.progress(*done, total_elements);
        }));
      }
      ReleasePages(t->data, t->nbytes);
      return Status::Ok();
    };
    RETURN_IF_ERROR(writer.AddTensor(q.name, to, q.ne, produce));
  }
  RETURN_IF_ERROR(writer.Write(o.output_path));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace gemlet
