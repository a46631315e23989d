// MP3 (MPEG-1/2/2.5 layer I-III) through libmpg123 directly rather than through libsndfile: libsndfile
// leaves mpg123 printing its notes on stderr and hides a cut-off last frame, which the feed interface
// used here reports as bytes left over.
#include <mpg123.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "media/audio_codecs.h"

namespace gemlet::media::internal {
namespace {

std::string_view Text(std::span<const uint8_t> bytes, size_t offset, size_t n) {
  if (offset > bytes.size() || bytes.size() - offset < n) return {};
  return {reinterpret_cast<const char*>(bytes.data() + offset), n};
}

// Whether the first frame is a Xing/Info or VBRI header, i.e. the stream states its own length
// (LAME writes one); otherwise mpg123's length is an estimate from the file size.
bool DeclaresLength(std::span<const uint8_t> bytes) {
  const size_t at = Id3v2TagSize(bytes);
  if (at > bytes.size() || bytes.size() - at < 4) return false;
  const uint8_t* h = bytes.data() + at;
  if (h[0] != 0xff || (h[1] & 0xe0) != 0xe0) return false;
  const bool mpeg1 = ((h[1] >> 3) & 3) == 3, mono = (h[3] >> 6) == 3, crc = (h[1] & 1) == 0;
  const size_t side_info = mpeg1 ? (mono ? 17 : 32) : (mono ? 9 : 17);
  const std::string_view tag = Text(bytes, at + 4 + side_info + (crc ? 2 : 0), 4);
  return tag == "Xing" || tag == "Info" || Text(bytes, at + 36, 4) == "VBRI";
}

// The bytes mpg123 is given: without the tags at the end. mpg123 skips a lone ID3v1 tag itself, but
// would hold an APEv2 tag (often followed by ID3v1) as the start of a frame it waits for.
std::span<const uint8_t> WithoutEndTags(std::span<const uint8_t> bytes) {
  if (bytes.size() >= 128 && Text(bytes, bytes.size() - 128, 3) == "TAG") bytes = bytes.first(bytes.size() - 128);
  if (bytes.size() < 32 || Text(bytes, bytes.size() - 32, 8) != "APETAGEX") return bytes;
  const uint8_t* footer = bytes.data() + bytes.size() - 32;
  // The footer's size counts the items and the footer, not the optional 32-byte header.
  const uint64_t size = uint64_t{footer[12]} | uint64_t{footer[13]} << 8 | uint64_t{footer[14]} << 16 |
                        uint64_t{footer[15]} << 24;
  const uint64_t with_header = size + ((footer[23] & 0x80) != 0 ? 32 : 0);
  return with_header <= bytes.size() ? bytes.first(bytes.size() - with_header) : bytes;
}

Status Mpg123Error(mpg123_handle* mh, const char* what) {
  return Status::Error(std::string("corrupt MP3: ") + what + " (" + mpg123_strerror(mh) + ")");
}

struct Stream {
  long rate = 0;
  int channels = 0;
  bool declared = false;  // the first frame states the length
  int64_t length = -1;    // mpg123's length once the format is known
};

// Decodes every frame fed so far into `mono`, checking the limits at the format and as it grows.
Status DecodeFrames(mpg123_handle* mh, const AudioLimits& limits, Stream& s, std::vector<float>& mono) {
  uint64_t max_frames = 0;
  while (true) {
    off_t number = 0;
    unsigned char* pcm = nullptr;
    size_t bytes = 0;
    const int r = mpg123_decode_frame(mh, &number, &pcm, &bytes);
    if (r == MPG123_NEED_MORE || r == MPG123_DONE) return Status::Ok();
    if (r == MPG123_NEW_FORMAT) {
      long rate = 0;
      int channels = 0, encoding = 0;
      if (mpg123_getformat(mh, &rate, &channels, &encoding) != MPG123_OK) return Mpg123Error(mh, "no format");
      if (s.channels != 0 && (rate != s.rate || channels != s.channels)) {
        return Status::Error("MP3 changes its sample rate or channels midway: not supported");
      }
      if (s.channels != 0) continue;
      s.rate = rate;
      s.channels = channels;
      s.length = mpg123_length(mh);
      const uint64_t frames = s.length > 0 ? static_cast<uint64_t>(s.length) : 0;
      RETURN_IF_ERROR(CheckStream(frames, s.rate, s.channels, limits, "MP3"));
      max_frames = MaxFrames(static_cast<int>(s.rate), limits);
      continue;
    }
    if (r != MPG123_OK) return Mpg123Error(mh, "a frame does not decode");
    if (s.channels == 0) return Status::Error("corrupt MP3: audio before its format");
    const size_t frames = bytes / (sizeof(float) * static_cast<size_t>(s.channels));
    if (mono.size() + frames > max_frames) return OverLimitWhileDecoding("MP3", limits);
    const float* samples = reinterpret_cast<const float*>(pcm);
    for (size_t i = 0; i < frames; ++i) {
      double sum = 0.0;
      for (int c = 0; c < s.channels; ++c) sum += samples[i * s.channels + c];
      mono.push_back(s.channels == 1 ? samples[i] : static_cast<float>(sum / s.channels));
    }
  }
}

}  // namespace

Result<Audio> DecodeMp3(std::span<const uint8_t> bytes, const AudioLimits& limits) {
  static const int init = mpg123_init();  // a no-op since mpg123 1.27; required before
  if (init != MPG123_OK) return Status::Error("libmpg123 could not start");
  int error = 0;
  std::unique_ptr<mpg123_handle, void (*)(mpg123_handle*)> handle(mpg123_new(nullptr, &error), &mpg123_delete);
  mpg123_handle* mh = handle.get();
  if (mh == nullptr) return Status::Error("libmpg123 could not start (out of memory)");
  // Quiet (a library prints nothing), gapless (the encoder's delay and padding trimmed, as the LAME
  // header says), float output at the stream's own rate and channel count.
  mpg123_param(mh, MPG123_ADD_FLAGS, MPG123_QUIET | MPG123_GAPLESS, 0);
  mpg123_param(mh, MPG123_REMOVE_FLAGS, MPG123_AUTO_RESAMPLE, 0);
  mpg123_format_none(mh);
  const long* rates = nullptr;
  size_t count = 0;
  mpg123_rates(&rates, &count);
  for (size_t i = 0; i < count; ++i) mpg123_format(mh, rates[i], MPG123_MONO | MPG123_STEREO, MPG123_ENC_FLOAT_32);
  const std::span<const uint8_t> stream = WithoutEndTags(bytes);
  if (mpg123_open_feed(mh) != MPG123_OK) return Mpg123Error(mh, "cannot open");
  mpg123_set_filesize(mh, static_cast<off_t>(stream.size()));
  if (mpg123_feed(mh, stream.data(), stream.size()) != MPG123_OK) return Mpg123Error(mh, "cannot take the bytes");
  Stream s;
  s.declared = DeclaresLength(bytes);
  std::vector<float> mono;
  RETURN_IF_ERROR(DecodeFrames(mh, limits, s, mono));
  long left = 0;
  mpg123_getstate(mh, MPG123_BUFFERFILL, &left, nullptr);
  if (s.channels == 0) {
    return Status::Error(left > 0 ? "MP3 is truncated or corrupt: not one MPEG audio frame decodes"
                                  : "MP3 holds no audio frames");
  }
  if (left > 0) return Status::Error("MP3 is truncated: its last frame is cut off");
  if (s.declared && s.length > 0 && mono.size() < static_cast<uint64_t>(s.length)) {
    return Status::Error("MP3 is truncated: its header promises " + std::to_string(s.length) + " samples, " +
                         std::to_string(mono.size()) + " decode");
  }
  if (mono.empty()) return Status::Error("MP3 holds no samples");
  Audio audio;
  audio.sample_rate = static_cast<int>(s.rate);
  audio.samples = std::move(mono);
  return audio;
}

}  // namespace gemlet::media::internal
