#include "trace/gzip_read_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace tailscope::trace {

GzipReadStream::GzipReadStream(const std::string& path) {
  int fd = path == "-" ? dup(STDIN_FILENO) : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = std::strerror(errno);
    eof_ = true;
    return;
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) size_at_open_ = st.st_size;
  fd_ = fd;
  file_ = gzdopen(fd, "rb");
  if (file_ == nullptr) {
    close(fd);
    error_ = "cannot start zlib reader";
    eof_ = true;
    return;
  }
  gzbuffer(file_, kBufferBytes);
  // Reads the first bytes to tell gzip from plain input.
  compressed_ = gzdirect(file_) == 0;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> GzipReadStream::shrunk_since_open() const {
  struct stat st {};
  if (size_at_open_ < 0 || file_ == nullptr || fstat(fd_, &st) != 0 || st.st_size >= size_at_open_) return std::nullopt;
  return std::make_pair(static_cast<std::uint64_t>(size_at_open_), static_cast<std::uint64_t>(st.st_size));
}

bool GzipReadStream::rewind() {
  if (!rewindable() || !error_.empty() || gzrewind(file_) != 0) return false;
  eof_ = false;
  return true;
}

GzipReadStream::~GzipReadStream() {
  if (file_ != nullptr) gzclose(file_);
}

std::size_t GzipReadStream::read(char* dst, std::size_t max) {
  if (eof_ || max == 0) return 0;
  const auto want = static_cast<unsigned>(std::min<std::size_t>(max, INT_MAX));
  const int n = gzread(file_, dst, want);
  const std::size_t got = n > 0 ? static_cast<std::size_t>(n) : 0;
  if (n < 0 || got < want) {
    // A short read means end of input or an error; zlib reports a truncated
    // gzip member as Z_BUF_ERROR only here, after the data it could inflate.
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END) {
      error_ = std::string("gzip: ") + (message != nullptr ? message : "read error");
    } else if (n < 0) {
      error_ = "read error";
    }
    eof_ = true;
  }
  return got;
}

}  // namespace tailscope::trace
