// Runs the fuzz target over files and folders of inputs without libFuzzer (any compiler; a ctest).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
int RunOne(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // An exact-size heap copy, so a sanitizer build catches any read past the end.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() + (bytes.empty() ? 1 : 0)]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  return LLVMFuzzerTestOneInput(copy.get(), bytes.size());
}
}  // namespace

int main(int argc, char** argv) {
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) ran += RunOne(f) == 0;
    } else if (std::filesystem::is_regular_file(arg)) {
      ran += RunOne(arg) == 0;
    } else {
      std::fprintf(stderr, "replay: no such input '%s'\n", argv[i]);
      return 1;
    }
  }
  std::printf("replayed %d inputs through the fuzz target\n", ran);
  return ran > 0 ? 0 : 1;
}
