// One answer over gemlet's C++ API: `generate MODEL.gguf PROMPT...` streams the model's reply to the
// prompt to stdout, then prints the turn's speed to stderr.
#include <gemlet/gemlet.hpp>

#include <cstdio>
#include <string>
#include <string_view>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT...\n", argv[0]);
    return 2;
  }
  std::string prompt = argv[2];
  for (int i = 3; i < argc; ++i) prompt += std::string(" ") + argv[i];

  auto engine = gemlet::Engine::Load(argv[1]);
  if (!engine.ok()) {
    std::fprintf(stderr, "generate: %s\n", engine.message().c_str());
    return 1;
  }
  auto conversation = gemlet::Conversation::Create(*engine);
  if (!conversation.ok()) {
    std::fprintf(stderr, "generate: %s\n", conversation.message().c_str());
    return 1;
  }
  gemlet::GenerateOptions options;
  options.sampling.temperature = 0;  // greedy: the same answer on every run
  auto reply = (*conversation)->Send(prompt, options, [](gemlet::ChunkKind kind, std::string_view text) {
    if (kind != gemlet::ChunkKind::kText) return true;  // a Gemma 4 thought is not the answer
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);  // show each piece as it comes
    return true;
  });
  std::printf("\n");
  if (!reply.ok()) {
    std::fprintf(stderr, "generate: %s\n", reply.message().c_str());
    return 1;
  }
  const gemlet::GenerationStats& stats = reply->stats;
  std::fprintf(stderr, "[%d prompt tokens, %d generated, %.1f tokens/s, stop: %s]\n", stats.prompt_tokens,
               stats.generated_tokens, stats.decode_tokens_per_second, gemlet::StopReasonName(stats.stop));
  return 0;
}
