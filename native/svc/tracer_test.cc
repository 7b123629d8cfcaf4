// The span recorder's streaming export: spans drained while threads record
// are neither lost nor duplicated, and the span file appears only whole.
#include "svc/tracer.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/stop_signals.h"

namespace tailscope::svc {
namespace {

const std::string kService = "svc";
const std::string kOperation = "op";

SpanRecord make_span(uint64_t id) {
  SpanRecord s;
  s.trace_id_low = id;
  s.span_id = id;
  s.service = &kService;
  s.operation = &kOperation;
  s.start_ns = 1;
  s.end_ns = 2;
  return s;
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("tailscope-tracer-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(Tracer, PausedSamplingSamplesNoRootAndResumesAtTheConfiguredRate) {
  Tracer::configure(1.0);
  Tracer::set_sampling_paused(false);
  EXPECT_TRUE(Tracer::sample_root());
  Tracer::set_sampling_paused(true);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(Tracer::sample_root());
  EXPECT_EQ(Tracer::sample_rate(), 1.0);  // a pause is not a new rate
  Tracer::set_sampling_paused(false);
  EXPECT_TRUE(Tracer::sample_root());
  Tracer::configure(0.0);  // resumed at rate 0: still nothing sampled
  EXPECT_FALSE(Tracer::sample_root());
}

TEST(Tracer, SamplingSignalsSwitchSamplingWithoutEndingTheWait) {
  Tracer::configure(1.0);
  Tracer::set_sampling_paused(false);
  const sigset_t set = signal_set({SIGTERM, kPauseSamplingSignal, kResumeSamplingSignal});
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  // Pending together: the switch is taken first (lower signal number), then SIGTERM ends the wait.
  pthread_kill(pthread_self(), kPauseSamplingSignal);
  pthread_kill(pthread_self(), SIGTERM);  // NOLINT(bugprone-bad-signal-to-kill-thread): blocked, taken by the wait
  EXPECT_EQ(wait_for_stop_switching_sampling(set, monotonic_ns() + 5'000'000'000), SIGTERM);
  EXPECT_TRUE(Tracer::sampling_paused());
  EXPECT_FALSE(Tracer::sample_root());
  // A resume alone does not end the wait either: it runs to its deadline.
  pthread_kill(pthread_self(), kResumeSamplingSignal);
  EXPECT_EQ(wait_for_stop_switching_sampling(set, monotonic_ns() + 50'000'000), 0);
  EXPECT_FALSE(Tracer::sampling_paused());
  EXPECT_TRUE(Tracer::sample_root());
  // Any other signal is not a switch.
  EXPECT_FALSE(take_sampling_signal(SIGTERM));
  EXPECT_FALSE(take_sampling_signal(0));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST(Tracer, PendingSamplingSignalsAreTakenWithoutWaiting) {
  Tracer::configure(1.0);
  Tracer::set_sampling_paused(false);
  const sigset_t set = signal_set({kPauseSamplingSignal, kResumeSamplingSignal});
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  take_pending_sampling_signals();  // none pending: returns at once, nothing changed
  EXPECT_FALSE(Tracer::sampling_paused());
  pthread_kill(pthread_self(), kPauseSamplingSignal);
  take_pending_sampling_signals();
  EXPECT_TRUE(Tracer::sampling_paused());
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, kPauseSamplingSignal));
  Tracer::set_sampling_paused(false);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST(Tracer, SpanLineIsTheSameObjectAsSpanToJson) {
  Tracer::configure(1.0);
  const std::string odd_service = "svc \"quoted\" \\ tab\t";
  SpanRecord plain = make_span(42);
  plain.parent_span_id = 7;
  plain.service = &odd_service;
  plain.role = SpanRole::kServer;
  plain.error = true;
  plain.status = net::RpcStatus::kTimeout;
  SpanRecord probed = make_span(43);
  probed.role = SpanRole::kClient;
  probed.launch = "async";
  probed.has_probe = true;
  probed.probe.trigger_async_fn_ns = 100;
  probed.probe.fn_start_ns = 150;
  probed.probe.fn_end_ns = 400;
  probed.probe.request_val_ns = 300;
  probed.probe.val_received_ns = 460;
  SpanRecord unnamed = make_span(44);
  unnamed.service = nullptr;
  unnamed.operation = nullptr;
  SpanRecord store = make_span(45);  // a real store op's tags
  store.db_system = "postgresql";
  store.store_role = "mongodb";
  SpanRecord fan_out = make_span(46);  // a real follower fan-out: db.system and the follower count
  fan_out.db_system = "redis";
  fan_out.followers = 913;
  SpanRecord simulated_fan_out = make_span(47);  // simulated: the count alone
  simulated_fan_out.followers = 0;
  SpanRecord cache_miss = make_span(48);  // a real cache read with a miss path: its answer
  cache_miss.db_system = "memcached";
  cache_miss.cache = trace::CacheResult::kMiss;
  SpanRecord cache_hit = make_span(49);
  cache_hit.db_system = "redis";
  cache_hit.followers = 12;
  cache_hit.cache = trace::CacheResult::kHit;
  for (const SpanRecord& s : {plain, probed, unnamed, store, fan_out, simulated_fan_out, cache_miss, cache_hit}) {
    std::string line;
    append_span_line(&line, s);
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(nlohmann::json::parse(line), span_to_json(s)) << line;
  }
}

// The spill file's bytes, not only its objects: key order, spacing and
// escapes are what merge_span_files and users' scripts have always read.
TEST(Tracer, SpanLineBytesAreTheFileFormat) {
  Tracer::configure(1.0);
  const std::string odd_operation = "op \"q\" \\ \x01";
  SpanRecord probed = make_span(0xabc);
  probed.trace_id_high = 0x0123456789abcdefULL;
  probed.parent_span_id = 0xffffffffffffffffULL;
  probed.operation = &odd_operation;
  probed.role = SpanRole::kClient;
  probed.error = true;
  probed.status = net::RpcStatus::kTimeout;
  probed.launch = "deferred";
  probed.has_probe = true;
  probed.probe = {100, 150, 400, 90, 460, true};
  const auto u = [](int64_t t) { return std::to_string(Tracer::to_unix_ns(t)); };
  std::string line;
  append_span_line(&line, probed);
  EXPECT_EQ(line,
            "{\"trace_id\":\"0123456789abcdef0000000000000abc\",\"span_id\":\"0000000000000abc\","
            "\"parent_span_id\":\"ffffffffffffffff\",\"service\":\"svc\",\"operation\":\"op \\\"q\\\" "
            "\\\\ \\u0001\",\"kind\":\"client\",\"error\":true,\"status\":\"timeout\",\"start_unix_ns\":" +
                u(1) + ",\"duration_ns\":1,\"launch\":\"deferred\",\"probe\":{\"trigger_async_fn\":" + u(100) +
                ",\"fn_start\":" + u(150) + ",\"fn_end\":" + u(400) + ",\"request_val\":" + u(90) +
                ",\"val_received\":" + u(460) +
                ",\"deferred\":true},\"scheduling_delay_ns\":60,\"join_delay_ns\":60}\n");
  SpanRecord bare = make_span(1);
  bare.service = nullptr;
  bare.operation = nullptr;
  bare.start_ns = 0;
  bare.end_ns = -5;
  bare.has_probe = true;  // a probe with a stamp missing: no derived delays, a 0 stays 0
  bare.probe.fn_start_ns = 3;
  line.clear();
  append_span_line(&line, bare);
  EXPECT_EQ(line,
            "{\"trace_id\":\"00000000000000000000000000000001\",\"span_id\":\"0000000000000001\","
            "\"parent_span_id\":\"\",\"service\":\"unknown_service\",\"operation\":\"unknown\",\"kind\":"
            "\"internal\",\"error\":false,\"status\":\"ok\",\"start_unix_ns\":" +
                u(0) + ",\"duration_ns\":-5,\"probe\":{\"trigger_async_fn\":0,\"fn_start\":" + u(3) +
                ",\"fn_end\":0,\"request_val\":0,\"val_received\":0,\"deferred\":false}}\n");
}

TEST(Tracer, SpanLineIntegersAreDecimalAtEveryLength) {
  for (const int64_t v :
       {int64_t{0}, int64_t{7}, int64_t{10}, int64_t{99}, int64_t{100}, int64_t{99'999'999}, int64_t{100'000'000},
        int64_t{1'234'567'890'123'456}, int64_t{9'999'999'999'999'999}, int64_t{10'000'000'000'000'000},
        std::numeric_limits<int64_t>::max(), int64_t{-1}, int64_t{-100'000'000}, std::numeric_limits<int64_t>::min()}) {
    SpanRecord s = make_span(1);
    s.start_ns = 0;
    s.end_ns = v;
    std::string line;
    append_span_line(&line, s);
    EXPECT_NE(line.find(",\"duration_ns\":" + std::to_string(v) + "}"), std::string::npos) << line;
  }
}

TEST(Tracer, DrainWhileRecordingLosesNothing) {
  Tracer::configure(1.0);
  Tracer::clear();
  constexpr uint64_t kThreads = 4, kPerThread = 20'000;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < kPerThread; ++i) Tracer::record(make_span(t * kPerThread + i + 1));
    });
  std::vector<SpanRecord> drained;
  go = true;
  for (int i = 0; i < 50; ++i) Tracer::drain(&drained);  // races the recorders on purpose
  for (auto& th : threads) th.join();
  Tracer::drain(&drained);
  std::set<uint64_t> ids;
  for (const auto& s : drained) ids.insert(s.span_id);
  EXPECT_EQ(drained.size(), kThreads * kPerThread);
  EXPECT_EQ(ids.size(), kThreads * kPerThread);  // no span twice
  std::vector<SpanRecord> rest;
  Tracer::drain(&rest);
  EXPECT_TRUE(rest.empty());
}

TEST(Tracer, ExitedThreadsHandTheirBuffersOn) {
  Tracer::configure(1.0);
  Tracer::clear();
  // A thread per call, as std-async runs: one at a time, each recording a span.
  std::thread([] { Tracer::record(make_span(1)); }).join();
  const size_t after_first = Tracer::buffers();
  for (uint64_t i = 2; i <= 200; ++i) std::thread([i] { Tracer::record(make_span(i)); }).join();
  EXPECT_EQ(Tracer::buffers(), after_first);  // reused, not one more per thread
  std::vector<SpanRecord> spans;
  Tracer::drain(&spans);
  EXPECT_EQ(spans.size(), 200U);  // and no span lost with its thread
}

TEST(Tracer, SpillerWritesEverySpanOnceAndOnlyOnFinish) {
  Tracer::configure(1.0);
  Tracer::clear();
  const auto dir = temp_dir();
  const auto target = dir / "svc.spans.jsonl";
  int64_t written = 0;
  {
    SpanSpiller spiller(dir.string(), "svc", 1'000'000);  // 1 ms: many spills while recording
    for (uint64_t i = 1; i <= 5000; ++i) {
      Tracer::record(make_span(i));
      if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    EXPECT_FALSE(std::filesystem::exists(target));  // never half a file under the name the merge reads
    written = spiller.finish().spans;
  }
  EXPECT_EQ(written, 5000);
  std::ifstream in(target);
  std::string line;
  int64_t lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 5000);
  std::filesystem::remove_all(dir);
}

// The spiller's spans reach the disk at every spill, not when the writer's
// 1 MiB block fills: at the soak's 1 % sampling a service took minutes to fill
// it, which `make soak` measured as RSS growing interval after interval.
TEST(Tracer, SpillerWritesEachSpillToDisk) {
  Tracer::configure(1.0);
  Tracer::clear();
  const auto dir = temp_dir();
  {
    SpanSpiller spiller(dir.string(), "svc", 1'000'000);  // 1 ms
    Tracer::record(make_span(1));
    // One small span is far below the block size: it is on disk only if each spill is written.
    // Bounded wait (the spill period is 1 ms); the temporary file is the only entry.
    std::uintmax_t on_disk = 0;
    for (int i = 0; i < 10'000 && on_disk == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (const auto& e : std::filesystem::directory_iterator(dir)) on_disk = std::filesystem::file_size(e.path());
    }
    EXPECT_GT(on_disk, 0u);
    EXPECT_EQ(spiller.finish().spans, 1);
  }
  std::filesystem::remove_all(dir);
  Tracer::clear();
}

TEST(Tracer, SpillerWithoutFinishLeavesNoFile) {
  Tracer::configure(1.0);
  Tracer::clear();
  const auto dir = temp_dir();
  {
    SpanSpiller spiller(dir.string(), "svc", 1'000'000);
    Tracer::record(make_span(1));
  }
  ASSERT_TRUE(std::filesystem::exists(dir));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // no target, no temporary file left
  std::filesystem::remove_all(dir);
  Tracer::clear();
}

}  // namespace
}  // namespace tailscope::svc
