// The engine side of the engine/driver contract: one JSON result document per
// run (docs/formats.md), written atomically so a crash never leaves half a file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tailscope {

inline constexpr std::string_view kResultSchema = "tailscope.result/1";

// Writes `text` to `path` via a temp file in the same directory + fsync +
// rename(2), so readers see either the old file or the whole new one.
// Throws std::runtime_error naming the path and errno text on failure
// (unwritable folder, full disk); the temp file is removed in that case.
void write_file_atomic(const std::string& path, std::string_view text);

// The same for output too large to hold in memory (an engine's per-trace
// NDJSON): append() streams into a temporary file beside `path`; commit()
// fsyncs and renames it into place. Until commit() succeeds, the destructor
// removes the temporary file, so every failure path (an exception, an early
// return) leaves nothing half-written. Errors throw std::runtime_error naming
// `path`. temp_path() lets a signal handler unlink it (async-signal-safe).
// A `path` that is a device or a pipe (/dev/null, a FIFO) is written in place.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void append(std::string_view text);
  // Writes out what append() holds back (it gathers appends under 256 KiB into
  // blocks of 1 MiB; larger ones are written directly, without a copy). A writer fed a little at a time over a long run
  // (the span spiller) calls it after each batch, so its memory stays one batch, not a block that fills over minutes
  // (`make soak` read that as RSS growth).
  void flush();
  void commit();
  // Starts the disk's writeback of what is written, block by block
  // (sync_file_range, no waiting), so that commit()'s fsync waits for the
  // last blocks only. For a large artifact (tailscope-critpath's
  // critical_paths.ndjson, ~40 % of its input) the fsync at the end was
  // wall time after all the CPU work: measured (strace -T) on the
  // development VM, 50 ms for a 300 000-span run's 69 MB, 0.5-4 ms with this.
  void write_back_as_written() { write_back_early_ = true; }
  const std::string& path() const { return path_; }
  // "" when `path` is a device or a pipe, written in place.
  const char* temp_path() const { return temp_.c_str(); }

 private:
  void flush_buffer();
  void write_all(std::string_view bytes);
  [[noreturn]] void fail_and_remove(const std::string& what, int err);

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  std::string buffer_;  // writes go out in large blocks, not per line
  bool write_back_early_ = false;
  bool in_place_ = false;            // a device or a pipe: no temporary file, no rename
  std::uint64_t written_bytes_ = 0;  // offset of the next write
};

// Dumps `doc` (pretty, 2 spaces) to `path` atomically, or to stdout if path is "" or "-".
void write_result(const nlohmann::json& doc, const std::string& path);

// Starts a result document with the fields every engine fills the same way:
// schema, engine name and version, start time, machine facts, and the command line.
nlohmann::json new_result_document(std::string_view engine, int argc, char** argv);

// Progress for the driver's bars: one JSON object per line on stderr.
void emit_progress(std::string_view engine, std::string_view phase, double fraction_done,
                   const nlohmann::json& extra = nlohmann::json::object());

// Creates `dir` and parents if missing; throws std::runtime_error on failure.
void ensure_directory(const std::string& dir);

}  // namespace tailscope
