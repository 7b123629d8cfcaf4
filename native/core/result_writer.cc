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
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900, t.tm_mon + 1,
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>((epoch_ns / 1'000'000) % 1000));
  return buf;
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view text) {
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  // Built by appending: gcc 12 at -O3 warns falsely (-Wrestrict) on chained operator+.
  std::string tmp = dir.string();
  tmp.append("/.").append(target.filename().string()).append(".tmp.XXXXXX");
  int fd = mkstemp(tmp.data());
  if (fd < 0) fail("cannot write (no temporary file possible beside it)", path, errno);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("cannot flush", path, err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot close", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename temporary file onto", path, err);
  }
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

void emit_progress(std::string_view engine, std::string_view phase, double fraction_done,
                   const nlohmann::json& extra) {
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
