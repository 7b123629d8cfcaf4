#include "load/client_protocol.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "load/rpc_protocol.h"

namespace tailscope::load {

void fill_echo_payload(uint32_t connection_id, uint64_t seq, char* out, size_t n) {
  uint64_t x = (uint64_t{connection_id} << 40) ^ (seq * 0x9E3779B97F4A7C15ull) ^ 0x5DEECE66Dull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>('!' + x % 94);  // printable: readable in a packet capture
  }
}

namespace {

class EchoClient final : public ClientProtocol {
 public:
  EchoClient(uint32_t id, size_t payload_bytes) : id_(id), payload_bytes_(payload_bytes) {}
  void append_request(uint64_t seq, std::string& out) override {
    const size_t at = out.size();
    out.resize(at + payload_bytes_);
    fill_echo_payload(id_, seq, out.data() + at, payload_bytes_);
    expected_.append(out, at, payload_bytes_);
  }
  void reset_state() override {
    expected_.clear();
    head_ = 0;
  }
  std::string violation() const override { return violation_; }

 protected:
  int feed_one(std::string_view data, size_t* used) override {
    const size_t outstanding = expected_.size() - head_;
    if (outstanding == 0) {
      violation_ = "server sent bytes that were never requested";
      return -1;
    }
    // Compare up to the end of the current response.
    const size_t in_response = payload_bytes_ - (head_ % payload_bytes_);
    const size_t n = std::min({data.size(), outstanding, in_response});
    if (std::memcmp(data.data(), expected_.data() + head_, n) != 0) {
      violation_ = "echoed bytes differ from the bytes sent";
      return -1;
    }
    head_ += n;
    *used = n;
    if (head_ == expected_.size()) {
      expected_.clear();
      head_ = 0;
      return 1;
    }
    if (head_ % payload_bytes_ == 0) {
      if (head_ > 4096) {
        expected_.erase(0, head_);
        head_ = 0;
      }
      return 1;
    }
    return 0;
  }

 private:
  uint32_t id_;
  size_t payload_bytes_;
  std::string expected_;
  size_t head_ = 0;
  std::string violation_;
};

class HttpClient final : public ClientProtocol {
 public:
  HttpClient(const LoadConfig& config) : request_(net::http_get_request(config.host, config.http_path)) {}
  void append_request(uint64_t, std::string& out) override { out += request_; }
  void reset_state() override { reader_ = net::HttpResponseReader(); }
  std::string violation() const override { return reader_.error(); }
  bool closes_after_response() const override { return reader_.connection_close(); }
  bool resendable() const override { return true; }

 protected:
  int feed_one(std::string_view data, size_t* used) override {
    switch (reader_.feed(data, used)) {
      case net::HttpResponseReader::Event::kError:
        return -1;
      case net::HttpResponseReader::Event::kNeedMore:
        return 0;
      case net::HttpResponseReader::Event::kResponse:
        return reader_.status() == 200 ? 1 : 2;
    }
    return -1;
  }

 private:
  std::string request_;
  net::HttpResponseReader reader_;
};

}  // namespace

LoadProtocol parse_load_protocol(std::string_view text) {
  if (text == "echo") return LoadProtocol::kEcho;
  if (text == "http") return LoadProtocol::kHttp;
  if (text == "rpc") return LoadProtocol::kRpc;
  throw std::invalid_argument("--protocol: '" + std::string(text) + "' is not one of echo, http, rpc");
}

std::string_view to_string(LoadProtocol protocol) {
  switch (protocol) {
    case LoadProtocol::kEcho:
      return "echo";
    case LoadProtocol::kHttp:
      return "http";
    case LoadProtocol::kRpc:
      return "rpc";
  }
  return "unknown";
}

std::unique_ptr<ClientProtocol> make_client_protocol(const LoadConfig& config, uint32_t connection_id) {
  switch (config.protocol) {
    case LoadProtocol::kEcho:
      return std::make_unique<EchoClient>(connection_id, config.payload_bytes);
    case LoadProtocol::kHttp:
      return std::make_unique<HttpClient>(config);
    case LoadProtocol::kRpc:
      return make_rpc_client(config, connection_id);
  }
  throw std::invalid_argument("unknown load protocol");
}

}  // namespace tailscope::load
