// llama.cpp's half of the Gemma 3n vision cross-check (mnv5_vs_llamacpp.sh builds it against a
// llama.cpp checkout and its build): the mmproj gemlet wrote, the raw 768 x 768 RGB bytes of the test
// PNG as byte / 255 (the f32 image clip_image_encode takes: no resize, mean 0, std 1), llama.cpp's
// MobileNet-V5 graph, its embeddings as MTMD_DEBUG_EMBEDDINGS dumps them; then the comparison with
// gemlet's dump of the same image.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "clip-impl.h"
#include "clip.h"
#include "ggml-backend.h"

namespace {

std::vector<float> ReadDump(const std::string& path, int* n_tokens, int* n_embd) {
  std::ifstream in(path, std::ios::binary);
  int32_t header[2] = {0, 0};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  *n_tokens = header[0];
  *n_embd = header[1];
  std::vector<float> v(static_cast<size_t>(header[0]) * header[1]);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!in) v.clear();
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MMPROJ IMAGE.rgb SIDE LLAMA_DUMP GEMLET_DUMP...\n", argv[0]);
    return 2;
  }
  const std::string mmproj = argv[1], rgb_path = argv[2], dump = argv[4];
  const int side = std::atoi(argv[3]);
  std::ifstream in(rgb_path, std::ios::binary);
  const std::vector<unsigned char> rgb((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (rgb.size() != static_cast<size_t>(side) * side * 3) {
    std::fprintf(stderr, "%s: %zu bytes, not %d x %d RGB\n", rgb_path.c_str(), rgb.size(), side, side);
    return 1;
  }
  setenv("MTMD_DEBUG_EMBEDDINGS", dump.c_str(), 1);
  // The CPU backend is a loadable module in llama.cpp's build: from LLAMA_BACKEND_DIR (the script sets
  // it to build/bin), else where ggml looks by default.
  if (const char* dir = std::getenv("LLAMA_BACKEND_DIR")) {
    ggml_backend_load_all_from_path(dir);
  } else {
    ggml_backend_load_all();
  }
  clip_context_params params{};
  params.use_gpu = false;
  params.warmup = false;
  clip_init_result ctx = clip_init(mmproj.c_str(), params);
  if (ctx.ctx_v == nullptr) {
    std::fprintf(stderr, "llama.cpp could not load %s\n", mmproj.c_str());
    return 1;
  }
  std::vector<float> pixels(rgb.size());
  for (size_t i = 0; i < rgb.size(); ++i) pixels[i] = static_cast<float>(rgb[i]) / 255.0f;
  clip_image_f32 image;
  image.set_size({side, side}, false, false);
  image.cpy_buf(pixels);
  std::vector<float> out;
  if (!clip_image_encode(ctx.ctx_v, 4, &image, out)) {
    std::fprintf(stderr, "clip_image_encode failed\n");
    return 1;
  }
  clip_free(ctx.ctx_v);
  if (ctx.ctx_a != nullptr) clip_free(ctx.ctx_a);
  int nt = 0, ne = 0;
  const std::vector<float> want = ReadDump(dump, &nt, &ne);
  if (want.empty()) {
    std::fprintf(stderr, "no dump at %s\n", dump.c_str());
    return 1;
  }
  double lo = want[0], hi = want[0];
  for (float v : want) lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
  std::printf("llama.cpp: %d tokens x %d, range [%.4f, %.4f]\n", nt, ne, lo, hi);
  int status = 0;
  for (int a = 5; a < argc; ++a) {
    int gt = 0, ge = 0;
    const std::vector<float> got = ReadDump(argv[a], &gt, &ge);
    if (gt != nt || ge != ne || got.size() != want.size()) {
      std::printf("%s: shape %d x %d differs\n", argv[a], gt, ge);
      status = 1;
      continue;
    }
    double worst = 0, sum = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::fabs(double{got[i]} - want[i]);
      worst = std::max(worst, d);
      sum += d;
    }
    std::printf("%s: max |diff| %.3e (%.2e of the range), mean |diff| %.3e\n", argv[a], worst, worst / (hi - lo),
                sum / static_cast<double>(got.size()));
  }
  return status;
}
