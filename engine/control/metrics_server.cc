#include "engine/control/metrics_server.hh"

#include <httplib.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>


namespace sluice {

struct MetricsServer::Impl {
  httplib::Server http;
  std::atomic<bool> exited{false};  // listen_after_bind() returned
};

MetricsServer::MetricsServer() : impl_(std::make_unique<Impl>()) {}

MetricsServer::~MetricsServer() { stop(); }

bool MetricsServer::parse_address(const std::string &text, std::string &host, int &port, std::string *error) {
  std::string port_text = text;
  host = "127.0.0.1";
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find("]:");
    if (close == std::string::npos) {
      *error = "'" + text + "': an IPv6 address is written [ADDR]:PORT";
      return false;
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  char *end = nullptr;
  long p = port_text.empty() ? -1 : strtol(port_text.c_str(), &end, 10);
  if (p < 0 || p > 65535 || *end || host.empty()) {
    *error = "'" + text + "' is not [ADDR:]PORT (e.g. 9100, 0.0.0.0:9100, [::1]:9100)";
    return false;
  }
  port = int(p);
  return true;
}

bool MetricsServer::start(const std::string &host, int port, std::function<std::string()> render, std::string *error) {
  httplib::Server &http = impl_->http;
  // A client that stalls holds one worker until a timeout, never the others;
  // no connection is kept open between scrapes to hold one either.
  http.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  http.set_read_timeout(kClientTimeoutS, 0);
  http.set_write_timeout(kClientTimeoutS, 0);
  http.set_keep_alive_max_count(1);
  http.Get("/metrics", [render](const httplib::Request &, httplib::Response &res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  port_ = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (port_ < 0) {
    *error = "cannot listen on " + host + ":" + std::to_string(port) + " for --metrics (in use, or not an address of this host)";
    return false;
  }
  host_ = host;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sl-metrics");
    impl_->http.listen_after_bind();
    impl_->exited.store(true);
  });
  return true;
}

void MetricsServer::stop() {
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing before its loop has started.
  while (!impl_->http.is_running() && !impl_->exited.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
  thread_.join();
}

std::string MetricsServer::url() const {
  std::string h = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return "http://" + h + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace sluice
