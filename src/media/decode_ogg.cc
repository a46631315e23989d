// Ogg: the pages walked here first, then Vorbis through libvorbisfile and Opus through libsndfile.
// Vorbis does not go through libsndfile because its Vorbis open leaks the stream's setup (5.8 KB) on
// every file whose headers are corrupt; libvorbisfile frees everything on its failure paths.
#define OV_EXCLUDE_STATIC_CALLBACKS  // vorbisfile.h's unused static callback tables
#include <vorbis/vorbisfile.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "media/audio_codecs.h"

namespace gemlet::media::internal {
namespace {

// The codec of an Ogg stream, from its first packet.
std::string_view OggCodec(std::span<const uint8_t> first_packet) {
  const std::string_view head(reinterpret_cast<const char*>(first_packet.data()), first_packet.size());
  if (head.starts_with("OpusHead")) return "Opus";
  if (head.starts_with("\x01vorbis")) return "Vorbis";
  if (head.starts_with("\x7f" "FLAC")) return "FLAC";
  if (head.starts_with("Speex   ")) return "Speex";
  if (head.starts_with("\x80theora")) return "Theora video";
  return "an unknown codec";
}

// Walks the pages before any decoder sees them: every page whole, the last one flagged end-of-stream
// (libogg drops a cut-off page silently, so a truncated file would otherwise decode as a shorter
// clip). Returns the codec of the first page's packet.
Result<std::string_view> CheckOggPages(std::span<const uint8_t> bytes) {
  std::string_view codec;
  size_t offset = 0;
  bool last_was_end = false;
  while (offset < bytes.size()) {
    const size_t left = bytes.size() - offset;
    const uint8_t* p = bytes.data() + offset;
    if (left < 4 || std::memcmp(p, "OggS", 4) != 0) {
      return Status::Error("corrupt Ogg: no page at byte " + std::to_string(offset));
    }
    if (left < 27 || left < size_t{27} + p[26]) return Status::Error("Ogg is truncated: its last page is cut off");
    size_t body = 0;
    for (int i = 0; i < p[26]; ++i) body += p[27 + i];
    const size_t page = size_t{27} + p[26] + body;
    if (page > left) return Status::Error("Ogg is truncated: its last page is cut off");
    if (offset == 0) codec = OggCodec(bytes.subspan(27 + p[26], body));
    last_was_end = (p[5] & 0x04) != 0;
    offset += page;
  }
  if (!last_was_end) return Status::Error("Ogg is truncated: the stream has no end page");
  return codec;
}

// The bytes as a file for ov_open_callbacks, with fread/fseek semantics.
struct MemoryStream {
  std::span<const uint8_t> bytes;
  size_t position = 0;

  static size_t Read(void* out, size_t size, size_t count, void* source) {
    auto& s = *static_cast<MemoryStream*>(source);
    if (size == 0) return 0;
    const size_t items = std::min(count, (s.bytes.size() - s.position) / size);
    std::memcpy(out, s.bytes.data() + s.position, items * size);
    s.position += items * size;
    return items;
  }
  static int Seek(void* source, ogg_int64_t offset, int whence) {
    auto& s = *static_cast<MemoryStream*>(source);
    const int64_t size = static_cast<int64_t>(s.bytes.size());
    const int64_t base = whence == SEEK_CUR ? static_cast<int64_t>(s.position) : whence == SEEK_END ? size : 0;
    if (offset < -size - 1 || offset > size + 1 || base + offset < 0 || base + offset > size) return -1;
    s.position = static_cast<size_t>(base + offset);
    return 0;
  }
  static long Tell(void* source) { return static_cast<long>(static_cast<MemoryStream*>(source)->position); }
};

const char* VorbisError(long code) {
  switch (code) {
    case OV_HOLE: return "data is missing between pages";
    case OV_EREAD: return "a read failed";
    case OV_ENOTVORBIS: return "not Vorbis data";
    case OV_EVERSION: return "a Vorbis version it does not know";
    case OV_EBADHEADER: return "a bad Vorbis header";
    case OV_EBADLINK: return "a bad link in a chained stream";
    case OV_ENOSEEK: return "the stream cannot be measured";
  }
  return "libvorbisfile reports an internal error";
}

Result<Audio> DecodeVorbis(std::span<const uint8_t> bytes, const AudioLimits& limits) {
  MemoryStream stream{bytes};
  OggVorbis_File file;
  const ov_callbacks callbacks{&MemoryStream::Read, &MemoryStream::Seek, nullptr, &MemoryStream::Tell};
  // On failure libvorbisfile clears the handle itself.
  if (const int r = ov_open_callbacks(&stream, &file, nullptr, 0, callbacks); r < 0) {
    return Status::Error(std::string("corrupt Ogg Vorbis: ") + VorbisError(r));
  }
  const std::unique_ptr<OggVorbis_File, int (*)(OggVorbis_File*)> closer(&file, &ov_clear);
  const vorbis_info* info = ov_info(&file, -1);
  if (info == nullptr) return Status::Error("corrupt Ogg Vorbis: no stream information");
  const int64_t total = ov_pcm_total(&file, -1);
  RETURN_IF_ERROR(CheckStream(total > 0 ? static_cast<uint64_t>(total) : 0, info->rate, info->channels, limits,
                              "Ogg Vorbis"));
  const int channels = info->channels;
  const long rate = info->rate;
  const uint64_t max_frames = MaxFrames(static_cast<int>(rate), limits);
  std::vector<float> mono;
  while (true) {
    float** pcm = nullptr;
    int link = 0;
    const long got = ov_read_float(&file, &pcm, 4096, &link);
    if (got == 0) break;
    if (got < 0) return Status::Error(std::string("corrupt Ogg Vorbis: ") + VorbisError(got));
    // A chained file whose later link has another rate or channel count would need resampling midway.
    const vorbis_info* now = ov_info(&file, link);
    if (now == nullptr || now->channels != channels || now->rate != rate) {
      return Status::Error("Ogg Vorbis changes its sample rate or channels midway: not supported");
    }
    if (mono.size() + static_cast<uint64_t>(got) > max_frames) return OverLimitWhileDecoding("Ogg Vorbis", limits);
    for (long i = 0; i < got; ++i) {
      double sum = 0.0;
      for (int c = 0; c < channels; ++c) sum += pcm[c][i];
      mono.push_back(channels == 1 ? pcm[0][i] : static_cast<float>(sum / channels));
    }
  }
  if (total > 0 && mono.size() < static_cast<uint64_t>(total)) {
    return Status::Error("Ogg Vorbis is truncated: its last page promises " + std::to_string(total) + " samples, " +
                         std::to_string(mono.size()) + " decode");
  }
  if (mono.empty()) return Status::Error("Ogg Vorbis holds no samples");
  Audio audio;
  audio.sample_rate = static_cast<int>(rate);
  audio.samples = std::move(mono);
  return audio;
}

}  // namespace

Result<Audio> DecodeOgg(std::span<const uint8_t> bytes, const AudioLimits& limits) {
  ASSIGN_OR_RETURN(const std::string_view codec, CheckOggPages(bytes));
  if (codec == "Vorbis") return DecodeVorbis(bytes, limits);
  if (codec == "Opus") return DecodeWithSndfile(bytes, AudioFormat::kOgg, limits);
  // libsndfile 1.2 opens FLAC in Ogg but cannot decode it.
  return Status::Error("Ogg holds " + std::string(codec) +
                       "; gemlet reads Opus and Vorbis in Ogg (and FLAC on its own)");
}

}  // namespace gemlet::media::internal
