// `gemlet run`: one prompt in (from -p or stdin), the streamed answer out. Works as a shell filter.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>

#include "cli_common.h"
#include "command.h"
#include "runtime/chat.h"

namespace gemlet::cli {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

int RunRun(int argc, char** argv) {
  CLI::App app{"Generate an answer to one prompt (from -p, or stdin when -p is absent)"};
  app.name("gemlet run");
  ModelOptions mo;
  GenerationFlags gf;
  std::string prompt, system;
  bool raw = false, have_prompt = false;
  AddModelOptions(app, &mo);
  AddGenerationOptions(app, &gf);
  app.add_option("-p,--prompt", prompt, "the prompt (default: read stdin)")->each([&](const std::string&) { have_prompt = true; });
  app.add_option("--system", system, "system instruction (e.g. \"Rewrite this more formally\")");
  app.add_flag("--raw", raw, "send the prompt as is, without the chat template");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = gf.sampling.Validate(); !err.empty()) return UsageError(err);
  if (!have_prompt) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (prompt.empty() && system.empty()) return Fail("the prompt is empty (give -p TEXT or pipe text in)");
  if (raw && !system.empty()) return UsageError("--system has no effect with --raw");

  auto loaded = LoadForGeneration(mo, gf.stats);
  if (!loaded.ok()) return Fail(loaded.message());
  LoadedModel& m = loaded.value();
  const bool color = StdoutIsTerminal();
  TextSink sink = [&](std::string_view text, TextKind kind) {
    const bool thought = kind == TextKind::kThought;
    if (thought && !gf.show_thinking) return true;
    if (thought && color) std::fputs("\033[2m", stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (thought && color) std::fputs("\033[0m", stdout);
    std::fflush(stdout);
    return true;
  };
  GenerateOptions go = MakeGenerateOptions(gf);
  Result<GenerateResult> result = Status::Error("unreachable");
  std::optional<ChatSession> chat;  // lives until the stats are printed: its KV cache counts in "memory now"
  if (raw) {
    const Tokenizer& tok = m.engine->tokenizer();
    EncodeOptions e;
    e.add_bos = true;
    std::vector<int32_t> tokens = tok.Encode(prompt, e);
    Sampler sampler(gf.sampling, m.engine->config().n_vocab);
    go.stop_at_end_of_turn = true;
    result = Generate(*m.session, sampler, tokens, go, sink);
  } else {
    chat.emplace(std::move(m.session), gf.sampling);
    chat->SetSystem(system);
    chat->SetThinking(gf.think);
    // A system instruction with no prompt text is allowed: the instruction is the whole request.
    result = chat->Send(prompt.empty() ? system : prompt, go, sink);
  }
  if (!result.ok()) return Fail(result.message());
  if (color || !result.value().text.empty()) std::fputs("\n", stdout);
  if (gf.stats) PrintStats(m, result.value());
  return 0;
}

}  // namespace

GEMLET_COMMAND("run", "generate an answer to one prompt (-p or stdin), streamed to stdout", RunRun);

}  // namespace gemlet::cli
