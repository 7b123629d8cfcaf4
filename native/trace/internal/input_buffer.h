// The trace readers' input (trace_reader.cc): the decompressed bytes of a
// file, or a text in memory, seen through one growing window. The simdjson
// path reads whole values from the window (cursor(), available()); the
// RapidJSON path reads it as a stream (Peek/Take).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "trace/gzip_read_stream.h"

namespace tailscope::trace::internal {

inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The reader's input: a window over the (decompressed) bytes, refilled from
// the file in chunks and grown only while one top-level value does not fit.
// It is also RapidJSON's input stream for the slow path
// (rapidjson_value_reader.h). The bytes past the filled part are readable
// padding, as simdjson needs.
class InputBuffer {
 public:
  using Ch = char;
  static constexpr std::size_t kChunkBytes = 1 << 20;

  InputBuffer(GzipReadStream* source, std::size_t padding) : source_(source), padding_(padding) {
    reserve(kChunkBytes);
  }
  // In-memory input: the whole text, no source.
  InputBuffer(std::string_view text, std::size_t padding) : padding_(padding) {
    // Copied once and only the padding zeroed: tailscope-critpath --jobs N
    // reads every chunk of the input this way.
    buffer_ = std::make_unique_for_overwrite<char[]>(text.size() + padding_ + 1);
    std::memcpy(buffer_.get(), text.data(), text.size());
    std::memset(buffer_.get() + text.size(), 0, padding_ + 1);
    data_ = buffer_.get();
    capacity_ = end_ = text.size();
  }
  // In-memory input read in place: `padded_text` is followed by at least
  // `padding` + 1 zero bytes (never written: with no source, fill() does not run).
  struct Borrowed {};
  InputBuffer(Borrowed, std::string_view padded_text, std::size_t padding)
      : padding_(padding), data_(padded_text.data()), capacity_(padded_text.size()), end_(padded_text.size()) {}

  const char* cursor() const { return data_ + pos_; }
  std::size_t available() const { return end_ - pos_; }
  void skip(std::size_t n) { pos_ += n; }
  // Reads more input after what is buffered (moving it to the buffer's start,
  // so cursor() changes). False at the end of input.
  bool fill() {
    if (source_ == nullptr || source_->at_end()) return false;
    if (pos_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + pos_, end_ - pos_);
      consumed_ += pos_;
      end_ -= pos_;
      pos_ = 0;
    }
    if (capacity_ - end_ < kChunkBytes / 2) reserve(2 * capacity_);
    const std::size_t n = source_->read(buffer_.get() + end_, capacity_ - end_);
    end_ += n;
    std::memset(buffer_.get() + end_, 0, padding_);  // '\0' ends RapidJSON's view
    return n > 0;
  }
  // True at the real end of input (Peek() is also '\0' at a NUL byte).
  bool at_end() { return pos_ == end_ && !fill(); }
  // Whether rewind_to() can go back past the buffer's start (a regular file,
  // or text in memory; not a pipe).
  bool rewindable() const { return source_ == nullptr || source_->rewindable(); }
  // Moves the read position back to input offset `offset` (at most Tell()):
  // inside the buffer while those bytes are still there, else by reading the
  // source again from its start. False when it cannot.
  bool rewind_to(std::uint64_t offset) {
    if (offset >= consumed_) {
      pos_ = offset - consumed_;
      return true;
    }
    if (source_ == nullptr || !source_->rewind()) return false;
    consumed_ = pos_ = end_ = 0;
    while (consumed_ + end_ < offset) {
      pos_ = end_;  // drop what is before the offset
      if (!fill()) return false;
    }
    pos_ = offset - consumed_;
    return true;
  }

  // Skips JSON whitespace (as RapidJSON's SkipWhitespace does, reading more
  // input as needed).
  void skip_whitespace() {
    while (is_json_space(Peek())) Take();
  }

  // RapidJSON stream concept.
  Ch Peek() {
    if (pos_ == end_) fill();
    return data_[pos_];
  }
  Ch Take() {
    const Ch c = Peek();
    if (pos_ < end_) ++pos_;
    return c;
  }
  std::size_t Tell() const { return consumed_ + pos_; }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  std::size_t PutEnd(Ch*) { return 0; }

 private:
  void reserve(std::size_t capacity) {
    auto grown = std::make_unique_for_overwrite<char[]>(capacity + padding_ + 1);
    if (buffer_ != nullptr) std::memcpy(grown.get(), buffer_.get(), end_);
    // Only the padding after the filled part is ever read (fill() zeroes it
    // again after each read): zeroing the whole room was a megabyte written
    // for every file.
    std::memset(grown.get() + end_, 0, padding_ + 1);
    buffer_ = std::move(grown);
    data_ = buffer_.get();
    capacity_ = capacity;
  }

  GzipReadStream* source_ = nullptr;
  std::size_t padding_;
  std::unique_ptr<char[]> buffer_;  // owned text (null for Borrowed)
  const char* data_ = nullptr;      // buffer_, or the borrowed text
  std::size_t capacity_ = 0;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::size_t consumed_ = 0;  // input bytes dropped from the buffer's front
};

}  // namespace tailscope::trace::internal
