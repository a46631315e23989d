// The conversion driver: config -> metadata, checkpoint -> tensor plan -> streamed GGUF.
#include "convert/convert.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <vector>

#include "convert/gguf_metadata.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "convert/tensor_plan.h"
#include "gguf/gguf_writer.h"

#if defined(GEMLET_CONVERT_HAS_HF_TOKENIZER)
#include "tokenizer/hf_tokenizer_json.h"
#endif

namespace gemlet {

namespace {

// Rows are converted in batches of about this many bytes of f32, so the writer sees few large writes.
constexpr size_t kBatchBytes = size_t{1} << 20;

// Drops the pages of a tensor already written from this process's mapping, so converting a checkpoint
// larger than RAM never keeps more than the current tensor resident (they are re-read if touched).
void ReleasePages(const StTensor& t) {
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data) + kPage - 1) / kPage * kPage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.nbytes) / kPage * kPage;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// llama.cpp's "auto" looks at the first tensor of two or more dimensions; so do we, keeping its type.
DType DefaultOutType(const std::vector<PlannedTensor>& plan) {
  for (const PlannedTensor& p : plan) {
    if (p.sources.empty() || p.ne.size() < 2 || p.sources[0] == nullptr) continue;
    switch (p.sources[0]->dtype) {
      case StDType::kBF16: return DType::kBF16;
      case StDType::kF16: return DType::kF16;
      default: return DType::kF32;
    }
  }
  return DType::kF32;
}

std::string FolderName(const std::string& dir) {
  std::filesystem::path p(dir);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  std::string name = std::filesystem::absolute(p).lexically_normal().filename().string();
  return name.empty() ? "model" : name;
}

}  // namespace

// Streams one planned tensor: source rows -> f32 (+1 for Gemma norms) -> `type`, then zero padding.
Status ProducePlannedTensor(const PlannedTensor& p, DType type, ByteSink& sink) {
  const int64_t n = p.ne[0];
  const size_t out_row = RowBytes(type, n);
  const int64_t batch = std::max<int64_t>(1, static_cast<int64_t>(kBatchBytes / (static_cast<size_t>(n) * sizeof(float))));
  std::vector<float> rows(static_cast<size_t>(batch * n));
  std::vector<uint8_t> out(static_cast<size_t>(batch) * out_row);
  auto emit = [&](int64_t count) {
    for (int64_t r = 0; r < count; ++r) {
      QuantizeRow(type, rows.data() + r * n, out.data() + static_cast<size_t>(r) * out_row, n);
    }
    return sink.Write(out.data(), static_cast<size_t>(count) * out_row);
  };

  if (!p.generated_i32.empty()) {  // an index table: written as it is
    return sink.Write(reinterpret_cast<const uint8_t*>(p.generated_i32.data()), p.generated_i32.size() * sizeof(int32_t));
  }
  if (!p.generated.empty()) {
    const int64_t n_rows = static_cast<int64_t>(p.generated.size()) / n;
    for (int64_t r0 = 0; r0 < n_rows; r0 += batch) {
      const int64_t count = std::min(batch, n_rows - r0);
      std::copy_n(p.generated.begin() + r0 * n, count * n, rows.begin());
      RETURN_IF_ERROR(emit(count));
    }
    return Status::Ok();
  }
  for (const StTensor* src : p.sources) {
    const int64_t n_rows = src->n_rows();
    for (int64_t r0 = 0; r0 < n_rows; r0 += batch) {
      const int64_t count = std::min(batch, n_rows - r0);
      for (int64_t r = 0; r < count; ++r) src->ReadRowF32(r0 + r, rows.data() + r * n);
      if (p.add_one) {
        // ref: GemmaRMSNorm's (1 + w), added in f32 as the converter does (np.float32(w) + 1).
        for (int64_t i = 0; i < count * n; ++i) rows[static_cast<size_t>(i)] += 1.0f;
      }
      RETURN_IF_ERROR(emit(count));
    }
    ReleasePages(*src);
  }
  std::fill(rows.begin(), rows.end(), 0.0f);
  for (int64_t r0 = 0; r0 < p.pad_rows; r0 += batch) RETURN_IF_ERROR(emit(std::min(batch, p.pad_rows - r0)));
  return Status::Ok();
}

Result<DType> ParseOutType(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (lower == "f32") return DType::kF32;
  if (lower == "f16") return DType::kF16;
  if (lower == "bf16") return DType::kBF16;
  return Status::Error("unknown output type '" + name + "' (choose f32, f16 or bf16)");
}

uint32_t FileTypeOf(DType outtype) {
  switch (outtype) {
    case DType::kF16: return 1;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

Result<ConvertResult> ConvertHfToGguf(const ConvertOptions& o) {
  namespace fs = std::filesystem;
  ASSIGN_OR_RETURN(HfConfig config, LoadHfConfig(o.hf_dir));

  std::unique_ptr<SafetensorsCheckpoint> checkpoint;
  if (!o.weights_path.empty()) {
    ASSIGN_OR_RETURN(checkpoint, SafetensorsCheckpoint::Open(o.weights_path));
  } else {
    ASSIGN_OR_RETURN(checkpoint, SafetensorsCheckpoint::OpenDir(o.hf_dir));
  }
  // The plan points into the checkpoint's maps; both live until the file is written.
  ASSIGN_OR_RETURN(std::vector<PlannedTensor> plan, PlanTensors(config, *checkpoint));

  ConvertResult result;
  result.arch = config.arch;
  result.outtype = o.outtype.value_or(DefaultOutType(plan));
  if (result.outtype != DType::kF32 && result.outtype != DType::kF16 && result.outtype != DType::kBF16) {
    return Status::Error(std::string("unsupported output type ") + DTypeName(result.outtype) + " (choose f32, f16 or bf16)");
  }

  GgufWriter writer;
  WriteGeneralMetadata(config, o.model_name.empty() ? FolderName(o.hf_dir) : o.model_name, FileTypeOf(result.outtype),
                       writer);
  RETURN_IF_ERROR(WriteModelMetadata(config, writer).WithContext(o.hf_dir + "/config.json"));

  std::error_code ec;
  std::string tokenizer = o.tokenizer_path;
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    if (tokenizer.empty() && fs::is_regular_file(fs::path(o.hf_dir) / name, ec)) tokenizer = (fs::path(o.hf_dir) / name).string();
  }
  if (!tokenizer.empty()) {
#if defined(GEMLET_CONVERT_HAS_HF_TOKENIZER)
    RETURN_IF_ERROR(AddTokenizerMetadata(tokenizer, o.hf_dir, config.arch, writer));
    result.tokenizer_source = tokenizer;
#else
    return Status::Error("'" + tokenizer + "' gives the vocabulary, but this gemlet was built without the tokenizer reader");
#endif
  } else {
    WritePlaceholderVocab(config, writer);
    result.placeholder_vocab = true;
    if (o.warn) {
      o.warn("no tokenizer.json or tokenizer.model in '" + o.hf_dir + "': writing a placeholder vocabulary of " +
             std::to_string(config.vocab_size) + " pieces (<pad> <eos> <bos> <unk> <t4>...)");
    }
  }

  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor* p = &plan[i];
    const DType type = !p->generated_i32.empty() ? DType::kI32 : p->keep_f32 ? DType::kF32 : result.outtype;
    auto producer = [p, type, i, n = plan.size(), &o](ByteSink& sink) -> Status {
      if (o.progress) o.progress(i, n, p->name);
      return ProducePlannedTensor(*p, type, sink).WithContext(p->hf_name.empty() ? p->name : p->hf_name);
    };
    RETURN_IF_ERROR(writer.AddTensor(p->name, type, p->ne, producer));
  }
  RETURN_IF_ERROR(writer.Write(o.output_path));
  result.n_tensors = plan.size();
  return result;
}

}  // namespace gemlet
