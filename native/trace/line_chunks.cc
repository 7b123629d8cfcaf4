#include "trace/line_chunks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tailscope::trace {

namespace {

// Room for `capacity` bytes and the padding, keeping the first `keep`.
void grow(ChunkText& chunk, std::size_t capacity, std::size_t keep, std::size_t padding) {
  if (chunk.capacity >= capacity && chunk.data != nullptr) return;
  auto grown = std::make_unique_for_overwrite<char[]>(capacity + padding);
  if (keep > 0) std::memcpy(grown.get(), chunk.data.get(), keep);
  chunk.data = std::move(grown);
  chunk.capacity = capacity;
}

// Reads `len` bytes at `at` into `dst`, however many pread(2)s it takes;
// false on an error or when the file ends first (it shrank since it was
// opened: the single-job reader then reports the truncation).
bool pread_exactly(int fd, char* dst, std::size_t len, std::uint64_t at) {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = ::pread(fd, dst + done, len - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

LineChunks::LineChunks(GzipReadStream& stream, std::size_t target_bytes, std::size_t max_line_bytes,
                       std::size_t padding)
    : stream_(stream), target_bytes_(target_bytes), max_line_bytes_(max_line_bytes), padding_(padding) {}

void LineChunks::reserve(ChunkText& chunk, std::size_t capacity) const { grow(chunk, capacity, chunk.size, padding_); }

LineChunks::Status LineChunks::next(ChunkText& chunk, std::uint64_t* offset) {
  std::size_t want = std::max(target_bytes_, carry_.size() + 1);
  chunk.begin = 0;
  chunk.size = 0;
  reserve(chunk, want);
  std::memcpy(chunk.data.get(), carry_.data(), carry_.size());
  chunk.size = carry_.size();
  carry_.clear();
  for (;;) {
    bool more = true;
    while (chunk.size < want) {
      const std::size_t got = stream_.read(chunk.data.get() + chunk.size, want - chunk.size);
      if (got == 0) {
        more = false;
        break;
      }
      chunk.size += got;
    }
    if (!stream_.ok()) return Status::kStreamError;
    std::size_t cut = chunk.size;
    if (more) {
      // The last newline of what is read: the chunk is whole lines.
      const void* last = memrchr(chunk.data.get(), '\n', chunk.size);
      if (last == nullptr) {
        if (chunk.size >= max_line_bytes_) return Status::kLineTooLong;
        want = std::min(chunk.size * 2, max_line_bytes_);
        reserve(chunk, want);
        continue;
      }
      cut = static_cast<const char*>(last) - chunk.data.get() + 1;
    }
    carry_.assign(chunk.data.get() + cut, chunk.size - cut);
    chunk.size = cut;
    std::memset(chunk.data.get() + cut, 0, padding_);
    if (cut == 0) return Status::kEnd;
    *offset = offset_;
    offset_ += cut;
    return Status::kChunk;
  }
}

FileLineChunks::FileLineChunks(const std::string& path, std::size_t target_bytes, std::size_t max_line_bytes,
                               std::size_t padding)
    : target_bytes_(std::max<std::size_t>(target_bytes, 1)), max_line_bytes_(max_line_bytes), padding_(padding) {
  if (path == "-") return;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  unsigned char magic[2] = {0, 0};
  const bool plain = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                     // gzip's magic number: GzipReadStream and LineChunks inflate it.
                     !(st.st_size >= 2 && ::pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b);
  if (!plain) {
    ::close(fd);
    return;
  }
  fd_ = fd;
  size_ = static_cast<std::uint64_t>(st.st_size);
}

FileLineChunks::~FileLineChunks() {
  if (fd_ >= 0) ::close(fd_);
}

LineChunks::Status FileLineChunks::read(std::uint64_t index, ChunkText& chunk) const {
  chunk.begin = 0;
  chunk.size = 0;
  const std::uint64_t nominal = index * target_bytes_;
  if (!ok() || nominal >= size_) return LineChunks::Status::kEnd;
  const std::uint64_t nominal_end = std::min<std::uint64_t>(nominal + target_bytes_, size_);
  // From the byte before the nominal start: a line ending exactly there
  // makes the chunk start at its nominal start.
  const std::uint64_t base = index == 0 ? 0 : nominal - 1;
  std::size_t have = nominal_end - base;
  grow(chunk, have, 0, padding_);
  if (!pread_exactly(fd_, chunk.data.get(), have, base)) return LineChunks::Status::kStreamError;
  std::size_t begin = 0;
  if (index > 0) {
    const void* first = std::memchr(chunk.data.get(), '\n', have);
    if (first == nullptr) {
      // The line running through this stretch started in an earlier chunk,
      // which reads it to its end: nothing here.
      std::memset(chunk.data.get(), 0, padding_);
      return LineChunks::Status::kChunk;
    }
    begin = static_cast<const char*>(first) - chunk.data.get() + 1;
  }
  // The end: after the first newline at or after the nominal end - 1, read
  // on in growing steps while the last line runs on.
  std::size_t scanned = have - 1;  // the byte at nominal_end - 1 is the first candidate
  std::size_t end = have;
  if (begin < have) {
    for (;;) {
      const void* nl = std::memchr(chunk.data.get() + scanned, '\n', have - scanned);
      if (nl != nullptr) {
        end = static_cast<const char*>(nl) - chunk.data.get() + 1;
        break;
      }
      const std::uint64_t at = base + have;
      if (at >= size_) {
        end = have;  // the last line, without a newline
        break;
      }
      const std::size_t past = have - (nominal_end - base);
      if (past >= max_line_bytes_) return LineChunks::Status::kLineTooLong;
      // Doubling, from 64 KiB, and never more than one byte past the limit.
      const std::size_t step = std::min<std::uint64_t>(
          {std::max<std::size_t>(past, std::size_t{64} << 10), max_line_bytes_ - past + 1, size_ - at});
      if (have + step > chunk.capacity) grow(chunk, std::max(have + step, 2 * chunk.capacity), have, padding_);
      if (!pread_exactly(fd_, chunk.data.get() + have, step, at)) return LineChunks::Status::kStreamError;
      scanned = have;
      have += step;
    }
  }
  if (end - (nominal_end - base) > max_line_bytes_) return LineChunks::Status::kLineTooLong;
  chunk.begin = begin;
  chunk.size = end > begin ? end - begin : 0;
  std::memset(chunk.data.get() + begin + chunk.size, 0, padding_);
  return LineChunks::Status::kChunk;
}

bool is_blank_json(std::string_view text) {
  for (char c : text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}

}  // namespace tailscope::trace
