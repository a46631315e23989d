// The server's audio: a chat's input_audio parts encoded into their messages (a long clip's pieces in
// a row), and POST /v1/audio/transcriptions: the uploaded clip cut into the pieces the model hears,
// each transcribed as RunTask's transcribe preset transcribes it (TaskMessages, TaskChatPrompt,
// FinishTaskOutput) in the batched slots, side by side, and the texts joined (JoinTranscripts).
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "gemlet/tasks.hpp"
#include "server/admission.h"
#include "server/audio_protocol.h"
#include "server/server_impl.h"

namespace gemlet {

using nlohmann::json;
using server::ApiError;
using server::Job;
using server::MakeError;

namespace {

// A clip that cannot be used: too long (413, as the body limits are), else the request's (400).
ApiError ClipError(const Status& s, const std::string& where, const std::string& param) {
  const bool too_long = s.code() == StatusCode::kTooLarge;
  ApiError e = MakeError(too_long ? 413 : 400,
                         "'" + where + "': " + (too_long ? "the clip is too long: " : "the audio cannot be used: ") + s.message());
  e.param = param;
  return e;
}

ApiError NoAudioTower(const std::string& param) {
  ApiError e = MakeError(400, "'" + param + "': this model has no audio tower, so it cannot take audio (Gemma 4 E2B and E4B "
                              "hear: serve one with its mmproj file, gemlet serve --mmproj FILE)");
  e.param = param;
  return e;
}

// TaskMessages needs to know that the task's media is audio, not the clip itself: the form is
// checked (an unknown language) before the clip is decoded.
std::shared_ptr<const EncodedMedia> AnyClip() {
  static const std::shared_ptr<const EncodedMedia> clip = [] {
    auto m = std::make_shared<EncodedMedia>();
    m->kind = MediaKind::kAudio;
    return m;
  }();
  return clip;
}

// The form's fields as cpp-httplib parsed them.
std::vector<server::FormField> FormFields(const httplib::Request& req) {
  std::vector<server::FormField> fields;
  for (const auto& [name, f] : req.files) fields.push_back({f.name, f.filename, f.content_type, f.content});
  return fields;
}

}  // namespace

std::optional<ApiError> Server::Impl::EncodeAudio(const Engine& engine, server::CompletionRequest* r) {
  if (r->audio.empty()) return std::nullopt;
  if (!info.takes_audio) return NoAudioTower(r->audio[0].param);
  AudioOptions o;
  o.max_seconds = options.max_audio_seconds;
  std::map<std::pair<size_t, size_t>, std::vector<AudioPiece>> pieces;  // (message, part) -> the clip's pieces
  for (server::RequestAudio& clip : r->audio) {
    Result<std::vector<AudioPiece>> p = clips->Encode(engine, clip.bytes, o);
    if (!p.ok()) return ClipError(p.status(), clip.where, clip.param);
    pieces[{clip.message, clip.part}] = std::move(p).value();
    clip.bytes = std::string();  // the file is not needed any more
  }
  // Each clip's part becomes its pieces, in order (the images' parts are filled already).
  for (size_t m = 0; m < r->messages.size(); ++m) {
    std::vector<ContentPart>& parts = r->messages[m].parts;
    if (pieces.lower_bound({m, 0}) == pieces.lower_bound({m + 1, 0})) continue;
    std::vector<ContentPart> out;
    for (size_t k = 0; k < parts.size(); ++k) {
      auto it = pieces.find({m, k});
      if (it == pieces.end()) {
        out.push_back(std::move(parts[k]));
        continue;
      }
      for (const AudioPiece& piece : it->second) out.push_back({"", piece.media});
    }
    parts = std::move(out);
  }
  return std::nullopt;
}

void Server::Impl::Transcribe(const httplib::Request& req, httplib::Response& res) {
  if (!req.is_multipart_form_data()) {
    ApiError e = MakeError(400, "POST /v1/audio/transcriptions takes a multipart/form-data body with the clip in 'file', "
                                "as OpenAI's clients send it");
    e.param = "file";
    return server::SendError(res, e);
  }
  server::TranscriptionRequest t;
  if (auto e = server::ParseTranscriptionRequest(FormFields(req), limits, &t)) return server::SendError(res, *e);
  if (!info.takes_audio) return server::SendError(res, NoAudioTower("file"));
  TaskOptions task;
  task.task = "transcribe";
  task.to = t.language;
  task.media = {AnyClip()};
  Result<TaskPrompt> prompt = TaskMessages(t.prompt, task);
  if (!prompt.ok()) {
    ApiError e = MakeError(400, prompt.message());
    e.param = prompt.message().rfind("unknown language", 0) == 0 ? "language" : "prompt";
    return server::SendError(res, e);
  }
  Result<std::shared_ptr<Lease>> leased = Acquire();
  if (!leased.ok()) return server::SendError(res, MakeError(500, leased.message(), "server_error"));
  std::shared_ptr<Lease> lease = std::move(leased).value();
  const Engine& engine = *lease->engine;
  AudioOptions audio;
  audio.max_seconds = options.max_audio_seconds;
  Result<std::vector<AudioPiece>> pieces = clips->Encode(engine, t.file, audio);
  if (!pieces.ok()) return server::SendError(res, ClipError(pieces.status(), "file", "file"));
  t.file = std::string();

  // One job per piece, as RunTask would run it: room for the answer as it leaves (half the
  // context, 1024 tokens at most), greedy unless a temperature is given.
  const int room = std::min({1024, limits.max_tokens, slot_ctx / 2});
  std::vector<std::shared_ptr<Job>> jobs;
  for (const AudioPiece& piece : pieces.value()) {
    task.media = {piece.media};
    Result<gemlet::Prompt> p = TaskChatPrompt(engine, prompt.value(), task);
    if (!p.ok()) return server::SendError(res, MakeError(400, p.message()));
    if (static_cast<int>(p->tokens.size()) > slot_ctx - room) {
      ApiError e = MakeError(400, "a piece of the clip and the transcription prompt are " + std::to_string(p->tokens.size()) +
                                      " tokens; with room for its text (" + std::to_string(room) + "), a slot's context holds " +
                                      std::to_string(slot_ctx - room) + " (start the server with a larger --ctx-size)",
                             "invalid_request_error", "context_length_exceeded");
      e.param = "file";
      return server::SendError(res, e);
    }
    auto job = std::make_shared<Job>();
    job->prompt = std::move(p).value();
    job->options.max_tokens = room;
    job->options.sampling.temperature = t.temperature;
    job->stream = false;  // answered whole: its HTTP thread waits for the end, not each token
    jobs.push_back(std::move(job));
  }
  const auto cancel_all = [jobs] {
    for (const std::shared_ptr<Job>& j : jobs) j->cancelled.store(true);
  };
  for (const std::shared_ptr<Job>& j : jobs) {
    if (!lease->scheduler->Enqueue(j)) {
      cancel_all();
      res.set_header("Retry-After", "1");
      return server::SendError(res, MakeError(503, "the server is busy: every slot is decoding and the queue is full; "
                                                   "retry shortly", "server_error", "overloaded"));
    }
  }
  const auto all_done = [jobs](std::chrono::milliseconds wait) {
    bool done = true;
    for (const std::shared_ptr<Job>& j : jobs) {
      std::vector<Job::Chunk> ignored;
      done = j->Take(&ignored, wait) && done;
    }
    return done;
  };
  // The answer once every piece is done: the texts cleaned as RunTask cleans them, and joined.
  const auto answer = [t, jobs, pieces = std::move(pieces).value(), task_prompt = std::move(prompt).value()]() {
    server::Transcription out;
    std::vector<std::string> texts;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Result<Reply> reply = Status::Error("unset");
      {
        std::lock_guard<std::mutex> lock(jobs[i]->mutex);
        reply = jobs[i]->reply;
      }
      if (!reply.ok()) {
        const ApiError e = server::FailedReply(reply.status());
        return std::make_tuple(e.status, server::ErrorJson(e).dump(), std::string(server::kJson));
      }
      texts.push_back(FinishTaskOutput(reply->text, task_prompt).text);
      out.pieces.push_back({pieces[i].start_seconds, pieces[i].end_seconds, texts.back(), reply->tokens});
      out.input_tokens += reply->stats.prompt_tokens;
      out.output_tokens += reply->stats.generated_tokens;
    }
    out.text = JoinTranscripts(texts);
    out.language = !t.language.empty() ? t.language : DetectLanguageTag(out.text);
    out.duration = pieces.empty() ? 0 : pieces.back().end_seconds;
    auto [body, type] = server::TranscriptionBody(t, out);
    return std::make_tuple(200, std::move(body), std::move(type));
  };
  bool done = false;
  for (int waited = 0; waited < 10 && !done; ++waited) done = all_done(std::chrono::milliseconds(100));
  if (!done && t.response_format == "text") {
    // Plain text cannot be led by keep-alive whitespace: wait for the whole of it.
    while (!all_done(std::chrono::milliseconds(1000))) {
    }
    done = true;
  }
  if (done) {
    auto [status, body, type] = answer();
    res.status = status;
    res.set_content(body, type);
    return;
  }
  // A long clip: JSON led by whitespace once a second, so that a client gone is noticed (as the
  // chat's answers do) and its pieces cancelled.
  res.set_chunked_content_provider(
      server::kJson,
      [all_done, cancel_all, answer, lease](size_t, httplib::DataSink& sink) {
        while (!all_done(std::chrono::milliseconds(1000))) {
          if (!server::WriteRaw(sink, " ")) {
            cancel_all();
            return false;
          }
        }
        if (!server::WriteRaw(sink, std::get<1>(answer()))) return false;
        sink.done();
        return true;
      },
      [cancel_all](bool success) {
        if (!success) cancel_all();
      });
}

}  // namespace gemlet
