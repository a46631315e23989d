// `gemlet polish | summarize | rewrite | translate | explain | sql | describe | transcribe`: the task
// presets (include/gemlet/tasks.hpp) as shell filters. Text comes from stdin, -f FILE or --clipboard;
// describe takes an image and transcribe a clip (FILE, needs --mmproj; a long one in pieces cut at its
// pauses), translate either (--image, --audio) instead of text;
// stdout gets the result alone, so `vim :%!gemlet polish` and pipes work. Exit codes: kExitHelp.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "cli_common.h"
#include "command.h"
#include "gemlet/tasks.hpp"

namespace gemlet::cli {
namespace {

// The exit codes, as --help and docs/tasks.md give them: an answer that breaks the contract is never
// printed as a result (--lenient prints it, with a warning per breach).
constexpr const char* kExitHelp =
    "Exit codes: 0 the result; 1 a model or input error (empty input, an unreadable file, an input too long); 2 a usage "
    "error; and when the answer breaks the contract (nothing on stdout, one line per breach on stderr): 3 not a result "
    "(empty, a lead-in left, cut off at -n, a polish or rewrite that keeps under a third of the input's words), 4 in another language than asked, 5 a glossary term missing.";

int ExitCodeOf(TaskViolationKind kind) {
  switch (kind) {
    case TaskViolationKind::kNotAResult:
    case TaskViolationKind::kIncomplete:
    case TaskViolationKind::kUnrelated: return 3;
    case TaskViolationKind::kLanguage: return 4;
    case TaskViolationKind::kGlossary: return 5;
  }
  return 3;
}

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(std::string("cannot read the ") + what + " '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The clipboard through whichever of the usual tools is installed.
Result<std::string> ReadClipboard() {
  for (const char* cmd : {"wl-paste --no-newline", "xclip -selection clipboard -o", "pbpaste"}) {
    const std::string tool(cmd, std::string_view(cmd).find(' ') == std::string_view::npos ? std::string_view(cmd).size()
                                                                                         : std::string_view(cmd).find(' '));
    if (std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) != 0) continue;
    std::FILE* p = ::popen((std::string(cmd) + " 2>/dev/null").c_str(), "r");
    if (p == nullptr) continue;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
    if (::pclose(p) != 0) return Status::Error("'" + tool + "' could not read the clipboard");
    return text;
  }
  return Status::Error("--clipboard needs wl-paste, xclip or pbpaste, and none is installed");
}

// The task's media: the images, then each clip in the pieces the model hears (one for a clip within
// its 30 s window; RunTask transcribes or translates a long one piece by piece).
Result<std::vector<std::shared_ptr<const EncodedMedia>>> TaskMedia(const Engine& engine, const ModelOptions& mo,
                                                                   MediaFlags media, const AudioOptions& audio) {
  const std::vector<std::string> clips = std::move(media.audio);
  media.audio.clear();
  auto parts = EncodeMedia(engine, mo, media);
  if (!parts.ok()) return parts.status();
  std::vector<std::shared_ptr<const EncodedMedia>> out;
  for (const ContentPart& part : parts.value()) out.push_back(part.media);
  for (const std::string& path : clips) {
    auto pieces = engine.EncodeAudioPiecesFile(path, audio);
    if (!pieces.ok()) return pieces.status();
    for (const AudioPiece& piece : pieces.value()) out.push_back(piece.media);
  }
  return out;
}

int RunTaskCommand(const std::string& task, int argc, char** argv) {
  CLI::App app{TaskSummary(task) + ".\nReads stdin (or -f FILE, or --clipboard) and prints the result alone; the answer is "
               "in the input's language (English, Simplified or Traditional Chinese) unless --to says otherwise"};
  app.footer(kExitHelp);
  app.name("gemlet " + task);
  ModelOptions mo;
  GenerationFlags gf;
  gf.sampling.temperature = 0;  // a filter: the same input gives the same output (--temp to sample)
  gf.max_tokens = 1024;
  TaskOptions to;
  to.task = task;
  std::string file, glossary_file, schema_file;
  bool clipboard = false, glossary_strict = false, lenient = false;
  AddModelOptions(app, &mo);
  AddGenerationOptions(app, &gf);
  app.get_option("--spec")->default_str("none, or lookup where 'gemlet bench --spec lookup' measured a gain on this CPU and model");
  // The media tasks: the image or clip is the input; words of the user's are optional (-p).
  const bool media_task = task == "describe" || task == "transcribe";
  MediaFlags media;
  std::string media_file, request;
  if (media_task) {
    app.add_option("file", media_file,
                   task == "describe" ? "the image (PNG, JPEG, WebP, HEIC)"
                                      : "the clip (WAV, FLAC, Ogg, MP3; a clip over the model's 30 s is cut at its pauses "
                                        "and transcribed piece by piece)")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("-p,--prompt", request, "what to look or listen for, in words (default: the task's own request)");
  } else if (task == "translate") {
    AddMediaFlags(app, &media);
  }
  auto* from_file = app.add_option("-f,--file", file, "read the text from FILE instead of stdin");
  app.add_flag("--clipboard", clipboard, "read the text from the clipboard (wl-paste, xclip or pbpaste)")->excludes(from_file);
  app.add_option("--glossary", glossary_file,
                 "TSV of terms to keep verbatim (translate: to render as given): term<TAB>rendering[<TAB>note]");
  app.add_flag("--glossary-strict", glossary_strict, "the default now: a missing glossary term fails (exit 5)")->group("");
  app.add_flag("--lenient", lenient,
               "print the answer even when it breaks the contract (a lead-in left, cut off, unrelated to the input, "
               "another language, a glossary term missing): a warning line per breach on stderr, exit 0");
  AudioOptions audio;
  if (task == "transcribe" || task == "translate") {
    app.add_option("--max-audio-seconds", audio.max_seconds, "refuse a clip longer than this")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
  }
  if (task == "rewrite") app.add_option("--style", to.style, "formal (default), casual or concise");
  if (task == "translate") {
    app.add_option("--to", to.to, "the language to translate into: zh, zh-Hant, en, ja, ko, fr, de, es, ...")->required();
  } else {
    app.add_option("--to", to.to, "answer in this language instead of the input's (en, zh, zh-Hant, ...)");
  }
  if (task == "sql") app.add_option("--schema", schema_file, "a file with the tables (CREATE TABLE statements or a description)");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  // The tasks copy much of their input, so lookup drafts are often right, but a step that verifies
  // them costs more than a decode step: only a measurement on this CPU and model turns it on.
  if (gf.spec.empty() && gf.draft_model.empty()) gf.default_spec = MeasuredSpeculation(mo);
  if (std::string err = SettleSpeculation(&gf); !err.empty()) return UsageError(err);
  to.generate = MakeGenerateOptions(gf);
  to.thinking = gf.think;
  if (std::string err = Validate(to.generate); !err.empty()) return UsageError(err);

  if (media_task) (task == "describe" ? media.images : media.audio).push_back(media_file);
  if (Status s = SettleMmproj(&mo); !s.ok()) return Fail(s);
  if (!media.empty() && mo.mmproj.empty()) {
    return UsageError("gemlet " + task + " needs the model's towers: --mmproj FILE|NAME (a catalog model pulled by name brings NAME-mmproj)");
  }
  std::string input;
  if (!media.empty() && file.empty() && !clipboard) {
    input = request;  // the image or clip is the input; stdin is not read
  } else if (clipboard) {
    Result<std::string> text = ReadClipboard();
    if (!text.ok()) return Fail(text.message());
    input = std::move(text).value();
  } else if (!file.empty()) {
    Result<std::string> text = ReadFile(file, "input file");
    if (!text.ok()) return Fail(text.message());
    input = std::move(text).value();
  } else {
    input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  if (media.empty() && input.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Fail("the input is empty: pipe the text in, or give -f FILE or --clipboard");
  }
  if (!glossary_file.empty()) {
    Result<std::string> g = ReadFile(glossary_file, "glossary");
    if (!g.ok()) return Fail(g.message());
    to.glossary = std::move(g).value();
  }
  if (!schema_file.empty()) {
    Result<std::string> s = ReadFile(schema_file, "schema file");
    if (!s.ok()) return Fail(s.message());
    to.schema = std::move(s).value();
  }

  auto loaded = LoadForGeneration(mo);
  if (!loaded.ok()) return Fail(loaded.message());
  if (Status s = AttachDraftModel(gf, mo, &loaded.value()); !s.ok()) return Fail(s.message());
  auto session = Session::Create(loaded.value().engine, loaded.value().session);
  if (!session.ok()) return Fail(session.message());
  auto task_media = TaskMedia(*loaded.value().engine, mo, media, audio);
  if (!task_media.ok()) return Fail(task_media.message());
  to.media = std::move(task_media).value();
  Result<TaskReply> reply = RunTask(*session.value(), input, to);
  if (!reply.ok()) return Fail(reply.status());
  if (gf.stats) {
    const GenerationStats& st = reply->stats;
    std::fprintf(stderr,
                 "[%s] input %s, answered in %s, %d part%s, %d tokens in, %d out, decode %.1f tok/s, %s: %d steps, "
                 "%d drafted, %d kept\n",
                 task.c_str(), reply->input_language.c_str(), reply->answer_language.c_str(), reply->parts,
                 reply->parts == 1 ? "" : "s", st.prompt_tokens, st.generated_tokens, st.decode_tokens_per_second,
                 gf.spec.c_str(), st.draft_steps, st.drafted_tokens, st.accepted_tokens);
  }
  int code = 0;
  for (const TaskViolation& v : reply->violations) {
    std::fprintf(stderr, "gemlet %s: %s: %s\n", task.c_str(), lenient ? "warning" : "error", v.detail.c_str());
    if (code == 0 || ExitCodeOf(v.kind) < code) code = ExitCodeOf(v.kind);
  }
  if (code != 0 && (!lenient || reply->output.empty())) return code;
  std::fwrite(reply->output.data(), 1, reply->output.size(), stdout);
  std::fputc('\n', stdout);
  return std::fflush(stdout) == 0 ? 0 : Fail("cannot write the result to stdout");
}

int RunPolish(int argc, char** argv) { return RunTaskCommand("polish", argc, argv); }
int RunSummarize(int argc, char** argv) { return RunTaskCommand("summarize", argc, argv); }
int RunRewrite(int argc, char** argv) { return RunTaskCommand("rewrite", argc, argv); }
int RunTranslate(int argc, char** argv) { return RunTaskCommand("translate", argc, argv); }
int RunExplain(int argc, char** argv) { return RunTaskCommand("explain", argc, argv); }
int RunSql(int argc, char** argv) { return RunTaskCommand("sql", argc, argv); }
int RunDescribe(int argc, char** argv) { return RunTaskCommand("describe", argc, argv); }
int RunTranscribe(int argc, char** argv) { return RunTaskCommand("transcribe", argc, argv); }

}  // namespace

GEMLET_COMMAND("polish", "fix grammar, spelling and phrasing of stdin's text (a filter)", RunPolish);
GEMLET_COMMAND("summarize", "summarize stdin's text in short bullets (long texts in parts)", RunSummarize);
GEMLET_COMMAND("rewrite", "rewrite stdin's text in another style (--style formal|casual|concise)", RunRewrite);
GEMLET_COMMAND("translate", "translate stdin's text (--to zh|zh-Hant|en|ja|...)", RunTranslate);
GEMLET_COMMAND("explain", "explain a maths step, a term or some code from stdin", RunExplain);
GEMLET_COMMAND("sql", "write one SQL query for what stdin asks (--schema FILE)", RunSql);
GEMLET_COMMAND("describe", "describe an image: what it shows and the text in it (needs --mmproj)", RunDescribe);
GEMLET_COMMAND("transcribe", "the words spoken in an audio clip as text (--to LANG translates; needs --mmproj)",
               RunTranscribe);

}  // namespace gemlet::cli
