// Cost of the per-request work shared by every server model and the load
// generator: parsing a keep-alive GET, building the response, reading it back.
#include <benchmark/benchmark.h>

#include "net/http.h"
#include "net/session.h"

namespace tailscope::net {
namespace {

const std::string kRequest = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\n\r\n";

void BM_ParseHttpRequest(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(parse_http_request(kRequest));
}
BENCHMARK(BM_ParseHttpRequest);

void BM_HttpSessionRoundTrip(benchmark::State& state) {
  StreamSession session(WireProtocol::kHttp);
  for (auto _ : state) {
    session.on_received(kRequest.data(), kRequest.size());
    benchmark::DoNotOptimize(session.pending_output().data());
    session.on_sent(session.pending_output().size());
  }
}
BENCHMARK(BM_HttpSessionRoundTrip);

void BM_HttpResponseReader(benchmark::State& state) {
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n/hello";
  HttpResponseReader reader;
  for (auto _ : state) {
    size_t used = 0;
    benchmark::DoNotOptimize(reader.feed(response, &used));
  }
}
BENCHMARK(BM_HttpResponseReader);

void BM_EchoSession64Bytes(benchmark::State& state) {
  StreamSession session(WireProtocol::kEcho);
  char payload[64] = {};
  for (auto _ : state) {
    session.on_received(payload, sizeof payload);
    session.on_sent(session.pending_output().size());
  }
}
BENCHMARK(BM_EchoSession64Bytes);

}  // namespace
}  // namespace tailscope::net

BENCHMARK_MAIN();
