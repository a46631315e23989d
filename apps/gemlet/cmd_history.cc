// `gemlet history`: the conversations kept with `chat --history` or /keep: list, search, show,
// resume, rm, export.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "chat_history.h"
#include "command.h"

namespace gemlet::cli {
namespace {

std::string LocalTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// `history resume ID [chat flags]` is `chat --resume ID [chat flags]`: one chat loop for both.
int Resume(int argc, char** argv) {
  if (argc < 3 || argv[2][0] == '-') {
    if (argc >= 3 && (!std::strcmp(argv[2], "--help") || !std::strcmp(argv[2], "-h"))) {
      std::printf("gemlet history resume ID [chat options]: go on with a kept conversation in 'gemlet chat' "
                  "(see 'gemlet chat --help'); its new turns are kept too\n");
      return 0;
    }
    return UsageError("history resume: needs the ID of a kept conversation (see 'gemlet history list')");
  }
  for (const Command& c : Commands()) {
    if (std::strcmp(c.name, "chat") != 0) continue;
    std::vector<char*> args = {const_cast<char*>("chat"), const_cast<char*>("--resume"), argv[2]};
    for (int i = 3; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    return c.run(static_cast<int>(args.size()) - 1, args.data());
  }
  return Fail("this gemlet has no chat command");
}

int RunHistory(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "resume")) return Resume(argc, argv);
  CLI::App app{"The conversations kept with 'gemlet chat --history' or /keep (nothing else is recorded)"};
  app.name("gemlet history");
  app.require_subcommand(1);
  HistoryFlags flags;
  int64_t id = 0;
  std::vector<std::string> words;
  std::string format = "md", output;
  CLI::App* list = app.add_subcommand("list", "the kept conversations, the latest first");
  CLI::App* search = app.add_subcommand("search", "messages with all these words (Chinese words of any length too)");
  search->add_option("TEXT", words, "words to find")->required();
  CLI::App* show = app.add_subcommand("show", "one conversation as Markdown");
  CLI::App* rm = app.add_subcommand("rm", "delete a conversation (its text does not linger in the file)");
  CLI::App* exp = app.add_subcommand("export", "write a conversation as Markdown or JSON ('/load FILE' in a chat reads the JSON)");
  exp->add_option("--format", format, "md or json")->check(CLI::IsMember({"md", "json"}));
  exp->add_option("-o,--output", output, "file to write (default: stdout)");
  app.add_subcommand("resume", "go on with a conversation in a chat: resume ID [chat options]");
  for (CLI::App* sub : {show, rm, exp}) sub->add_option("ID", id, "conversation number (from list)")->required()->check(Positive());
  for (CLI::App* sub : {list, search, show, rm, exp}) AddHistoryStoreFlags(*sub, &flags);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;

  // A store that does not exist is not made by looking at it.
  if (list->parsed() && !std::filesystem::exists(HistoryPath(flags))) {
    std::fputs("(no conversations kept: 'gemlet chat --history' or /keep in a chat keeps one)\n", stderr);
    return 0;
  }
  auto opened = OpenHistory(flags, /*create=*/false);
  if (!opened.ok()) return Fail(opened.status());
  HistoryStore& store = **opened;

  if (list->parsed()) {
    auto all = store.List();
    if (!all.ok()) return Fail(all.status());
    if (all->empty()) std::fputs("(no conversations kept)\n", stderr);
    for (const ConversationSummary& c : *all) {
      std::printf("%5lld  %s  %3d messages  %s\n", static_cast<long long>(c.id), LocalTime(c.updated_at).c_str(),
                  c.message_count, c.title.empty() ? "(untitled)" : c.title.c_str());
    }
    return 0;
  }
  if (search->parsed()) {
    std::string text;
    for (const std::string& w : words) text += (text.empty() ? "" : " ") + w;
    auto hits = store.Search(text);
    if (!hits.ok()) return Fail(hits.status());
    if (hits->empty()) std::fputs("(no matches)\n", stderr);
    for (const SearchHit& h : *hits) {
      std::printf("%5lld  %-9s  %s\n", static_cast<long long>(h.conversation_id), h.role.c_str(), h.snippet.c_str());
    }
    return 0;
  }
  if (rm->parsed()) {
    if (Status s = store.Remove(id); !s.ok()) return Fail(s);
    std::fprintf(stderr, "(removed conversation %lld)\n", static_cast<long long>(id));
    return 0;
  }
  auto text = show->parsed() || format == "md" ? store.ExportMarkdown(id) : store.ExportJson(id);
  if (!text.ok()) return Fail(text.status());
  if (output.empty()) {
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  std::ofstream out(output, std::ios::binary);
  out << *text;
  if (!out.flush()) return Fail("cannot write '" + output + "'");
  std::fprintf(stderr, "(conversation %lld written to %s)\n", static_cast<long long>(id), output.c_str());
  return 0;
}

}  // namespace

GEMLET_COMMAND("history", "the conversations you kept: list, search TEXT, show ID, resume ID, rm ID, export ID", RunHistory);

}  // namespace gemlet::cli
