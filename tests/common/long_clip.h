// Long clips for the audio tests, made from hf-mm's audio.wav (1.7 s of tones, 16 kHz mono, int16):
// its samples, and the clip repeated with silent gaps between the copies (as speech has pauses) to
// any length, as WAV bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gemlet::test {

inline std::string ShortClipPath() {
  return std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma4_e2b_image_audio/audio.wav";
}

// audio.wav's int16 samples (its plain 44-byte header skipped).
inline std::vector<int16_t> ShortClipSamples() {
  std::ifstream in(ShortClipPath(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int16_t> out(bytes.size() < 44 ? 0 : (bytes.size() - 44) / 2);
  if (!out.empty()) std::memcpy(out.data(), bytes.data() + 44, out.size() * 2);
  return out;
}

// A 16 kHz mono int16 WAV of these samples.
inline std::string Wav16k(const std::vector<int16_t>& samples) {
  const auto u32 = [](uint32_t v) { return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)}; };
  const auto u16 = [](uint16_t v) { return std::string{char(v), char(v >> 8)}; };
  const uint32_t data = static_cast<uint32_t>(samples.size() * 2);
  std::string wav = "RIFF" + u32(36 + data) + "WAVEfmt " + u32(16) + u16(1) + u16(1) + u32(16000) + u32(32000) + u16(2) +
                    u16(16) + "data" + u32(data);
  wav.append(reinterpret_cast<const char*>(samples.data()), data);
  return wav;
}

// audio.wav again and again with `gap_seconds` of silence after each copy, cut at `seconds`.
inline std::vector<int16_t> LongClipSamples(double seconds, double gap_seconds = 0.4) {
  const std::vector<int16_t> one = ShortClipSamples();
  const size_t total = static_cast<size_t>(seconds * 16000), gap = static_cast<size_t>(gap_seconds * 16000);
  std::vector<int16_t> out;
  while (!one.empty() && out.size() < total) {
    out.insert(out.end(), one.begin(), one.end());
    out.insert(out.end(), gap, 0);
  }
  out.resize(total);
  return out;
}

inline std::string LongClipWav(double seconds, double gap_seconds = 0.4) {
  return Wav16k(LongClipSamples(seconds, gap_seconds));
}

}  // namespace gemlet::test
