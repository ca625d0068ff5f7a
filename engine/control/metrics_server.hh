// The HTTP side of `sluice run --metrics [ADDR:]PORT`: cpp-httplib serves
// GET /metrics on threads of its own, with whatever text the render function
// returns at that moment. kWorkers scrapes are answered at once (more wait
// for a worker); a client has kClientTimeoutS for each read and each write,
// so a stalled one holds its worker that long and never blocks the others.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace sluice {

class MetricsServer {
 public:
  static constexpr int kWorkers = 4;
  static constexpr int kClientTimeoutS = 5;

  MetricsServer();
  ~MetricsServer();  // stop()

  // "[ADDR:]PORT": loopback (127.0.0.1) when only a port is given; an IPv6
  // address in brackets ("[::1]:9100"). False with *error.
  static bool parse_address(const std::string &text, std::string &host, int &port, std::string *error);

  // Binds host:port (0: any free port) and serves until stop(). False with *error.
  bool start(const std::string &host, int port, std::function<std::string()> render, std::string *error);
  void stop();
  int port() const { return port_; }
  // http://HOST:PORT/metrics
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = -1;
  std::thread thread_;
};

}  // namespace sluice
