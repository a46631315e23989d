// libFuzzer target for the safetensors reader behind `gemlet convert`: any file parses or is
// refused with a message; what parses has tensors whose bytes lie inside the input, match their
// shapes, and read back as f32 without leaving it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "convert/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gemlet::SafetensorsFile::Parse(data, size, "model.safetensors");
  if (!file.ok()) {
    if (file.message().empty()) std::abort();
    return 0;
  }
  for (const gemlet::StTensor& t : (*file)->tensors()) {
    if (t.data < data || t.data + t.nbytes > data + size) std::abort();
    if (static_cast<size_t>(t.n_elements()) * gemlet::StDTypeSize(t.dtype) != t.nbytes) std::abort();
    if (!gemlet::StDTypeIsConvertible(t.dtype) || t.n_rows() == 0 || t.row_length() > (1 << 16)) continue;
    std::vector<float> row(static_cast<size_t>(t.row_length()));
    t.ReadRowF32(0, row.data());
    t.ReadRowF32(t.n_rows() - 1, row.data());
  }
  return 0;
}
