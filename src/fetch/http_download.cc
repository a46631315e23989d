// The libcurl transfer loop: one attempt is one request from the current end of the partial file;
// what the response says (206 from our offset, 200 from zero, an error status) decides whether the
// bytes are appended, the file restarted, or the attempt retried after a pause.
#include "fetch/http_download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "store/fs_util.h"

namespace gemlet::fetch {

namespace {

using Clock = std::chrono::steady_clock;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// What a partial file's sidecar records: the URL and digest it is a prefix of, and the server's
// validators, sent back as If-Range so that a file changed on the server restarts from zero.
struct Sidecar {
  std::string url, sha256, etag, last_modified;
  uint64_t total = 0;
};

Sidecar ReadSidecar(const std::string& path) {
  Sidecar s;
  Result<std::string> text = store::ReadSmallFile(path);
  if (!text.ok()) return s;
  Result<nlohmann::json> parsed = ParseJson(*text, path);
  if (!parsed.ok() || !parsed->is_object()) return s;  // no usable record: the download starts over
  const nlohmann::json& j = *parsed;
  s.url = j.value("url", "");
  s.sha256 = j.value("sha256", "");
  s.etag = j.value("etag", "");
  s.last_modified = j.value("last_modified", "");
  s.total = j.value("total", uint64_t{0});
  return s;
}

Status WriteSidecar(const std::string& path, const Sidecar& s) {
  const nlohmann::json j = {{"url", s.url}, {"sha256", s.sha256}, {"etag", s.etag},
                            {"last_modified", s.last_modified}, {"total", s.total}};
  return store::WriteFileAtomic(path, j.dump() + "\n");
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// One request's state, shared with libcurl's callbacks.
struct Transfer {
  const DownloadRequest* request = nullptr;
  const FetchOptions* options = nullptr;
  Sidecar* sidecar = nullptr;
  std::string sidecar_path;
  int fd = -1;
  uint64_t offset = 0;   // where this request started
  uint64_t written = 0;  // bytes appended by it
  uint64_t total = 0;    // the whole file's size when the response said it
  // The response being read (a redirect's headers come first and are replaced).
  long status = 0;
  bool has_range = false;
  uint64_t range_start = 0, range_total = 0;
  uint64_t unsatisfied_total = 0;
  uint64_t content_length = 0;
  bool has_length = false;
  std::string etag, last_modified;
  bool body_started = false;
  bool restarted = false;  // the response was a whole file (200) although a range was asked for
  Status fatal;            // stops the download: a write failure, no space, a size the manifest denies
  bool retry_from_zero = false;  // the range came back from another offset, or past the end
  Clock::time_point start = Clock::now(), last_progress{};
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  Transfer& t = *static_cast<Transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    const size_t sp = line.find(' ');
    t.status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    t.has_range = t.has_length = false;
    t.etag.clear();
    t.last_modified.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string key = Lower(line.substr(0, colon));
  const std::string value = Trim(line.substr(colon + 1));
  if (key == "content-range") {
    unsigned long long a = 0, b = 0, total = 0;
    if (std::sscanf(value.c_str(), "bytes %llu-%llu/%llu", &a, &b, &total) == 3) {
      t.has_range = true;
      t.range_start = a;
      t.range_total = total;
    } else if (std::sscanf(value.c_str(), "bytes */%llu", &total) == 1) {
      t.unsatisfied_total = total;  // a 416's: the file's real size
    }
  } else if (key == "content-length") {
    t.has_length = true;
    t.content_length = std::strtoull(value.c_str(), nullptr, 10);
  } else if (key == "etag") {
    t.etag = value;
  } else if (key == "last-modified") {
    t.last_modified = value;
  }
  return size * n;
}

// The first body byte of the final response: decide where the bytes go.
bool StartBody(Transfer& t) {
  t.body_started = true;
  if (t.status == 206) {
    if (!t.has_range || t.range_start != t.offset) {
      t.retry_from_zero = true;  // not the bytes we asked for: our prefix and theirs may not line up
      return false;
    }
    t.total = t.range_total;
  } else if (t.status == 200) {
    if (t.offset > 0) {
      // The server ignored the Range (or If-Range said the file changed): the body is the whole
      // file, so it replaces the prefix.
      if (::ftruncate(t.fd, 0) != 0) {
        t.fatal = Status::Error("cannot truncate '" + t.request->partial + "': " + std::strerror(errno));
        return false;
      }
      t.offset = 0;
      t.restarted = true;
    }
    t.total = t.has_length ? t.content_length : 0;
  } else {
    return false;  // an error status: its body is not the file
  }
  const uint64_t expected = t.request->expected_size;
  if (expected > 0 && t.total > 0 && t.total != expected) {
    t.fatal = Status::Error(t.request->url + " is " + std::to_string(t.total) + " bytes, but " +
                            std::to_string(expected) + " were expected (the manifest's size)");
    return false;
  }
  // The disk-space check, before the first byte is written: what is left to come must fit.
  const uint64_t whole = t.total > 0 ? t.total : expected;
  if (whole > t.offset) {
    const std::string dir = t.request->partial.substr(0, t.request->partial.rfind('/'));
    uint64_t free_bytes = t.options->assume_free_bytes;
    if (free_bytes == 0) {
      Result<uint64_t> f = store::FreeBytes(dir);
      free_bytes = f.ok() ? *f : UINT64_MAX;
    }
    if (free_bytes < whole - t.offset) {
      t.fatal = Status::Error("not enough disk space in " + dir + " for " + t.request->url + ": " + Mib(whole - t.offset) +
                              " needed, " + Mib(free_bytes) + " free");
      return false;
    }
  }
  Sidecar s = *t.sidecar;
  s.url = t.request->url;
  s.sha256 = t.request->expected_sha256;
  if (!t.etag.empty()) s.etag = t.etag;
  if (!t.last_modified.empty()) s.last_modified = t.last_modified;
  if (t.total > 0) s.total = t.total;
  if (t.restarted || t.offset == 0) {
    s.etag = t.etag;
    s.last_modified = t.last_modified;
  }
  if (s.url != t.sidecar->url || s.sha256 != t.sidecar->sha256 || s.etag != t.sidecar->etag ||
      s.last_modified != t.sidecar->last_modified || s.total != t.sidecar->total) {
    if (Status w = WriteSidecar(t.sidecar_path, s); !w.ok()) {
      t.fatal = w;
      return false;
    }
    *t.sidecar = s;
  }
  return true;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  Transfer& t = *static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t.body_started && !StartBody(t)) return 0;
  if (t.status != 200 && t.status != 206) return 0;
  if (t.total > 0 && t.offset + t.written + bytes > t.total) {
    t.retry_from_zero = true;  // more than the server announced: nothing of it can be trusted
    return 0;
  }
  size_t done = 0;
  while (done < bytes) {
    const ssize_t w = ::pwrite(t.fd, data + done, bytes - done, static_cast<off_t>(t.offset + t.written + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      t.fatal = Status::Error("cannot write '" + t.request->partial + "': " + std::strerror(errno));
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  t.written += bytes;
  return bytes;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  Transfer& t = *static_cast<Transfer*>(user);
  if (!t.options->progress) return 0;
  const Clock::time_point now = Clock::now();
  if (now - t.last_progress < std::chrono::milliseconds(200)) return 0;
  t.last_progress = now;
  FetchProgress p;
  p.done = t.offset + t.written;
  p.total = t.total > 0 ? t.total : t.request->expected_size;
  const double seconds = std::chrono::duration<double>(now - t.start).count();
  p.bytes_per_second = seconds > 0 ? static_cast<double>(t.written) / seconds : 0;
  t.options->progress(p);
  return 0;
}

CURL* NewHandle(const std::string& url, curl_slist* headers, const FetchOptions& options) {
  const int stall_seconds = options.stall_seconds;
  GlobalInit();
  CURL* c = curl_easy_init();
  if (c == nullptr) return nullptr;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);  // Hugging Face answers resolve/ with a redirect to its CDN
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  // Only web protocols, also after a redirect (a server must not send us to file:// or scp://),
  // and an https URL stays https: a redirect to http would hand the transfer to anyone on the path.
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, url.rfind("https://", 0) == 0 ? "https" : "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled transfer (no byte for stall_seconds) fails and is resumed, rather than hanging forever.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1, stall_seconds)));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "gemlet/0.1");
  if (headers != nullptr) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  if (!options.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_file.c_str());
  // No CURLOPT_PROXY: libcurl then takes http_proxy, https_proxy and no_proxy from the environment.
  return c;
}

// libcurl's words for a failed transfer, with the one refusal of ours said plainly.
std::string CurlProblem(const std::string& url, CURLcode code, const char* error_buffer) {
  if (code == CURLE_UNSUPPORTED_PROTOCOL && url.rfind("https://", 0) == 0) {
    return url + ": redirected to a URL that is not https, which is refused (an https download stays https)";
  }
  return url + ": " + (error_buffer[0] ? std::string(error_buffer) : std::string(curl_easy_strerror(code)));
}

// The request's extra headers as libcurl takes them (nullptr for none); freed by the caller.
curl_slist* HeaderList(const std::vector<std::string>& headers) {
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  return list;
}

// Statuses worth another attempt: the server's trouble, not the request's.
bool Transient(long status) { return status >= 500 || status == 408 || status == 429; }

bool TransientCurl(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
      return true;
    default:
      return false;
  }
}

std::string StatusLine(const std::string& url, long status) {
  std::string m = url + ": HTTP " + std::to_string(status);
  if (status == 404) m += " (not found)";
  if (status == 401 || status == 403) {
    m += " (not authorized";
    if (url.find("/resolve/") != std::string::npos) m += ": a gated Hugging Face repository needs HF_TOKEN";
    m += ")";
  }
  return m;
}

}  // namespace

void DiscardPartial(const std::string& partial) {
  ::unlink(partial.c_str());
  ::unlink((partial + ".json").c_str());
}

Result<DownloadOutcome> Download(const DownloadRequest& request, const FetchOptions& options) {
  // One downloader per partial file: a second `gemlet pull` of the same file would interleave writes.
  ASSIGN_OR_RETURN(store::FileLock lock, store::FileLock::Acquire(request.partial + ".lock", /*blocking=*/false));
  const std::string sidecar_path = request.partial + ".json";
  Sidecar sidecar = ReadSidecar(sidecar_path);
  uint64_t have = FileSize(request.partial);
  // A prefix is resumed only when it is known to be of this file: same URL and digest, and either a
  // digest to check the result against or a validator the server can confirm with If-Range.
  // Otherwise a changed file on the server would be spliced onto an old prefix unseen.
  const bool same = sidecar.url == request.url && sidecar.sha256 == request.expected_sha256;
  const bool checkable = !request.expected_sha256.empty() || !sidecar.etag.empty() || !sidecar.last_modified.empty();
  const uint64_t known_total = request.expected_size > 0 ? request.expected_size : sidecar.total;
  if (have > 0 && (!same || !checkable || (known_total > 0 && have > known_total))) {
    DiscardPartial(request.partial);
    have = 0;
    sidecar = Sidecar{};
  }
  const int fd = ::open(request.partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error("cannot create '" + request.partial + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  DownloadOutcome outcome;
  if (have > 0 && known_total > 0 && have == known_total) {
    outcome.size = have;  // complete already (an earlier run died before installing it)
    outcome.resumed = true;
    return outcome;
  }
  int failures = 0;  // attempts in a row that got no byte further
  for (;;) {
    have = FileSize(request.partial);
    const uint64_t known = request.expected_size > 0 ? request.expected_size : sidecar.total;
    Transfer t;
    t.request = &request;
    t.options = &options;
    t.sidecar = &sidecar;
    t.sidecar_path = sidecar_path;
    t.fd = fd;
    t.offset = have;
    curl_slist* headers = HeaderList(request.headers);
    if (have > 0) {
      // Strong ETags only: If-Range with a weak one is not allowed, so fall back to the date.
      const std::string validator = !sidecar.etag.empty() && sidecar.etag.rfind("W/", 0) != 0 ? sidecar.etag : sidecar.last_modified;
      if (!validator.empty()) headers = curl_slist_append(headers, ("If-Range: " + validator).c_str());
      if (options.log) options.log("resuming " + request.url + " at " + Mib(have));
    }
    CURL* c = NewHandle(request.url, headers, options);
    if (c == nullptr) {
      curl_slist_free_all(headers);
      return Status::Error("libcurl could not start a transfer");
    }
    const std::string range = std::to_string(have) + "-";
    if (have > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    const CURLcode code = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    // A redirect to a protocol we do not follow (https to http): the 3xx is what came, not an error
    // status of the file's server.
    if (code == CURLE_UNSUPPORTED_PROTOCOL) return Status::Error(CurlProblem(request.url, code, error_buffer));
    if (t.restarted) {
      outcome.resumed = false;
    } else if (have > 0 && t.body_started) {
      outcome.resumed = true;
    }

    if (!t.fatal.ok()) return t.fatal;  // the partial stays: its bytes are right, and resume once fixed
    std::string problem;  // every branch that does not return retries
    if (t.retry_from_zero) {
      if (::ftruncate(fd, 0) != 0) return Status::Error("cannot truncate '" + request.partial + "': " + std::strerror(errno));
      sidecar = Sidecar{};
      ::unlink(sidecar_path.c_str());
      outcome.resumed = false;
      problem = "the server sent other bytes than the range asked for";
    } else if (status == 416) {
      // Our prefix is as long as the file or longer: the prefix is whole (a response that claimed
      // more than it sent), or the file changed. The digest decides the first; the second restarts.
      const uint64_t real = t.unsatisfied_total > 0 ? t.unsatisfied_total : known;
      if (real > 0 && have == real && (request.expected_size == 0 || real == request.expected_size)) {
        outcome.size = have;
        return outcome;
      }
      if (::ftruncate(fd, 0) != 0) return Status::Error("cannot truncate '" + request.partial + "': " + std::strerror(errno));
      outcome.resumed = false;
      problem = "the server refused the range";
    } else if (status != 0 && status != 200 && status != 206) {
      if (!Transient(status)) return Status::Error(StatusLine(request.url, status));
      problem = StatusLine(request.url, status);
    } else if (code != CURLE_OK) {
      problem = CurlProblem(request.url, code, error_buffer);
      if (!TransientCurl(code)) return Status::Error(problem);
    } else {
      const uint64_t size = t.offset + t.written;
      const uint64_t total = t.total > 0 ? t.total : request.expected_size;
      if (total > 0 && size < total) {
        // A clean end short of the size (a Content-Length smaller than the file): go on from here.
        problem = request.url + ": the response ended at " + Mib(size) + " of " + Mib(total);
        } else {
        outcome.size = size;
        return outcome;
      }
    }
    // Progress is bytes kept: an attempt that had to start the file again made none, so a server
    // that keeps sending other bytes than asked for runs out of retries instead of looping.
    const bool progressed = !t.retry_from_zero && status != 416 && t.offset + t.written > have;
    failures = progressed ? 0 : failures + 1;
    if (failures > options.retries) return Status::Error(problem + " (gave up after " + std::to_string(failures) + " attempts)");
    if (failures > 0) {
      const int delay = std::min(30000, options.retry_delay_ms << std::min(failures - 1, 16));
      if (options.log) {
        options.log(problem + "; retrying in " + std::to_string(delay / 1000.0).substr(0, 4) + " s (" +
                    std::to_string(failures) + "/" + std::to_string(options.retries) + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    } else if (options.log) {
      options.log(problem + "; resuming");
    }
  }
}

namespace {
size_t OnText(char* data, size_t size, size_t n, void* user) {
  std::string& out = *static_cast<std::string*>(user);
  if (out.size() + size * n > (16u << 20)) return 0;
  out.append(data, size * n);
  return size * n;
}
}  // namespace

namespace {

size_t OnHeaderLine(char* data, size_t size, size_t n, void* user) {
  static_cast<std::vector<std::string>*>(user)->emplace_back(data, size * n);
  return size * n;
}

// An ETag's value without W/ and quotes, when it is a SHA-256 (64 hex digits).
std::string DigestOfEtag(std::string v) {
  if (v.rfind("W/", 0) == 0) v.erase(0, 2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  v = Lower(v);
  const bool hex = v.size() == 64 && v.find_first_not_of("0123456789abcdef") == std::string::npos;
  return hex ? v : std::string();
}

}  // namespace

Result<HubFileInfo> HeadHubFile(const std::string& url, const std::vector<std::string>& headers, const FetchOptions& options) {
  curl_slist* list = HeaderList(headers);
  CURL* c = NewHandle(url, list, options);
  if (c == nullptr) {
    curl_slist_free_all(list);
    return Status::Error("libcurl could not start a transfer");
  }
  // The hub's own answer, not the CDN's it redirects to: the digest is in the redirect's headers.
  curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  std::vector<std::string> lines;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeaderLine);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &lines);
  const CURLcode code = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(list);
  if (code != CURLE_OK) {
    return Status::Error(CurlProblem(url, code, error_buffer));
  }
  if (status >= 400) return Status::Error(StatusLine(url, status));
  HubFileInfo info;
  std::string etag;
  for (const std::string& line : lines) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Lower(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "x-linked-etag") info.sha256 = DigestOfEtag(value);
    if (key == "etag") etag = DigestOfEtag(value);
    if (key == "x-linked-size") info.size = std::strtoull(value.c_str(), nullptr, 10);
  }
  // A file kept outside LFS has no linked ETag, and its own ETag is a git hash, not a SHA-256;
  // one whose ETag is 64 hex digits is an LFS file answered without the redirect.
  if (info.sha256.empty()) info.sha256 = etag;
  return info;
}

Result<std::string> FetchText(const std::string& url, const std::vector<std::string>& headers, const FetchOptions& options) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    const std::string path = url.rfind("file://", 0) == 0 ? url.substr(7) : url;
    return store::ReadSmallFile(path);
  }
  int failures = 0;
  for (;;) {
    curl_slist* list = HeaderList(headers);
    CURL* c = NewHandle(url, list, options);
    if (c == nullptr) {
      curl_slist_free_all(list);
      return Status::Error("libcurl could not start a transfer");
    }
    std::string body;
    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnText);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    const CURLcode code = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(list);
    std::string problem;
    if (code == CURLE_OK && status == 200) return body;
    if (code == CURLE_OK) {
      if (!Transient(status)) return Status::Error(StatusLine(url, status));
      problem = StatusLine(url, status);
    } else {
      problem = CurlProblem(url, code, error_buffer);
      if (code == CURLE_WRITE_ERROR) return Status::Error(url + ": larger than 16 MiB, not a manifest");
      if (!TransientCurl(code)) return Status::Error(problem);
    }
    if (++failures > options.retries) return Status::Error(problem + " (gave up after " + std::to_string(failures) + " attempts)");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(30000, options.retry_delay_ms << std::min(failures - 1, 16))));
  }
}

}  // namespace gemlet::fetch
