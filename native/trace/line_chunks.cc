#include "trace/line_chunks.h"

#include <algorithm>
#include <cstring>

namespace tailscope::trace {

LineChunks::LineChunks(GzipReadStream& stream, std::size_t target_bytes, std::size_t max_line_bytes,
                       std::size_t padding)
    : stream_(stream), target_bytes_(target_bytes), max_line_bytes_(max_line_bytes), padding_(padding) {}

void LineChunks::reserve(ChunkText& chunk, std::size_t capacity) const {
  if (chunk.capacity >= capacity && chunk.data != nullptr) return;
  auto grown = std::make_unique_for_overwrite<char[]>(capacity + padding_);
  if (chunk.size > 0) std::memcpy(grown.get(), chunk.data.get(), chunk.size);
  chunk.data = std::move(grown);
  chunk.capacity = capacity;
}

LineChunks::Status LineChunks::next(ChunkText& chunk, std::uint64_t* offset) {
  std::size_t want = std::max(target_bytes_, carry_.size() + 1);
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

bool is_blank_json(std::string_view text) {
  for (char c : text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}

}  // namespace tailscope::trace
