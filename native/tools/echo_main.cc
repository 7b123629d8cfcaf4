// tailscope-echo: one echo server model (RFC 862 or HTTP/1.1) on loopback.
// Prints {"listening": PORT} on stdout once it accepts connections, serves
// until SIGINT/SIGTERM, then closes every connection and exits 0.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/affinity.h"
#include "core/stop_signals.h"
#include "echo/server.h"
#include "net/socket.h"

using namespace tailscope;

namespace {

echo::StopSignal* g_stop = nullptr;

void on_signal(int) {
  if (g_stop) g_stop->request();
}

constexpr int kExitUnavailable = 4;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tailscope-echo: echo server models for the echo study"};
  std::string model_name, cpus_text, protocol_text = "echo";
  echo::ServerConfig config;
  int64_t max_fds = 0;
  std::string models_help = "Server model:";
  for (const echo::Model& m : echo::all_models()) models_help += " " + std::string(m.name);
  app.add_option("--model", model_name, models_help)->required();
  app.add_option("--port", config.port, "TCP port (0: ephemeral, printed as {\"listening\": PORT})")
      ->check(CLI::Range(0, 65535));
  app.add_option("--host", config.host, "Address to bind (default 127.0.0.1)");
  app.add_option("--threads", config.threads, "Worker threads (poll-pool, asio-mt, asio-coro, epoll-reuseport)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--cpus", cpus_text, "CPU list the workers are pinned to, round robin (e.g. 1 or 0-1)");
  app.add_option("--protocol", protocol_text, "echo (RFC 862) or http (HTTP/1.1 keep-alive)");
  app.add_option("--stall-every-ms", config.stall_every_ms, "Test mode: stall every P ms ...")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stall-ms", config.stall_ms, "... for S ms (coordinated-omission demo)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-pending-bytes", config.limits.max_pending_output_bytes, "Per-connection output bound")
      ->check(CLI::Range(1024, 1 << 26));
  app.add_option("--max-fds", max_fds, "Test hook: lower RLIMIT_NOFILE to this (fd exhaustion)")
      ->check(CLI::Range(8, 1 << 24));
  app.add_flag("--sqpoll", config.io_uring_sqpoll,
               "io-uring: a kernel thread polls the submission queue (on the second --cpus entry, if any); "
               "falls back with the reason when the kernel refuses");
  CLI11_PARSE(app, argc, argv);

  try {
    const echo::Model* model = echo::find_model(model_name);
    if (!model) throw std::invalid_argument("--model: unknown model '" + model_name + "' (" + models_help + ")");
    config.protocol = net::parse_wire_protocol(protocol_text);
    if (!cpus_text.empty()) config.cpus = parse_cpu_list(cpus_text);
    if (config.stall_ms > 0 && config.stall_ms >= config.stall_every_ms)
      throw std::invalid_argument("--stall-ms must be below --stall-every-ms");
    if (max_fds > 0)
      net::lower_fd_limit(max_fds);
    else
      net::raise_fd_limit(1 << 20);

    echo::StopSignal stop;
    g_stop = &stop;
    install_stop_handler(on_signal);

    echo::ServerContext ctx{config, {}, stop};
    const int listeners = model->listener_per_thread ? std::max(1, config.threads) : 1;
    ctx.listen_fds.push_back(net::make_listener(config.host, config.port, model->listener_per_thread));
    const int port = net::bound_port(ctx.listen_fds[0]);
    for (int i = 1; i < listeners; ++i) ctx.listen_fds.push_back(net::make_listener(config.host, port, true));
    for (int fd : ctx.listen_fds) net::set_nonblocking(fd);
    // The ready line says what the model probed and will use, so a result
    // records which kernel features were measured (docs/echo-study.md).
    const nlohmann::json ready = {{"listening", port},
                                  {"model", model->name},
                                  {"pid", getpid()},
                                  {"features", echo::model_features(*model, config)}};
    std::cout << ready.dump() << std::endl;
    model->run(ctx);
    for (int fd : ctx.listen_fds) ::close(fd);
    g_stop = nullptr;
  } catch (const echo::ModelUnavailable& e) {
    std::cerr << "tailscope-echo: unavailable: " << e.what() << "\n";
    return kExitUnavailable;
  } catch (const std::exception& e) {
    std::cerr << "tailscope-echo: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
