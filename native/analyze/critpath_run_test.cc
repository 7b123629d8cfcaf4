// tailscope-critpath --jobs N: the result document and every artifact are
// byte-identical to --jobs 1 (apart from config.jobs and the timings), on the
// conformance fixtures, the synthetic trace sets, a fuzzed corpus, traces
// split across lines and invalid input. Chunks are made tiny so that small
// inputs split into many of them and the workers finish out of order.
#include "analyze/critpath_run.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "trace/conformance_fixtures.h"
#include "trace/testing/synthetic_traces.h"

namespace tailscope::analyze {
namespace {

namespace fs = std::filesystem;
using trace::testing::SyntheticFormat;

const std::vector<std::size_t> kJobs = {1, 2, 3, 8};

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("critpath-run-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What a run produced, with the parts that may differ between job counts
// (start time, command line, machine, timings, config.jobs, artifact paths)
// taken out.
struct Outcome {
  std::string document;
  std::string error;
  std::vector<std::pair<std::string, std::string>> artifacts;  // file name, bytes
};

// The document's text, its per-trace results printed from their text
// (analyze/pretty_json.h), is byte for byte what the engine printed before
// that: the document with every result parsed into it, dumped. Checked on
// every run of these tests (fixtures, synthetic sets, fuzzed dirty traces).
void expect_text_as_nlohmann_prints_it(const CritpathDocument& result) {
  nlohmann::ordered_json parsed = result.document;
  ASSERT_TRUE(parsed.contains("traces"));
  EXPECT_TRUE(parsed["traces"].empty());
  for (const std::string& t : result.traces) parsed["traces"].push_back(nlohmann::ordered_json::parse(t));
  for (int indent : {1, 2}) {
    const std::string expected = parsed.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    EXPECT_TRUE(critpath_document_text(result, indent) == expected)
        << "indent " << indent << ": the document's text differs from nlohmann's dump";
  }
}

Outcome run(CritpathOptions options, std::size_t jobs, const fs::path& dir) {
  Outcome outcome;
  const fs::path artifacts = dir / ("jobs-" + std::to_string(jobs));
  if (!options.artifacts_dir.empty()) options.artifacts_dir = artifacts.string();
  std::string argv0 = "tailscope-critpath";
  char* argv[] = {argv0.data(), nullptr};
  try {
    CritpathDocument result = run_critpath(options, jobs, 1, argv);
    expect_text_as_nlohmann_prints_it(result);
    nlohmann::ordered_json& doc = result.document;
    EXPECT_EQ(doc["config"]["jobs"], jobs);
    for (const char* key : {"started_at", "command_line", "machine", "artifacts"}) doc.erase(key);
    doc["summary"].erase("elapsed_s");
    doc["summary"].erase("spans_per_s");
    doc["config"].erase("jobs");
    outcome.document = critpath_document_text(result, 1);
  } catch (const InputError& e) {
    outcome.error = e.what();
  }
  std::error_code ec;
  if (fs::is_directory(artifacts, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(artifacts)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) outcome.artifacts.emplace_back(f.filename().string(), slurp(f));
  }
  return outcome;
}

// Runs every job count and checks each against one job; returns one job's outcome.
Outcome expect_same_for_every_job_count(const CritpathOptions& options) {
  const TempDir dir;
  Outcome one = run(options, 1, dir.path());
  for (std::size_t jobs : kJobs) {
    if (jobs == 1) continue;
    const Outcome n = run(options, jobs, dir.path());
    EXPECT_EQ(n.error, one.error) << "--jobs " << jobs;
    EXPECT_TRUE(n.document == one.document) << "--jobs " << jobs << ": the result document differs";
    EXPECT_EQ(n.artifacts.size(), one.artifacts.size()) << "--jobs " << jobs;
    for (std::size_t i = 0; i < std::min(n.artifacts.size(), one.artifacts.size()); ++i) {
      EXPECT_EQ(n.artifacts[i].first, one.artifacts[i].first);
      EXPECT_TRUE(n.artifacts[i].second == one.artifacts[i].second)
          << "--jobs " << jobs << ": " << n.artifacts[i].first << " differs";
    }
  }
  return one;
}

CritpathOptions every_output(std::vector<std::string> inputs) {
  CritpathOptions options;
  options.inputs = std::move(inputs);
  options.artifacts_dir = "set-per-run";
  options.span_dump = true;
  options.chunk_bytes = 700;  // a few traces per chunk
  return options;
}

std::uint64_t document_traces(const Outcome& o) {
  return nlohmann::json::parse(o.document)["summary"]["traces"].get<std::uint64_t>();
}

TEST(CritpathRunTest, ConformanceFixturesGiveTheSameResultForEveryJobCount) {
  TAILSCOPE_REQUIRE_FIXTURE(trace::testing::fixtures_dir());
  std::vector<std::string> inputs;
  for (const char* subdir : {"jaeger-ui", "crisp"}) {
    for (const std::string& name : trace::testing::fixture_names(subdir)) {
      if (name != trace::testing::kFixturesAbsent) {
        inputs.push_back((trace::testing::fixtures_dir() / subdir / (name + ".json")).string());
      }
    }
  }
  ASSERT_FALSE(inputs.empty());
  for (const char* algorithm : {"capstone", "jaeger", "crisp"}) {
    CritpathOptions options = every_output(inputs);
    options.algorithm = algorithm;
    options.chunk_bytes = 64;  // the fixtures are pretty-printed: most chunks cut a trace
    const Outcome one = expect_same_for_every_job_count(options);
    EXPECT_TRUE(one.error.empty()) << one.error;
    EXPECT_GT(document_traces(one), 0u);
  }
}

TEST(CritpathRunTest, SyntheticTraceSetsGiveTheSameResultForEveryJobCount) {
  const TempDir dir;
  std::vector<std::string> inputs;
  std::size_t expected_traces = 0;
  for (auto [format, name] :
       {std::pair{SyntheticFormat::kJaegerNdjson, "ndjson.json"}, std::pair{SyntheticFormat::kOtlpNdjson, "otlp.json"},
        std::pair{SyntheticFormat::kJaegerEnvelope, "envelope.json"}}) {
    std::size_t traces = 0;
    const std::string text =
        trace::testing::synthetic_trace_text({.spans = 3000, .spans_per_trace = 30}, format, &traces);
    expected_traces += traces;
    inputs.push_back(dir.write(name, text));
  }
  CritpathOptions options = every_output(inputs);
  options.chunk_bytes = 8 << 10;
  options.what_if_services = {"user-service", "no-such-service"};
  options.what_if_no_delays = true;
  options.doc_traces = 40;
  options.doc_bytes = 60 << 10;  // some results do not fit: traces_omitted_over_doc_bytes
  const Outcome one = expect_same_for_every_job_count(options);
  ASSERT_TRUE(one.error.empty()) << one.error;
  EXPECT_EQ(document_traces(one), expected_traces);
  EXPECT_GT(nlohmann::json::parse(one.document)["traces_omitted_over_doc_bytes"].get<int>(), 0);

  for (std::uint64_t max_traces : {1, 7, 37, 101, 150}) {
    options.max_traces = max_traces;
    const Outcome stopped = expect_same_for_every_job_count(options);
    EXPECT_EQ(document_traces(stopped), max_traces);
  }
}

// Random Jaeger traces, dirty on purpose (missing parents, repeated span and
// trace ids, negative durations, odd names), one per line, some in
// envelopes, blank lines between; with `multiline`, some pretty-printed
// across lines (the workers' chunks then do not parse and the single-job
// reader takes the input over).
std::string fuzzed_corpus(std::uint32_t seed, std::size_t traces, bool multiline) {
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::vector<std::string> services = {"frontend", "user", "post-storage", "caf\\u00e9", "\\\"quoted\\\""};
  const std::vector<std::string> operations = {"get", "compose_client", "compose_server", "write", "/api/v1"};
  const std::vector<std::string> kinds = {"client", "server", "internal", "producer", "consumer"};
  std::string out;
  for (std::size_t t = 0; t < traces; ++t) {
    const std::string trace_id = "t" + std::to_string(pick(4) == 0 ? pick(t + 1) : t);  // some repeat
    const std::size_t spans = 1 + pick(12);
    std::string trace = "{\"traceID\":\"" + trace_id + "\",\"spans\":[";
    for (std::size_t s = 0; s < spans; ++s) {
      if (s != 0) trace += ",";
      const std::size_t id = pick(5) == 0 ? pick(s + 1) : s;  // some repeat
      trace += "{\"traceID\":\"" + trace_id + "\",\"spanID\":\"s" + std::to_string(id) + "\",\"operationName\":\"" +
               operations[pick(operations.size())] + "\"";
      if (s != 0) {
        const std::size_t parent = pick(6) == 0 ? s + 3 : pick(s);  // some orphans
        trace += ",\"references\":[{\"refType\":\"" + std::string(pick(8) == 0 ? "FOLLOWS_FROM" : "CHILD_OF") +
                 "\",\"traceID\":\"" + trace_id + "\",\"spanID\":\"s" + std::to_string(parent) + "\"}]";
      }
      const long long start = 1'000'000 + static_cast<long long>(pick(5000));
      const long long duration =
          pick(10) == 0 ? -static_cast<long long>(pick(100)) : static_cast<long long>(pick(4000));
      trace += ",\"startTime\":" + std::to_string(start) + ",\"duration\":" + std::to_string(duration) +
               ",\"tags\":[{\"key\":\"span.kind\",\"type\":\"string\",\"value\":\"" + kinds[pick(kinds.size())] + "\"}";
      if (pick(4) == 0) {
        trace +=
            ",{\"key\":\"tailscope.scheduling_delay_ns\",\"type\":\"int64\",\"value\":" + std::to_string(pick(9000)) +
            "}";
      }
      trace += "],\"processID\":\"p" + std::to_string(pick(services.size() + 1)) + "\"}";
    }
    trace += "],\"processes\":{";
    for (std::size_t p = 0; p < services.size(); ++p) {
      if (p != 0) trace += ",";
      trace += "\"p" + std::to_string(p) + "\":{\"serviceName\":\"" + services[p] + "\"}";
    }
    trace += "}}";
    switch (pick(6)) {
      case 0:  // pretty-printed: a trace across lines
        if (!multiline) break;
        for (std::size_t i = trace.find(",{"); i != std::string::npos; i = trace.find(",{", i + 3)) {
          trace.replace(i, 2, ",\n  {");
        }
        break;
      case 1:
        trace = "{\"data\": [" + trace + (multiline ? "],\n \"total\": 1}" : "], \"total\": 1}");
        break;
      case 2:
        out += "\n\n";
        break;
      default:
        break;
    }
    out += trace + "\n";
  }
  return out;
}

TEST(CritpathRunTest, FuzzedCorpusGivesTheSameResultForEveryJobCount) {
  const TempDir dir;
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    const bool multiline = seed % 2 == 0;
    std::size_t otlp_traces = 0;
    const std::string otlp = trace::testing::synthetic_trace_text({.spans = 200, .spans_per_trace = 20},
                                                                  SyntheticFormat::kOtlpNdjson, &otlp_traces);
    const std::string corpus = fuzzed_corpus(seed, 120, multiline) + otlp + fuzzed_corpus(seed + 100, 40, multiline);
    CritpathOptions options = every_output({dir.write("corpus-" + std::to_string(seed) + ".json", corpus)});
    options.what_if_services = {"user"};
    options.chunk_bytes = 300 + 97 * seed;
    options.timeline_traces = {"t3", "t17", "t42"};
    const Outcome one = expect_same_for_every_job_count(options);
    ASSERT_TRUE(one.error.empty()) << "seed " << seed << ": " << one.error;
    EXPECT_EQ(document_traces(one), 160 + otlp_traces) << "seed " << seed;
  }
}

// The artifact's text of `name` in an outcome ("" when absent).
const std::string& artifact(const Outcome& o, const std::string& name) {
  static const std::string kNone;
  for (const auto& [file, bytes] : o.artifacts)
    if (file == name) return bytes;
  return kNone;
}

// trace_index.ndjson is, line for line, the full results' trace_id, analyzed,
// span_count, start_ns and end_to_end_ns (the same text: the driver passes
// these ids back as --timeline-trace), the same for every job count, at every
// --max-traces stop, with --per-trace full or index; and --per-trace index
// writes no full results and the same document.
TEST(CritpathRunTest, TheIndexIsEachFullResultsHeadForEveryJobCount) {
  const TempDir dir;
  std::size_t otlp_traces = 0;
  const std::string otlp = trace::testing::synthetic_trace_text({.spans = 600, .spans_per_trace = 20},
                                                                SyntheticFormat::kOtlpNdjson, &otlp_traces);
  // Dirty traces too (odd names, orphans, repeated ids), a trace that cannot
  // be analyzed (its two spans are each other's parent: no root) and an id
  // with escapes.
  const std::string cycle =
      "{\"traceID\":\"cycle\\\"\\u00e9\",\"spans\":["
      "{\"traceID\":\"c\",\"spanID\":\"a\",\"operationName\":\"x\",\"references\":[{\"refType\":\"CHILD_OF\","
      "\"spanID\":\"b\"}],\"startTime\":1,\"duration\":5,\"processID\":\"p\"},"
      "{\"traceID\":\"c\",\"spanID\":\"b\",\"operationName\":\"y\",\"references\":[{\"refType\":\"CHILD_OF\","
      "\"spanID\":\"a\"}],\"startTime\":2,\"duration\":3,\"processID\":\"p\"}],"
      "\"processes\":{\"p\":{\"serviceName\":\"s\"}}}\n";
  const std::string corpus = fuzzed_corpus(3, 120, false) + cycle + otlp + fuzzed_corpus(5, 40, false);
  CritpathOptions options = every_output({dir.write("corpus.json", corpus)});
  options.span_dump = false;
  options.chunk_bytes = 900;
  for (std::uint64_t max_traces : {0, 1, 37, 150}) {
    options.max_traces = max_traces;
    options.per_trace = "full";
    const Outcome full = expect_same_for_every_job_count(options);
    options.per_trace = "index";
    const Outcome index = expect_same_for_every_job_count(options);
    ASSERT_TRUE(full.error.empty() && index.error.empty()) << full.error << index.error;
    ASSERT_EQ(index.artifacts.size(), 1u);
    EXPECT_EQ(artifact(index, "critical_paths.ndjson"), "") << "index: no full results";
    EXPECT_TRUE(artifact(full, "trace_index.ndjson") == artifact(index, "trace_index.ndjson"))
        << "full writes the same index";
    std::istringstream full_lines(artifact(full, "critical_paths.ndjson"));
    std::istringstream index_lines(artifact(index, "trace_index.ndjson"));
    std::string full_line, index_line;
    std::size_t lines = 0, analyzed = 0;
    while (std::getline(full_lines, full_line)) {
      ASSERT_TRUE(std::getline(index_lines, index_line)) << "the index has fewer lines than the results";
      const nlohmann::ordered_json result = nlohmann::ordered_json::parse(full_line);
      nlohmann::ordered_json head;
      for (const char* key : {"trace_id", "analyzed", "span_count", "start_ns", "end_to_end_ns"})
        if (result.contains(key)) head[key] = result[key];
      EXPECT_EQ(nlohmann::ordered_json::parse(index_line), head) << index_line;
      // The id's text itself, escapes included, as the full result writes it.
      EXPECT_EQ(index_line.substr(0, index_line.find(",\"analyzed\"")),
                full_line.substr(0, full_line.find(",\"analyzed\"")));
      ++lines;
      analyzed += result["analyzed"].get<bool>() ? 1 : 0;
    }
    EXPECT_FALSE(std::getline(index_lines, index_line)) << "the index has more lines than the results";
    EXPECT_EQ(lines, max_traces == 0 ? 161 + otlp_traces : max_traces);
    if (max_traces == 0) {
      EXPECT_EQ(analyzed, lines - 1) << "the cycle is the one trace not analyzed";
    }
    nlohmann::json index_doc = nlohmann::json::parse(index.document);
    nlohmann::json full_doc = nlohmann::json::parse(full.document);
    EXPECT_EQ(index_doc["config"]["per_trace"], "index");
    index_doc["config"].erase("per_trace");
    full_doc["config"].erase("per_trace");
    EXPECT_EQ(index_doc, full_doc);
  }
}

// Plain files are cut by the workers themselves (trace/line_chunks.h
// FileLineChunks); gzip input is inflated in order by the main thread
// (LineChunks). Both give one job's result.
TEST(CritpathRunTest, GzipInputGivesTheSameResultForEveryJobCount) {
  const TempDir dir;
  std::size_t traces = 0;
  const std::string text = trace::testing::synthetic_trace_text({.spans = 3000, .spans_per_trace = 30},
                                                                SyntheticFormat::kJaegerNdjson, &traces);
  const std::string path = (dir.path() / "ndjson.json.gz").string();
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  CritpathOptions options = every_output({path, dir.write("plain.json", text)});
  options.chunk_bytes = 4 << 10;
  const Outcome one = expect_same_for_every_job_count(options);
  ASSERT_TRUE(one.error.empty()) << one.error;
  const nlohmann::json doc = nlohmann::json::parse(one.document);
  EXPECT_EQ(doc["summary"]["traces"], 2 * traces);
  EXPECT_EQ(doc["inputs"][0]["compressed"], true);
  EXPECT_EQ(doc["inputs"][1]["compressed"], false);
}

TEST(CritpathRunTest, ATraceAcrossLinesIsReadWholeWithEveryJobCount) {
  const TempDir dir;
  // Three traces of three spans, each pretty-printed over many lines: every
  // tiny chunk cuts a trace, and the traces still come out whole.
  std::string text;
  for (int t = 0; t < 3; ++t) {
    const std::string id = "trace" + std::to_string(t);
    text += "{\n \"traceID\": \"" + id + "\",\n \"spans\": [\n";
    for (int s = 0; s < 3; ++s) {
      text +=
          std::string(s ? "  ,\n" : "") + "  {\"traceID\": \"" + id + "\",\n   \"spanID\": \"s" + std::to_string(s) +
          "\",\n   \"operationName\": \"op" + std::to_string(s) + "\",\n" +
          (s ? "   \"references\": [{\"refType\": \"CHILD_OF\", \"traceID\": \"" + id + "\", \"spanID\": \"s0\"}],\n"
             : "") +
          "   \"startTime\": " + std::to_string(100 + s) + ",\n   \"duration\": " + std::to_string(50 - s) +
          ",\n   \"processID\": \"p1\"}\n";
    }
    text += " ],\n \"processes\": {\"p1\": {\"serviceName\": \"svc\"}}\n}\n";
  }
  CritpathOptions options = every_output({dir.write("pretty.json", text)});
  options.chunk_bytes = 16;
  const Outcome one = expect_same_for_every_job_count(options);
  ASSERT_TRUE(one.error.empty()) << one.error;
  const nlohmann::json doc = nlohmann::json::parse(one.document);
  EXPECT_EQ(doc["summary"]["traces"], 3);
  for (const auto& t : doc["traces"]) EXPECT_EQ(t["span_count"], 3);
}

TEST(CritpathRunTest, InvalidJsonGivesTheSameErrorForEveryJobCount) {
  const TempDir dir;
  std::string corpus = fuzzed_corpus(7, 80, false);
  // A broken line in the middle: the same error, with the same byte offset.
  const std::size_t middle = corpus.find('\n', corpus.size() / 2) + 1;
  corpus.insert(middle, "{\"traceID\": \"broken\", \"spans\": [}\n");
  CritpathOptions options = every_output({dir.write("broken.json", corpus)});
  options.chunk_bytes = 500;
  const Outcome one = expect_same_for_every_job_count(options);
  EXPECT_NE(one.error.find("invalid JSON at byte offset"), std::string::npos) << one.error;
  // Nothing is left behind on failure.
  EXPECT_TRUE(one.artifacts.empty());

  options.inputs = {dir.write("empty.json", "\n \n\n")};
  const Outcome empty = expect_same_for_every_job_count(options);
  EXPECT_NE(empty.error.find("empty input"), std::string::npos) << empty.error;

  // A chunk smaller than a line grows to the line's end.
  options.inputs = {dir.write("one-line.json", fuzzed_corpus(8, 1, false))};
  options.chunk_bytes = 1;
  const Outcome one_line = expect_same_for_every_job_count(options);
  EXPECT_TRUE(one_line.error.empty()) << one_line.error;
}

}  // namespace
}  // namespace tailscope::analyze
