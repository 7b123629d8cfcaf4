#include "trace/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tailscope::trace {

namespace {
std::size_t PageBytes() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
constexpr std::size_t kReleaseEveryBytes = 32u << 20;
}  // namespace

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, mapped_bytes_);
  if (scratch_ != nullptr) munmap(scratch_, scratch_bytes_);
}

bool MappedFile::Open(int fd, std::size_t size) {
  const std::size_t page = PageBytes();
  const std::size_t file_pages = (size + page - 1) / page * page;
  // One anonymous zero page after the file's pages: the '\0' sentinel even
  // when the size is a multiple of the page size.
  mapped_bytes_ = file_pages + page;
  void* base = mmap(nullptr, mapped_bytes_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    error_ = std::strerror(errno);
    return false;
  }
  data_ = static_cast<char*>(base);
  size_ = size;
  if (size > 0 && mmap(base, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
    error_ = std::strerror(errno);
    return false;
  }
  madvise(base, file_pages, MADV_SEQUENTIAL);
  scratch_bytes_ = file_pages + page;
  void* scratch = mmap(nullptr, scratch_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (scratch == MAP_FAILED) {
    scratch_bytes_ = 0;
    error_ = std::strerror(errno);
    return false;
  }
  scratch_ = static_cast<char*>(scratch);
  return true;
}

void MappedFile::ReleaseBefore(std::size_t offset) {
  if (offset < released_ + kReleaseEveryBytes) return;
  const std::size_t page = PageBytes();
  const std::size_t end = offset / page * page;
  if (end <= released_) return;
  madvise(data_ + released_, end - released_, MADV_DONTNEED);
  released_ = end;
}

}  // namespace tailscope::trace
