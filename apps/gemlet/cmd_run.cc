// `gemlet run`: one prompt in (from -p or stdin), the streamed answer out. Works as a shell filter.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>

#include "cli_common.h"
#include "command.h"

namespace gemlet::cli {
namespace {

int RunRun(int argc, char** argv) {
  CLI::App app{"Generate an answer to one prompt (from -p, or stdin when -p is absent)"};
  app.name("gemlet run");
  ModelOptions mo;
  GenerationFlags gf;
  std::string prompt, system;
  MediaFlags media;
  bool raw = false, have_prompt = false;
  AddModelOptions(app, &mo);
  AddGenerationOptions(app, &gf);
  AddMediaFlags(app, &media);
  app.add_option("-p,--prompt", prompt, "the prompt (default: read stdin)")->each([&](const std::string&) { have_prompt = true; });
  app.add_option("--system", system, "system instruction (e.g. \"Rewrite this more formally\")");
  app.add_flag("--raw", raw, "send the prompt as is, without the chat template");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = SettleSpeculation(&gf); !err.empty()) return UsageError(err);
  const GenerateOptions go = MakeGenerateOptions(gf);
  if (std::string err = Validate(go); !err.empty()) return UsageError(err);
  if (std::string err = Validate(mo.kernels); !err.empty()) return UsageError(err);
  if (!have_prompt) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (prompt.empty() && system.empty() && media.empty()) return Fail("the prompt is empty (give -p TEXT or pipe text in)");
  if (Status s = SettleMmproj(&mo); !s.ok()) return Fail(s);
  if (!media.empty() && mo.mmproj.empty()) return UsageError("--image and --audio need the model's towers: --mmproj FILE|NAME (a catalog model pulled by name brings NAME-mmproj)");
  if (raw && !system.empty()) return UsageError("--system has no effect with --raw");

  auto loaded = LoadForGeneration(mo);
  if (!loaded.ok()) return Fail(loaded.message());
  if (Status s = AttachDraftModel(gf, mo, &loaded.value()); !s.ok()) return Fail(s.message());
  const LoadedModel& m = loaded.value();
  auto parts = EncodeMedia(*m.engine, mo, media);
  if (!parts.ok()) return Fail(parts.message());
  if (!prompt.empty() || media.empty()) parts.value().push_back({raw ? prompt : (prompt.empty() ? system : prompt), nullptr});
  const bool color = StdoutIsTerminal();
  const StreamCallback print = [&](ChunkKind kind, std::string_view text) { return PrintChunk(gf, color, kind, text); };
  // The session (or conversation) lives until the stats are printed: its KV cache counts in
  // "memory now".
  std::unique_ptr<Session> session;
  std::unique_ptr<Conversation> chat;
  Result<Reply> reply = Status::Error("unreachable");
  if (raw) {
    auto created = Session::Create(m.engine, m.session);
    if (!created.ok()) return Fail(created.message());
    session = std::move(created).value();
    if (gf.stats) std::fputs(session->memory_plan().text.c_str(), stderr);
    auto tokens = m.engine->TokenizePrompt(parts.value(), {.add_special = true});
    if (!tokens.ok()) return Fail(tokens.message());
    reply = session->Generate(tokens.value(), go, print);
  } else {
    ConversationOptions co;
    co.system = system;
    co.thinking = gf.think;
    auto created = OpenConversation(m, co);
    if (!created.ok()) return Fail(created.message());
    chat = std::move(created).value();
    if (gf.stats) std::fputs(chat->memory_plan().text.c_str(), stderr);
    // A system instruction with no prompt text is allowed: the instruction is the whole request.
    reply = media.empty() ? chat->Send(prompt.empty() ? system : prompt, go, print) : chat->Send(parts.value(), go, print);
  }
  if (!reply.ok()) return Fail(reply.message());
  if (color || !reply->text.empty()) std::fputs("\n", stdout);
  if (gf.stats) PrintStats(*m.engine, *reply);
  return 0;
}

}  // namespace

GEMLET_COMMAND("run", "generate an answer to one prompt (-p or stdin), streamed to stdout", RunRun);

}  // namespace gemlet::cli
