#include "core/result_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "core/clock.h"
#include "core/machine_info.h"

#ifndef TAILSCOPE_VERSION
#define TAILSCOPE_VERSION "0.0.0"
#endif

namespace tailscope {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(err));
}

std::string iso8601_utc(int64_t epoch_ns) {
  time_t secs = static_cast<time_t>(epoch_ns / 1'000'000'000);
  tm t{};
  gmtime_r(&secs, &t);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>((epoch_ns / 1'000'000) % 1000));
  return buf;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // A device or a pipe (`--out /dev/null`, /dev/stdout, a FIFO) is written
    // in place: there is no half-written file to avoid, and renaming a
    // temporary file onto it would replace the node itself (run as root,
    // `tailscope-critpath --out /dev/null` turned /dev/null into a regular
    // file).
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot write", path, errno);
    in_place_ = true;
    return;
  }
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  // Built by appending: gcc 12 at -O3 warns falsely (-Wrestrict) on chained operator+.
  temp_ = dir.string();
  temp_.append("/.").append(target.filename().string()).append(".tmp.XXXXXX");
  fd_ = mkstemp(temp_.data());
  if (fd_ < 0) fail("cannot write (no temporary file possible beside it)", path, errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!in_place_) ::unlink(temp_.c_str());
  }
}

void AtomicFileWriter::fail_and_remove(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!in_place_) ::unlink(temp_.c_str());
  fail(what, path_, err);
}

void AtomicFileWriter::append(std::string_view text) {
  constexpr size_t kBlockBytes = 1 << 20;
  // A large piece (a whole document, a --jobs chunk's results) goes straight
  // to write(2): copying it into the buffer first cost tailscope-critpath's
  // merging thread 5 % of its samples (docs/measurements.md#trace-analyzer).
  constexpr size_t kDirectBytes = kBlockBytes / 4;
  if (text.size() >= kDirectBytes) {
    if (!buffer_.empty()) flush_buffer();
    write_all(text);
    return;
  }
  buffer_.append(text);
  if (buffer_.size() >= kBlockBytes) flush_buffer();
}

void AtomicFileWriter::flush() {
  if (!buffer_.empty()) flush_buffer();
}

void AtomicFileWriter::flush_buffer() {
  write_all(buffer_);
  buffer_.clear();
}

void AtomicFileWriter::write_all(std::string_view bytes) {
  if (fd_ < 0) fail("cannot write (already committed or failed)", path_, EBADF);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_and_remove("cannot write", errno);
    done += static_cast<size_t>(n);
  }
  if (write_back_early_ && !bytes.empty()) {
    // Advisory: an error here (a filesystem without it) leaves the writeback
    // to commit()'s fsync, which reports real write errors.
    (void)::sync_file_range(fd_, static_cast<off_t>(written_bytes_), static_cast<off_t>(bytes.size()),
                            SYNC_FILE_RANGE_WRITE);
  }
  written_bytes_ += bytes.size();
}

void AtomicFileWriter::commit() {
  flush_buffer();
  if (in_place_) {  // nothing to sync or rename (fsync(2) of a pipe fails with EINVAL)
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close", path_, errno);
    return;
  }
  if (::fchmod(fd_, 0644) != 0 || ::fsync(fd_) != 0) fail_and_remove("cannot flush", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp_.c_str());
    fail("cannot close", path_, err);
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_.c_str());
    fail("cannot rename temporary file onto", path_, err);
  }
}

void write_file_atomic(const std::string& path, std::string_view text) {
  AtomicFileWriter writer(path);
  writer.append(text);
  writer.commit();
}

void write_result(const nlohmann::json& doc, const std::string& path) {
  std::string text = doc.dump(2) + "\n";
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    if (!std::cout) throw std::runtime_error("cannot write result to stdout");
    return;
  }
  write_file_atomic(path, text);
}

nlohmann::json new_result_document(std::string_view engine, int argc, char** argv) {
  nlohmann::json cmd = nlohmann::json::array();
  for (int i = 0; i < argc; ++i) cmd.push_back(argv[i]);
  return {{"schema", kResultSchema},
          {"engine", engine},
          {"engine_version", TAILSCOPE_VERSION},
          {"started_at", iso8601_utc(realtime_ns())},
          {"command_line", cmd},
          {"machine", to_json(read_machine_info())},
          {"measurements", nlohmann::json::array()},
          {"unavailable", nlohmann::json::array()},
          {"warnings", nlohmann::json::array()}};
}

void emit_progress(std::string_view engine, std::string_view phase, double fraction_done, const nlohmann::json& extra) {
  nlohmann::json line = {{"engine", engine}, {"phase", phase}, {"fraction_done", fraction_done}};
  for (auto& [k, v] : extra.items()) line[k] = v;
  std::cerr << line.dump() << '\n' << std::flush;
}

void ensure_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create directory '" + dir + "': " + ec.message());
}

}  // namespace tailscope
