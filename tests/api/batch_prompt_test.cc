// BatchDecoder::Submit with images (and gemlet_batch_decoder_submit_prompt): each request gives
// the tokens Session::Complete(Prompt) gives on a session of its own, alone or beside others in the
// same steps, whether its prompt ends after the image's markup or on the image's last soft token;
// a second request on the same session keeps the image's KV (cached_tokens covers it). On hf-mm's
// gemma3_image converted by gemlet::Convert (text GGUF + mmproj).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gemlet/gemlet.h"
#include "gemlet/gemlet.hpp"
#include "common/hf_mm_models.h"
#include "gemlet/tools.hpp"

namespace gemlet {
namespace {

const std::string kHfMm = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/";

const test::HfMmModel& Gemma3Image() { return test::ConvertHfMm("gemma3_image"); }

std::shared_ptr<Engine> ImageEngine() {
  static std::shared_ptr<Engine> engine = [] {
    EngineOptions o;
    o.mmproj_path = Gemma3Image().mmproj;
    o.n_threads = 2;
    o.thermal.enabled = false;
    o.memory_pressure_path = "";
    auto e = Engine::Load(Gemma3Image().model, o);
    EXPECT_TRUE(e.ok()) << e.message();
    return e.ok() ? e.value() : nullptr;
  }();
  return engine;
}

SessionOptions Slot() {
  SessionOptions o;
  o.n_ctx = 256;
  o.max_batch = 64;
  return o;
}

std::unique_ptr<Session> NewSession() {
  auto s = Session::Create(ImageEngine(), Slot());
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

GenerateOptions Greedy(int max_tokens) {
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0;
  return g;
}

std::shared_ptr<const EncodedMedia> Image() {
  static auto image = [] {
    auto m = ImageEngine()->EncodeImageFile(kHfMm + "gemma3_image/image.png");
    EXPECT_TRUE(m.ok()) << m.message();
    return m.ok() ? m.value() : nullptr;
  }();
  return image;
}

// A chat turn with the image among its text.
Prompt ChatWithImage(const std::string& before, const std::string& after) {
  std::vector<Message> messages = {{"user", "", {{before, nullptr}, {"", Image()}, {after, nullptr}}}};
  auto p = ImageEngine()->ChatPrompt(messages);
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? p.value() : Prompt{};
}

// BOS and the image's soft tokens, nothing after: the prompt ends inside the image.
Prompt EndsOnTheImage() {
  Prompt p;
  p.tokens = ImageEngine()->Tokenize("Look:", {.add_special = true, .parse_special = false});
  const int at = static_cast<int>(p.tokens.size());
  auto token = ImageEngine()->MediaToken(MediaKind::kImage);
  EXPECT_TRUE(token.ok()) << token.message();
  p.tokens.insert(p.tokens.end(), static_cast<size_t>(Image()->n_tokens), token.value());
  p.media.push_back({at, Image()});
  return p;
}

Reply Alone(const Prompt& prompt, const GenerateOptions& g) {
  auto session = NewSession();
  auto reply = session->Complete(prompt, g);
  EXPECT_TRUE(reply.ok()) << reply.message();
  return reply.ok() ? reply.value() : Reply{};
}

// Runs the prompts in one decoder, each on its own session, to the end; the replies by index.
std::vector<Reply> Batched(const std::vector<Prompt>& prompts, const GenerateOptions& g,
                           std::vector<std::unique_ptr<Session>>* sessions) {
  BatchOptions bo;
  bo.max_requests = 4;
  bo.prefill_chunk = 32;
  auto batch = BatchDecoder::Create(ImageEngine(), bo);
  EXPECT_TRUE(batch.ok()) << batch.message();
  std::map<int, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (sessions->size() <= i) sessions->push_back(NewSession());
    auto id = (*batch)->Submit(*(*sessions)[i], prompts[i], g);
    EXPECT_TRUE(id.ok()) << id.message();
    if (id.ok()) index[id.value()] = i;
  }
  std::vector<Reply> replies(prompts.size());
  size_t finished = 0;
  for (int steps = 0; finished < prompts.size() && steps < 1000; ++steps) {
    for (BatchDecoder::Finished& f : (*batch)->Step()) {
      EXPECT_TRUE(f.reply.ok()) << f.reply.message();
      if (f.reply.ok()) replies[index[f.id]] = std::move(f.reply).value();
      ++finished;
    }
  }
  EXPECT_EQ(finished, prompts.size());
  return replies;
}

TEST(BatchPrompt, EachRequestAnswersAsCompleteAlone) {
  const GenerateOptions g = Greedy(10);
  const Prompt chat = ChatWithImage("What is in ", "? Answer in one line.");
  const Prompt ends = EndsOnTheImage();
  const std::vector<Message> weather = {{"user", "Say something about the weather."}};
  auto text = ImageEngine()->TokenizeChat(weather);
  ASSERT_TRUE(text.ok());
  const Prompt plain{text.value(), {}};
  const std::vector<Prompt> prompts = {chat, ends, plain};
  std::vector<Reply> alone;
  for (const Prompt& p : prompts) alone.push_back(Alone(p, g));
  // The answers depend on the image (else the comparisons below could not tell it was placed):
  // the same placeholders with its rows evaluated as the placeholder token's answer otherwise.
  Prompt ignored = chat;
  ignored.media.clear();
  EXPECT_NE(Alone(ignored, g).tokens, alone[0].tokens);

  std::vector<std::unique_ptr<Session>> sessions;
  const std::vector<Reply> together = Batched(prompts, g, &sessions);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_FALSE(alone[i].tokens.empty()) << i;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "prompt " << i;
    EXPECT_EQ(together[i].stats.prompt_tokens, static_cast<int>(prompts[i].tokens.size()));
    EXPECT_EQ(together[i].stats.cached_tokens, 0);
  }
  // The image's soft tokens sit in the session's cache as the image, not as its placeholders.
  ASSERT_EQ(sessions[0]->media().size(), 1u);
  EXPECT_EQ(sessions[0]->media()[0].position, chat.media[0].position);

  // Each alone in a decoder: the same again (the prompt that ends on the image starts generating
  // from the image's own forward).
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<std::unique_ptr<Session>> one;
    EXPECT_EQ(Batched({prompts[i]}, g, &one)[0].tokens, alone[i].tokens) << "prompt " << i;
  }
}

TEST(BatchPrompt, ASecondTurnKeepsTheImage) {
  const GenerateOptions g = Greedy(6);
  const Prompt first = ChatWithImage("Describe ", "");
  std::vector<std::unique_ptr<Session>> sessions;
  const Reply one = Batched({first}, g, &sessions)[0];
  ASSERT_FALSE(one.tokens.empty());
  // The next turn: the whole conversation again, as an OpenAI client sends it.
  std::vector<Message> messages = {{"user", "", {{"Describe ", nullptr}, {"", Image()}, {"", nullptr}}},
                                   {"assistant", one.text},
                                   {"user", "Shorter, please."}};
  auto second = ImageEngine()->ChatPrompt(messages);
  ASSERT_TRUE(second.ok()) << second.message();
  const Reply two = Batched({second.value()}, g, &sessions)[0];
  const int image_end = first.media[0].position + first.media[0].media->n_tokens;
  EXPECT_GE(two.stats.cached_tokens, image_end);
  EXPECT_EQ(two.tokens, Alone(second.value(), g).tokens);

  // Another image behind the same placeholders is not taken for it.
  std::vector<float> other = Image()->embeddings;
  for (float& v : other) v = -v;
  auto flipped = std::make_shared<EncodedMedia>(*Image());
  flipped->embeddings = other;
  Prompt swapped = second.value();
  swapped.media[0].media = flipped;
  const Reply three = Batched({swapped}, g, &sessions)[0];
  EXPECT_LE(three.stats.cached_tokens, first.media[0].position);
  EXPECT_EQ(three.tokens, Alone(swapped, g).tokens);
}

TEST(BatchPrompt, MisuseIsRefusedBeforeAnythingRuns) {
  auto batch = BatchDecoder::Create(ImageEngine());
  ASSERT_TRUE(batch.ok());
  auto session = NewSession();
  Prompt bad = EndsOnTheImage();
  bad.media[0].position = static_cast<int>(bad.tokens.size()) - 2;  // past the end
  auto id = (*batch)->Submit(*session, bad, Greedy(4));
  EXPECT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*batch)->running(), 0);
}

TEST(BatchPrompt, TheCApiSubmitsPrompts) {
  gemlet_engine_options eo = gemlet_engine_options_default();
  eo.mmproj_path = Gemma3Image().mmproj.c_str();
  eo.n_threads = 2;
  eo.thermal_off = true;
  eo.memory_pressure_path = "";
  gemlet_engine* engine = nullptr;
  ASSERT_EQ(gemlet_engine_load(Gemma3Image().model.c_str(), &eo, &engine), GEMLET_OK) << gemlet_last_error();
  gemlet_media* image = nullptr;
  ASSERT_EQ(gemlet_engine_encode_image_file(engine, (kHfMm + "gemma3_image/image.png").c_str(), nullptr, &image),
            GEMLET_OK)
      << gemlet_last_error();
  gemlet_content_part parts[2] = {gemlet_content_part_default(), gemlet_content_part_default()};
  parts[0].media = image;
  parts[1].text = "What is it?";
  gemlet_prompt* prompt = nullptr;
  ASSERT_EQ(gemlet_engine_tokenize_prompt(engine, parts, 2, true, false, &prompt), GEMLET_OK) << gemlet_last_error();
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 256;
  so.max_batch = 64;
  gemlet_session *alone = nullptr, *batched = nullptr;
  ASSERT_EQ(gemlet_session_create(engine, &so, &alone), GEMLET_OK);
  ASSERT_EQ(gemlet_session_create(engine, &so, &batched), GEMLET_OK);
  gemlet_generate_options go = gemlet_generate_options_default();
  go.max_tokens = 8;
  go.temperature = 0;
  gemlet_reply* want = nullptr;
  ASSERT_EQ(gemlet_session_complete_prompt(alone, prompt, &go, nullptr, nullptr, &want), GEMLET_OK) << gemlet_last_error();

  gemlet_batch_decoder* decoder = nullptr;
  ASSERT_EQ(gemlet_batch_decoder_create(engine, nullptr, &decoder), GEMLET_OK);
  int id = 0;
  EXPECT_EQ(gemlet_batch_decoder_submit_prompt(decoder, batched, nullptr, &go, nullptr, nullptr, &id), GEMLET_INVALID_ARGUMENT);
  ASSERT_EQ(gemlet_batch_decoder_submit_prompt(decoder, batched, prompt, &go, nullptr, nullptr, &id), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_GT(id, 0);
  gemlet_prompt_free(prompt);  // the decoder keeps what it needs
  gemlet_media_free(image);
  gemlet_reply* got = nullptr;
  for (int steps = 0; got == nullptr && steps < 200; ++steps) {
    size_t n = 0;
    ASSERT_EQ(gemlet_batch_decoder_step(decoder, &n), GEMLET_OK);
    if (n == 1) {
      int finished_id = 0;
      ASSERT_EQ(gemlet_batch_decoder_finished(decoder, 0, &finished_id, &got), GEMLET_OK) << gemlet_last_error();
      EXPECT_EQ(finished_id, id);
    }
  }
  ASSERT_NE(got, nullptr);
  size_t n_want = 0, n_got = 0;
  const int32_t* a = gemlet_reply_tokens(want, &n_want);
  const int32_t* b = gemlet_reply_tokens(got, &n_got);
  EXPECT_GT(n_want, 0u);
  EXPECT_EQ(std::vector<int32_t>(a, a + n_want), std::vector<int32_t>(b, b + n_got));
  gemlet_reply_free(want);
  gemlet_reply_free(got);
  gemlet_batch_decoder_free(decoder);
  gemlet_session_free(alone);
  gemlet_session_free(batched);
  gemlet_engine_free(engine);
}

}  // namespace
}  // namespace gemlet
