// DecodeAudio and LoadAudioFile on clips made here (WAV byte by byte, the other formats by libsndfile's
// encoders) and on files made by the Debian command-line encoders (tests/data/media): exact samples
// for the lossless formats, a tone that survives the lossy ones, and one clear error for every refused
// input.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <numbers>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "common/test_util.h"
#include "media/audio.h"
#include "test_audio.h"

namespace gemlet::media {
namespace {

using testing::Bytes;

Audio Decoded(const Bytes& bytes, const AudioLimits& limits = {}) {
  auto audio = DecodeAudio(bytes, limits);
  EXPECT_TRUE(audio.ok()) << audio.message();
  return audio.ok() ? std::move(audio).value() : Audio{};
}

std::string ErrorOf(const Bytes& bytes, const AudioLimits& limits = {}) {
  auto audio = DecodeAudio(bytes, limits);
  EXPECT_FALSE(audio.ok()) << "decoded " << audio->samples.size() << " samples at " << audio->sample_rate << " Hz";
  return audio.ok() ? std::string() : audio.message();
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Bytes ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The bytes of `text` (for hand-made headers).
Bytes Of(std::string_view text) { return {text.begin(), text.end()}; }

// Every prefix shorter than the file, in steps, is refused with a message: no crash, no read past
// the end (the sanitizer build runs this too).
void ExpectEveryTruncationRefused(const Bytes& bytes, size_t step) {
  for (size_t n = 1; n < bytes.size(); n += step) {
    auto audio = DecodeAudio(Bytes(bytes.begin(), bytes.begin() + n));
    EXPECT_FALSE(audio.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes decoded";
    if (!audio.ok()) {
      EXPECT_FALSE(audio.message().empty());
    }
  }
}

// A lossy codec keeps the tone: its frequency within 0.2 Hz and its amplitude within 5%.
void ExpectTone(const Audio& audio, int rate, double hz, double amplitude, double seconds) {
  EXPECT_EQ(audio.sample_rate, rate);
  EXPECT_NEAR(audio.Seconds(), seconds, 0.06);
  const double found = testing::DominantFrequency(audio.samples, audio.sample_rate, hz - 50, hz + 50);
  const double level = testing::ToneAmplitude(audio.samples, audio.sample_rate, hz);
  std::printf("  tone %.0f Hz, amplitude %.3f: decoded %zu samples at %d Hz, %.4f Hz, amplitude %.4f\n", hz,
              amplitude, audio.samples.size(), audio.sample_rate, found, level);
  EXPECT_NEAR(found, hz, 0.2);
  EXPECT_NEAR(level, amplitude, 0.05 * amplitude);
}

TEST(AudioDecode, WavIntegerPcmOfEveryDepthIsExact) {
  const std::vector<double> tone = testing::Tone(16000, 0.05, 440.0, 0.9);
  for (int bits : {8, 16, 24, 32}) {
    const Audio audio = Decoded(testing::EncodeWav({16000, 1, 1, bits, false}, tone));
    ASSERT_EQ(audio.samples.size(), tone.size()) << bits << "-bit";
    EXPECT_EQ(audio.sample_rate, 16000);
    float worst = 0.0f;
    for (size_t i = 0; i < tone.size(); ++i) {
      worst = std::max(worst, std::abs(audio.samples[i] - static_cast<float>(testing::Quantize(tone[i], bits))));
    }
    // Up to 24 bits the stored integer over 2^(bits-1) is exact in float32; 32-bit rounds once.
    EXPECT_LE(worst, bits == 32 ? 6e-8f : 0.0f) << bits << "-bit";
  }
}

TEST(AudioDecode, WavInt16IsTheValueOver32768) {
  // The HF goldens give the extractors int16 / 32768 (float32): the extremes included.
  const std::vector<double> extremes = {-1.0, -0.5, 0.0, 1.0 / 32768, 32767.0 / 32768};
  const Audio audio = Decoded(testing::EncodeWav({16000, 1, 1, 16, false}, extremes));
  ASSERT_EQ(audio.samples.size(), extremes.size());
  for (size_t i = 0; i < extremes.size(); ++i) EXPECT_EQ(audio.samples[i], static_cast<float>(extremes[i]));
}

TEST(AudioDecode, WavFloatIsExact) {
  const std::vector<double> tone = testing::Tone(22050, 0.05, 1000.0, 1.25);  // float may exceed 1: kept
  for (int bits : {32, 64}) {
    const Audio audio = Decoded(testing::EncodeWav({22050, 1, 3, bits, false}, tone));
    ASSERT_EQ(audio.samples.size(), tone.size());
    for (size_t i = 0; i < tone.size(); ++i) ASSERT_EQ(audio.samples[i], static_cast<float>(tone[i])) << i;
  }
}

TEST(AudioDecode, WavExtensibleReadsLikePlainAndChannelsAverage) {
  const double gains[] = {1.0, 0.25};
  const std::vector<double> stereo = testing::Tone(48000, 0.05, 440.0, 0.8, 2, gains);
  for (const auto& [tag, bits] : {std::pair{1, 24}, std::pair{3, 32}, std::pair{1, 16}}) {
    const Audio plain = Decoded(testing::EncodeWav({48000, 2, tag, bits, false}, stereo));
    const Audio extensible = Decoded(testing::EncodeWav({48000, 2, tag, bits, true}, stereo));
    EXPECT_EQ(plain.samples, extensible.samples);
    ASSERT_EQ(plain.samples.size(), stereo.size() / 2);
    for (size_t i = 0; i < plain.samples.size(); ++i) {
      const double l = tag == 3 ? static_cast<float>(stereo[2 * i]) : testing::Quantize(stereo[2 * i], bits);
      const double r = tag == 3 ? static_cast<float>(stereo[2 * i + 1]) : testing::Quantize(stereo[2 * i + 1], bits);
      ASSERT_EQ(plain.samples[i], static_cast<float>((l + r) / 2)) << i;
    }
  }
}

TEST(AudioDecode, NonFiniteFloatSamplesAreRefused) {
  for (const double bad : {std::nan(""), double{INFINITY}, -double{INFINITY}}) {
    const std::vector<double> samples = {0.1, -0.2, bad, 0.3};
    for (int bits : {32, 64}) {
      const std::string error = ErrorOf(testing::EncodeWav({16000, 1, 3, bits, false}, samples));
      EXPECT_EQ(error, "WAV audio holds a sample that is not a finite number (2 samples in)");
    }
  }
}

TEST(AudioDecode, WavOddChunksAndAnUnknownDataSizeAreRead) {
  const std::vector<double> tone = testing::Tone(16000, 0.01, 440.0, 0.5);
  const Bytes wav = testing::EncodeWav({16000, 1, 1, 16, false}, tone);
  const Audio want = Decoded(wav);
  // A 3-byte LIST chunk (padded to 4) between fmt and data.
  Bytes with_list(wav.begin(), wav.begin() + 36);
  for (const char b : {'L', 'I', 'S', 'T', '\3', '\0', '\0', '\0', 'a', 'b', 'c', '\0'}) {
    with_list.push_back(static_cast<uint8_t>(b));
  }
  with_list.insert(with_list.end(), wav.begin() + 36, wav.end());
  EXPECT_EQ(Decoded(with_list).samples, want.samples);
  // A writer on a pipe leaves the data size at 0xffffffff: the samples run to the end.
  Bytes piped = wav;
  for (int i = 40; i < 44; ++i) piped[i] = 0xff;
  EXPECT_EQ(Decoded(piped).samples, want.samples);
}

TEST(AudioDecode, WavTruncatedOrMalformedIsRefused) {
  const Bytes wav = testing::EncodeWav({16000, 2, 1, 24, true}, testing::Tone(16000, 0.01, 440.0, 0.5, 2));
  ExpectEveryTruncationRefused(wav, 1);
  const std::string cut = ErrorOf(Bytes(wav.begin(), wav.end() - 7));
  EXPECT_TRUE(Contains(cut, "WAV is truncated: its data chunk claims")) << cut;
  const Bytes mono = testing::EncodeWav({16000, 1, 1, 16, false}, testing::Tone(16000, 0.01, 440.0, 0.5));
  Bytes adpcm = mono;
  adpcm[20] = 2;  // format tag: Microsoft ADPCM
  EXPECT_TRUE(Contains(ErrorOf(adpcm), "Microsoft ADPCM")) << ErrorOf(adpcm);
  Bytes twelve_bit = mono;
  twelve_bit[34] = 12;
  EXPECT_TRUE(Contains(ErrorOf(twelve_bit), "12-bit PCM")) << ErrorOf(twelve_bit);
  Bytes bad_align = mono;
  bad_align[32] = 3;
  EXPECT_TRUE(Contains(ErrorOf(bad_align), "block align")) << ErrorOf(bad_align);
  Bytes no_rate = mono;
  for (int i = 24; i < 28; ++i) no_rate[i] = 0;
  EXPECT_TRUE(Contains(ErrorOf(no_rate), "sample rate of 0 Hz")) << ErrorOf(no_rate);
  Bytes no_data = mono;
  no_data[36] = 'x';  // the data chunk becomes an unknown one that runs to the end
  EXPECT_TRUE(Contains(ErrorOf(no_data), "no data chunk")) << ErrorOf(no_data);
}

TEST(AudioDecode, FlacIsLossless) {
  const std::vector<double> tone = testing::Tone(16000, 0.5, 440.0, 0.7);
  for (const auto& [subtype, bits] : {std::pair{SF_FORMAT_PCM_16, 16}, std::pair{SF_FORMAT_PCM_24, 24}}) {
    const Bytes flac = testing::EncodeWithSndfile(SF_FORMAT_FLAC | subtype, 16000, 1, tone, bits);
    ASSERT_FALSE(flac.empty());
    EXPECT_EQ(SniffAudioFormat(flac), AudioFormat::kFlac);
    const Audio audio = Decoded(flac);
    ASSERT_EQ(audio.samples.size(), tone.size());
    for (size_t i = 0; i < tone.size(); ++i) {
      ASSERT_EQ(audio.samples[i], static_cast<float>(testing::Quantize(tone[i], bits))) << bits << "-bit, sample " << i;
    }
  }
}

TEST(AudioDecode, Mp3TagsAtTheEndAreSkipped) {
  const Bytes mp3 = testing::EncodeWithSndfile(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 16000, 1,
                                               testing::Tone(16000, 0.3, 440.0, 0.5));
  ASSERT_FALSE(mp3.empty());
  const Audio want = Decoded(mp3);
  // An APEv2 tag (footer only: its size counts one 10-byte item and the 32-byte footer), then ID3v1.
  Bytes ape = {0x04, 0, 0, 0, 0, 0, 0, 0, 'A', 0};  // item: value size 4, flags, key "A"
  for (char c : std::string("abcd")) ape.push_back(static_cast<uint8_t>(c));
  const uint32_t size = static_cast<uint32_t>(ape.size() + 32);
  for (char c : std::string("APETAGEX")) ape.push_back(static_cast<uint8_t>(c));
  for (uint32_t v : {2000u, size, 1u, 0u}) {  // version, tag size, item count, flags (no header)
    for (int b = 0; b < 4; ++b) ape.push_back(static_cast<uint8_t>(v >> (8 * b)));
  }
  ape.resize(ape.size() + 8, 0);
  Bytes id3v1 = {'T', 'A', 'G'};
  id3v1.resize(128, ' ');
  Bytes tagged = mp3;
  tagged.insert(tagged.end(), ape.begin(), ape.end());
  EXPECT_EQ(Decoded(tagged).samples, want.samples);
  tagged.insert(tagged.end(), id3v1.begin(), id3v1.end());
  EXPECT_EQ(Decoded(tagged).samples, want.samples);
}

TEST(AudioDecode, Id3v2InFrontOfFlacIsSkipped) {
  const std::vector<double> tone = testing::Tone(16000, 0.1, 440.0, 0.7);
  const Bytes flac = testing::EncodeWithSndfile(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, tone, 16);
  Bytes tagged = {'I', 'D', '3', 4, 0, 0, 0, 0, 0, 20};  // ID3v2.4, 20 bytes of frames (padding here)
  tagged.resize(30, 0);
  tagged.insert(tagged.end(), flac.begin(), flac.end());
  EXPECT_EQ(SniffAudioFormat(tagged), AudioFormat::kFlac);
  EXPECT_EQ(Decoded(tagged).samples, Decoded(flac).samples);
}

TEST(AudioDecode, OggOpusKeepsTheTone) {
  const Bytes opus =
      testing::EncodeWithSndfile(SF_FORMAT_OGG | SF_FORMAT_OPUS, 16000, 1, testing::Tone(16000, 1.0, 440.0, 0.5));
  ASSERT_FALSE(opus.empty());
  EXPECT_EQ(SniffAudioFormat(opus), AudioFormat::kOgg);
  ExpectTone(Decoded(opus), 16000, 440.0, 0.5, 1.0);
}

TEST(AudioDecode, OggVorbisKeepsTheToneAndAveragesChannels) {
  const double gains[] = {1.0, 0.5};
  const Bytes vorbis =
      testing::EncodeWithSndfile(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 44100, 2,
                                 testing::Tone(44100, 1.0, 1000.0, 0.6, 2, gains));
  ASSERT_FALSE(vorbis.empty());
  ExpectTone(Decoded(vorbis), 44100, 1000.0, 0.45, 1.0);
}

TEST(AudioDecode, Mp3KeepsTheTone) {
  const Bytes mp3 =
      testing::EncodeWithSndfile(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 44100, 1,
                                 testing::Tone(44100, 1.0, 440.0, 0.5));
  ASSERT_FALSE(mp3.empty());
  EXPECT_EQ(SniffAudioFormat(mp3), AudioFormat::kMp3);
  ExpectTone(Decoded(mp3), 44100, 440.0, 0.5, 1.0);
}

// The committed files (tests/data/media/README.md): one tone made by the command-line encoders from
// the same 16-bit samples, which the test computes again.
TEST(AudioDecode, FilesFromTheDebianEncodersDecode) {
  const std::string dir = GEMLET_MEDIA_TESTDATA;
  std::vector<float> want(4000);
  for (size_t i = 0; i < want.size(); ++i) {
    const double v = 0.5 * 32767 * std::sin(2 * std::numbers::pi * 440 * static_cast<double>(i) / 16000);
    want[i] = static_cast<float>(std::floor(v + 0.5) / 32768);
  }
  auto flac = LoadAudioFile(dir + "/tone-440hz.flac");
  ASSERT_TRUE(flac.ok()) << flac.message();
  EXPECT_EQ(flac->sample_rate, 16000);
  EXPECT_EQ(flac->samples, want);  // lossless
  for (const char* name : {"tone-440hz.opus", "tone-440hz.mp3"}) {
    auto audio = LoadAudioFile(dir + "/" + name);
    ASSERT_TRUE(audio.ok()) << name << ": " << audio.message();
    // Opus's pre-skip and the LAME header's delay and padding are trimmed: the length is the source's.
    EXPECT_EQ(audio->samples.size(), want.size()) << name;
    ExpectTone(*audio, 16000, 440.0, 0.5, 0.25);
  }
}

// Every prefix of each compressed format is refused: cut pages, cut frames, and (for FLAC and an MP3
// with a Xing header) a cut between frames, which the header's length shows.
TEST(AudioDecode, CompressedTruncationsAreRefused) {
  const std::vector<double> tone = testing::Tone(16000, 0.3, 440.0, 0.5);
  const int formats[] = {SF_FORMAT_FLAC | SF_FORMAT_PCM_16, SF_FORMAT_OGG | SF_FORMAT_OPUS,
                         SF_FORMAT_OGG | SF_FORMAT_VORBIS, SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III};
  for (int format : formats) {
    const Bytes bytes = testing::EncodeWithSndfile(format, 16000, 1, tone);
    ASSERT_FALSE(bytes.empty());
    ASSERT_TRUE(DecodeAudio(bytes).ok());
    ExpectEveryTruncationRefused(bytes, 13);
    std::printf("  format 0x%x, %zu bytes: the cut at half says \"%s\"\n", format, bytes.size(),
                ErrorOf(Bytes(bytes.begin(), bytes.begin() + bytes.size() / 2)).c_str());
  }
  // Files from the command-line encoders, too.
  for (const char* name : {"tone-440hz.flac", "tone-440hz.opus", "tone-440hz.mp3"}) {
    ExpectEveryTruncationRefused(ReadFile(std::string(GEMLET_MEDIA_TESTDATA) + "/" + name), 7);
  }
}

TEST(AudioDecode, CorruptCompressedDataIsRefused) {
  const std::vector<double> tone = testing::Tone(16000, 0.5, 440.0, 0.5);
  const int formats[] = {SF_FORMAT_FLAC | SF_FORMAT_PCM_16, SF_FORMAT_OGG | SF_FORMAT_OPUS,
                         SF_FORMAT_OGG | SF_FORMAT_VORBIS, SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III};
  for (int format : formats) {
    Bytes bytes = testing::EncodeWithSndfile(format, 16000, 1, tone);
    ASSERT_FALSE(bytes.empty());
    // 64 bytes scrambled in the middle: a FLAC frame's CRC, an Ogg page's CRC, or an MP3 frame header
    // (mpg123 resyncs past it and the samples fall short of the Xing header's count).
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= 0x5a;
    const std::string error = ErrorOf(bytes);
    std::printf("  format 0x%x scrambled: \"%s\"\n", format, error.c_str());
    EXPECT_FALSE(error.empty());
  }
}

TEST(AudioDecode, OverTheLimitsIsRefusedBeforeDecoding) {
  const std::vector<double> second = testing::Tone(16000, 1.0, 440.0, 0.5);
  const Bytes wav = testing::EncodeWav({16000, 1, 1, 16, false}, second);
  AudioLimits half_second;
  half_second.max_seconds = 0.5;
  const std::string long_wav = ErrorOf(wav, half_second);
  EXPECT_TRUE(Contains(long_wav, "WAV audio is 1.0 s (16000 frames at 16000 Hz), over the limit of 0.5 s")) << long_wav;
  AudioLimits few_bytes;
  few_bytes.max_bytes = 1000;
  EXPECT_TRUE(Contains(ErrorOf(wav, few_bytes), "over the limit of 1000 bytes")) << ErrorOf(wav, few_bytes);
  // A FLAC whose STREAMINFO claims 2^36 - 1 samples (about 50 days at 16 kHz): refused from the
  // header, although its frames hold one second (decoding it would end early, without an error).
  Bytes flac = testing::EncodeWithSndfile(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, second, 16);
  ASSERT_GT(flac.size(), 42u);
  ASSERT_EQ(flac[4] & 0x7f, 0);  // STREAMINFO first; its 36-bit sample count ends at byte 25
  flac[21] |= 0x0f;
  for (int i = 22; i < 26; ++i) flac[i] = 0xff;
  const std::string long_flac = ErrorOf(flac);
  EXPECT_TRUE(Contains(long_flac, "FLAC audio is 4294967.3 s (68719476735 frames at 16000 Hz), over the limit of 600 s"))
      << long_flac;
  // A FLAC that leaves its length out (0) is stopped as it decodes.
  flac[21] &= 0xf0;
  for (int i = 22; i < 26; ++i) flac[i] = 0;
  EXPECT_EQ(Decoded(flac).samples.size(), second.size());
  EXPECT_TRUE(Contains(ErrorOf(flac, half_second), "FLAC audio runs past the limit of 0.5 s as it decodes"))
      << ErrorOf(flac, half_second);
  // Each is StatusCode::kTooLarge (a server answers 413), unlike a corrupt file.
  EXPECT_EQ(DecodeAudio(wav, half_second).status().code(), StatusCode::kTooLarge);
  EXPECT_EQ(DecodeAudio(wav, few_bytes).status().code(), StatusCode::kTooLarge);
  EXPECT_EQ(DecodeAudio(flac, half_second).status().code(), StatusCode::kTooLarge);
  EXPECT_EQ(DecodeAudio(Bytes(wav.begin(), wav.begin() + 60)).status().code(), StatusCode::kError);
}

TEST(AudioDecode, UnknownFormatsNameTheSupportedOnes) {
  const std::string supported = "not audio gemlet can read: WAV, FLAC, Ogg (Opus, Vorbis) or MP3";
  EXPECT_EQ(ErrorOf(Of("hello, this is not audio")), supported);
  const Bytes m4a = Of(std::string("\0\0\0\x20" "ftypM4A \0\0\0\0M4A mp42isom\0\0\0\0", 32));
  EXPECT_TRUE(Contains(ErrorOf(m4a), supported + " (this looks like AAC in MP4/M4A")) << ErrorOf(m4a);
  const Bytes adts = {0xff, 0xf1, 0x50, 0x80, 0x02, 0x1f, 0xfc, 0x21, 0x00};
  EXPECT_TRUE(Contains(ErrorOf(adts), "AAC (ADTS)")) << ErrorOf(adts);
  EXPECT_TRUE(Contains(ErrorOf(Of(std::string("FORM\0\0\0\x20" "AIFFCOMM", 16))), "AIFF"));
  EXPECT_EQ(ErrorOf({}), "the audio is empty (0 bytes)");
  // Ogg holding another codec is named: a one-page stream whose packet is a FLAC-in-Ogg header.
  Bytes ogg_flac = Of(std::string("OggS\0\x06", 6));
  ogg_flac.resize(26, 0);
  ogg_flac.push_back(1);   // one segment
  ogg_flac.push_back(9);   // of 9 bytes
  for (char c : std::string("\x7f" "FLAC\x01\0\0\0", 9)) ogg_flac.push_back(static_cast<uint8_t>(c));
  EXPECT_TRUE(Contains(ErrorOf(ogg_flac), "Ogg holds FLAC; gemlet reads Opus and Vorbis in Ogg")) << ErrorOf(ogg_flac);
  EXPECT_EQ(SniffAudioFormat(ogg_flac), AudioFormat::kOgg);
}

TEST(AudioDecode, LoadAudioFileNamesThePath) {
  auto missing = LoadAudioFile("/nonexistent/clip.wav");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.message(), "/nonexistent/clip.wav")) << missing.message();
  auto directory = LoadAudioFile(GEMLET_MEDIA_TESTDATA);
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(Contains(directory.message(), "not a regular file")) << directory.message();
  auto not_audio = LoadAudioFile(std::string(GEMLET_MEDIA_TESTDATA) + "/README.md");
  ASSERT_FALSE(not_audio.ok());
  EXPECT_TRUE(Contains(not_audio.message(), "README.md")) << not_audio.message();
  EXPECT_TRUE(Contains(not_audio.message(), "not audio gemlet can read")) << not_audio.message();
}

}  // namespace
}  // namespace gemlet::media
