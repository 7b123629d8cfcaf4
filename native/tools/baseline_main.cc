// tailscope-baseline: measures this machine's physical references, pinned and
// unpinned, and prints one result document (docs/formats.md).
#include <CLI/CLI.hpp>
#include <cmath>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>

#include "baseline/reference.h"
#include "core/affinity.h"
#include "core/clock.h"
#include "core/hlog.h"
#include "core/latency_summary.h"
#include "core/result_writer.h"
#include "core/split.h"

using namespace tailscope;
using namespace tailscope::baseline;

int main(int argc, char** argv) {
  CLI::App app{
      "tailscope-baseline: physical references of this machine (thread start, condvar and spin "
      "hand-off, loopback TCP round trip, empty syscall, clock read)"};
  std::string out_path, artifacts_dir, only_text, placements_text = "pinned,unpinned", cpus_text;
  bool full = false;
  double scale = 1.0;
  double warmup_fraction = 0.1;
  app.add_option("--out", out_path, "Result document path (default: stdout)");
  app.add_option("--artifacts", artifacts_dir, "Folder for baseline.hlog (one tagged interval per measurement)");
  app.add_flag("--full", full, "Long form: 5x the samples of the quick form");
  app.add_option("--scale", scale, "Multiply every sample count (e.g. 0.1 for a smoke run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup-fraction", warmup_fraction, "Warm-up iterations, as a fraction of samples (never recorded)")
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--only", only_text, "Comma-separated reference names to run (default: all)");
  app.add_option("--placement", placements_text, "pinned, unpinned or both (comma-separated)");
  app.add_option("--cpus", cpus_text,
                 "CLIENT,SERVER cpus for the pinned variant (default: first and last allowed CPU)");
  CLI11_PARSE(app, argc, argv);

  try {
    CpuPair pair = default_cpu_pair();
    if (!cpus_text.empty()) {
      auto comma = cpus_text.find(',');
      if (comma == std::string::npos) throw std::invalid_argument("--cpus wants CLIENT,SERVER (e.g. 0,1)");
      pair.client_cpu = parse_cpu_list(cpus_text.substr(0, comma)).at(0);
      pair.server_cpu = parse_cpu_list(cpus_text.substr(comma + 1)).at(0);
      pair.shared = pair.client_cpu == pair.server_cpu;
    }
    std::vector<bool> placements;
    for (const std::string& item : split_list(placements_text)) {
      if (item == "pinned")
        placements.push_back(true);
      else if (item == "unpinned")
        placements.push_back(false);
      else
        throw std::invalid_argument("--placement: '" + item + "' is neither pinned nor unpinned");
    }
    if (placements.empty()) throw std::invalid_argument("--placement must name pinned and/or unpinned");
    const std::vector<std::string> only = split_list(only_text);
    for (const std::string& name : only) {
      bool known = false;
      for (const Reference& ref : all_references()) known |= ref.name == name;
      if (!known) throw std::invalid_argument("--only: unknown reference '" + name + "'");
    }

    nlohmann::json doc = new_result_document("tailscope-baseline", argc, argv);
    doc["config"] = {{"form", full ? "full" : "quick"},    {"scale", scale},
                     {"warmup_fraction", warmup_fraction}, {"client_cpu", pair.client_cpu},
                     {"server_cpu", pair.server_cpu},      {"cpus_shared", pair.shared}};
    if (pair.shared)
      doc["warnings"].push_back("only one CPU available: pinned variants run both sides on the same CPU");

    std::ostringstream hlog_text;
    HlogWriter hlog(hlog_text);
    const double start_epoch_s = static_cast<double>(realtime_ns()) / 1e9;
    hlog.write_header(start_epoch_s, "tailscope-baseline physical references");
    const int64_t t0_ns = monotonic_ns();

    std::vector<const Reference*> selected;
    for (const Reference& ref : all_references())
      if (only.empty() || std::find(only.begin(), only.end(), ref.name) != only.end()) selected.push_back(&ref);
    const size_t steps = selected.size() * placements.size();
    size_t step = 0;
    for (const Reference* ref : selected) {
      for (bool pinned : placements) {
        ReferenceConfig config;
        config.iterations = std::max<int64_t>(
            1, std::llround(static_cast<double>(ref->default_iterations) * (full ? 5.0 : 1.0) * scale));
        config.warmup_iterations = std::llround(static_cast<double>(config.iterations) * warmup_fraction);
        config.placement = {pinned, pair.client_cpu, pair.server_cpu};
        emit_progress("tailscope-baseline", ref->name + "/" + config.placement.variant(),
                      static_cast<double>(step) / static_cast<double>(steps));
        const int64_t begin_ns = monotonic_ns();
        ReferenceResult result = ref->run(config);
        const int64_t end_ns = monotonic_ns();
        ++step;
        nlohmann::json m = {{"name", ref->name},
                            {"variant", config.placement.variant()},
                            {"what", ref->what},
                            {"pinning", config.placement.to_json()},
                            {"iterations", config.iterations},
                            {"warmup_iterations", config.warmup_iterations},
                            {"wall_time_s", static_cast<double>(end_ns - begin_ns) / 1e9},
                            {"observed", result.observed}};
        if (!result.unavailable_reason.empty()) {
          doc["unavailable"].push_back(
              {{"name", ref->name}, {"variant", config.placement.variant()}, {"reason", result.unavailable_reason}});
          continue;
        }
        const std::string tag = ref->name + "." + config.placement.variant();
        m["latency"] = latency_summary(result.histogram);
        m["cdf"] = latency_cdf(result.histogram);
        m["hlog_tag"] = tag;
        hlog.write_interval(static_cast<double>(begin_ns - t0_ns) / 1e9, static_cast<double>(end_ns - begin_ns) / 1e9,
                            result.histogram, tag);
        doc["measurements"].push_back(m);
      }
    }
    emit_progress("tailscope-baseline", "done", 1.0);
    if (!artifacts_dir.empty()) {
      ensure_directory(artifacts_dir);
      write_file_atomic(artifacts_dir + "/baseline.hlog", hlog_text.str());
      doc["artifacts"] = {{"hlog", "baseline.hlog"}};
    }
    write_result(doc, out_path);
  } catch (const std::exception& e) {
    std::cerr << "tailscope-baseline: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
