#include "store/fs_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gemlet::store {

namespace {
std::string Errno() { return std::strerror(errno); }

Status WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Error("cannot write '" + path + "': " + Errno());
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}
}  // namespace

Status SyncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error("cannot open '" + path + "': " + Errno());
  const int rc = ::fsync(fd);
  const std::string err = Errno();
  ::close(fd);
  if (rc != 0) return Status::Error("cannot sync '" + path + "': " + err);
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Error("cannot open '" + dir + "': " + Errno());
  ::fsync(fd);  // some filesystems refuse fsync on folders; the rename is still atomic there
  ::close(fd);
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error("cannot create '" + tmp + "': " + Errno());
  Status s = WriteAll(fd, bytes.data(), bytes.size(), tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Status::Error("cannot sync '" + tmp + "': " + Errno());
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Status::Error("cannot rename '" + tmp + "' to '" + path + "': " + Errno());
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const size_t slash = path.rfind('/');
  return SyncDir(slash == std::string::npos ? "." : path.substr(0, slash));
}

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read '" + path + "': " + Errno());
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read '" + path + "'");
  return s.str();
}

Result<FileLock> FileLock::Acquire(const std::string& path, bool blocking) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error("cannot open the lock file '" + path + "': " + Errno());
  for (;;) {
    if (::flock(fd, LOCK_EX | (blocking ? 0 : LOCK_NB)) == 0) return FileLock(fd);
    if (errno == EINTR) continue;
    const bool busy = errno == EWOULDBLOCK;
    const std::string err = Errno();
    ::close(fd);
    if (busy) return Status::Error("'" + path + "' is locked by another gemlet process");
    return Status::Error("cannot lock '" + path + "': " + err);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

Result<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return Status::Error("cannot read the free space of '" + dir + "': " + Errno());
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

}  // namespace gemlet::store
