#include "engine/export/collector_link.hh"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "engine/runtime/clock.hh"

namespace sluice {

namespace {
constexpr uint64_t kMinBackoffNs = 100'000'000ull;    // 100 ms
constexpr uint64_t kMaxBackoffNs = 5'000'000'000ull;  // 5 s
constexpr size_t kMaxQueuedBytes = 8u << 20;          // TCP send queue beyond the kernel's

}  // namespace

CollectorLink::CollectorLink(const std::string &host, uint16_t port, Transport transport)
    : host_(host), port_(port), transport_(transport) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = transport == Transport::Udp ? SOCK_DGRAM : SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res) throw std::runtime_error("cannot resolve collector '" + host + "': " + gai_strerror(rc));
  std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
  addr_len_ = res->ai_addrlen;
  freeaddrinfo(res);
  if (transport_ == Transport::Udp) open_socket();
}

CollectorLink::~CollectorLink() { close_socket(true); }

std::string CollectorLink::describe() const {
  return (transport_ == Transport::Udp ? "udp " : "tcp ") + (host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_) +
         ":" + std::to_string(port_);
}

void CollectorLink::open_socket() {
  fd_ = socket(addr_.ss_family, (transport_ == Transport::Udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    ++errors_;
    return;
  }
  if (transport_ == Transport::Udp) {
    int buf = 4 << 20;  // a burst of records at the end of a trace
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    connect(fd_, reinterpret_cast<sockaddr *>(&addr_), addr_len_);  // fixes the peer; UDP connect does not block
    connected_ = true;
    fresh_ = true;
    ++connects_;
    return;
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc = connect(fd_, reinterpret_cast<sockaddr *>(&addr_), addr_len_);
  connected_ = false;
  if (rc == 0) {
    connected_ = fresh_ = true;
    ++connects_;
    backoff_ns_ = 0;
  } else if (errno == EINPROGRESS) {
    fresh_ = true;  // messages queue from now on: templates first
  } else {
    close_socket(false);
  }
}

void CollectorLink::close_socket(bool lose_queue) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  connected_ = false;
  if (lose_queue || transport_ == Transport::Tcp) {
    // A TCP message half written cannot be resumed on a new connection.
    for (const Queued &q : queue_) lost_records_ += q.records;
    queue_.clear();
    queued_bytes_ = front_sent_ = 0;
  }
  if (transport_ == Transport::Tcp) {
    backoff_ns_ = backoff_ns_ ? std::min(backoff_ns_ * 2, kMaxBackoffNs) : kMinBackoffNs;
    next_attempt_ns_ = mono_ns() + backoff_ns_;
  }
}

bool CollectorLink::take_new_connection() {
  bool f = fresh_;
  fresh_ = false;
  return f;
}

uint64_t CollectorLink::take_sent_records() {
  uint64_t n = sent_records_;
  sent_records_ = 0;
  return n;
}

uint64_t CollectorLink::take_lost_records() {
  uint64_t l = lost_records_;
  lost_records_ = 0;
  return l;
}

void CollectorLink::poll(uint64_t now_ns) {
  if (transport_ == Transport::Udp) return;
  if (fd_ < 0) {
    if (mono_ns() >= next_attempt_ns_) open_socket();
    return;
  }
  if (!connected_) {
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, 0) <= 0) return;  // still connecting
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      ++errors_;
      close_socket(false);
      return;
    }
    connected_ = true;
    ++connects_;
    backoff_ns_ = 0;
  }
  write_queue();
}

void CollectorLink::write_queue() {
  while (!queue_.empty() && connected()) {
    Queued &q = queue_.front();
    ssize_t n = ::send(fd_, q.data.data() + front_sent_, q.data.size() - front_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ++errors_;
      close_socket(false);
      return;
    }
    front_sent_ += size_t(n);
    bytes_ += uint64_t(n);
    if (front_sent_ == q.data.size()) {
      queued_bytes_ -= q.data.size();
      front_sent_ = 0;
      ++messages_;
      sent_records_ += q.records;
      queue_.pop_front();
    }
  }
}

bool CollectorLink::send(std::vector<uint8_t> msg, uint64_t records) {
  if (transport_ == Transport::Udp) {
    if (fd_ < 0) return false;
    ssize_t n = ::send(fd_, msg.data(), msg.size(), MSG_DONTWAIT);
    if (n != ssize_t(msg.size())) {
      ++errors_;  // refused (no collector listening), buffer full
      return false;
    }
    ++messages_;
    bytes_ += msg.size();
    sent_records_ += records;
    return true;
  }
  // Queued while the connection is being made, sent once it is up.
  if (!accepting() || queued_bytes_ + msg.size() > kMaxQueuedBytes) return false;
  queued_bytes_ += msg.size();
  queue_.push_back({std::move(msg), records});
  write_queue();
  return true;
}

void CollectorLink::drain(uint64_t timeout_ns) {
  if (transport_ == Transport::Udp) return;
  uint64_t end = mono_ns() + timeout_ns;
  while ((!queue_.empty() || (fd_ >= 0 && !connected_)) && mono_ns() < end) {
    poll(mono_ns());
    if (fd_ < 0) break;  // the connection is gone: what was queued is lost
    pollfd p{fd_, POLLOUT, 10};
    ::poll(&p, 1, 10);
  }
  for (const Queued &q : queue_) lost_records_ += q.records;
  queue_.clear();
  queued_bytes_ = front_sent_ = 0;
}

}  // namespace sluice
