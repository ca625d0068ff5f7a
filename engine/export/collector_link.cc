#include "engine/export/collector_link.hh"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/base/clock.hh"

namespace sluice {

namespace {
constexpr uint64_t kMinBackoffNs = 100'000'000ull;    // 100 ms
constexpr uint64_t kMaxBackoffNs = 5'000'000'000ull;  // 5 s
// The pace's bucket: this long at the rate. A burst the collector must
// absorb while it is not scheduled; small against its socket buffer.
constexpr double kBurstS = 0.005;
}  // namespace

CollectorLink::CollectorLink(const std::string &host, uint16_t port, Transport transport, const Options &options)
    : host_(host), port_(port), transport_(transport), options_(options) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = transport == Transport::Udp ? SOCK_DGRAM : SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res) throw std::runtime_error("cannot resolve collector '" + host + "': " + gai_strerror(rc));
  std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
  addr_len_ = res->ai_addrlen;
  freeaddrinfo(res);
  ip_overhead_ = (addr_.ss_family == AF_INET6 ? 40 : 20) + 8;
  bucket_bytes_ = double(options_.rate_bps) / 8 * kBurstS;
  tokens_ = bucket_bytes_;
  if (transport_ == Transport::Udp) open_socket();
}

CollectorLink::~CollectorLink() {
  if (fd_ >= 0) close(fd_);
}

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
    close_socket();
  }
}

// TCP only: a message half written cannot be resumed on a new connection,
// so what is queued is lost.
void CollectorLink::close_socket() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  connected_ = false;
  lose_queue(outcome_.dropped);
  backoff_ns_ = backoff_ns_ ? std::min(backoff_ns_ * 2, kMaxBackoffNs) : kMinBackoffNs;
  next_attempt_ns_ = mono_ns() + backoff_ns_;
}

void CollectorLink::lose_queue(uint64_t &into) {
  into += queued_records_;
  queue_.clear();
  queued_bytes_ = front_sent_ = 0;
  queued_records_ = 0;
}

bool CollectorLink::take_new_connection() {
  bool f = fresh_;
  fresh_ = false;
  return f;
}

CollectorLink::Outcome CollectorLink::take_outcome() {
  Outcome o = outcome_;
  outcome_ = {};
  return o;
}

uint64_t CollectorLink::paced_drain_ns() const {
  if (transport_ != Transport::Udp || !options_.rate_bps) return 0;
  double octets = double(queued_bytes_ + queue_.size() * ip_overhead_);
  return uint64_t(octets * 8 / double(options_.rate_bps) * 1e9);
}

uint64_t CollectorLink::abandon() {
  uint64_t n = 0;
  lose_queue(n);
  return n;
}

void CollectorLink::poll(uint64_t now_ns) {
  if (transport_ == Transport::Udp) {
    write_udp(now_ns);
    return;
  }
  if (fd_ < 0) {
    if (now_ns >= next_attempt_ns_) open_socket();
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
      close_socket();
      return;
    }
    connected_ = true;
    ++connects_;
    backoff_ns_ = 0;
  }
  write_tcp();
}

void CollectorLink::pop_front_sent() {
  Queued &q = queue_.front();
  queued_bytes_ -= q.data.size();
  queued_records_ -= q.records;
  front_sent_ = 0;
  ++messages_;
  outcome_.sent += q.records;
  queue_.pop_front();
}

void CollectorLink::write_tcp() {
  while (!queue_.empty() && connected()) {
    Queued &q = queue_.front();
    ssize_t n = ::send(fd_, q.data.data() + front_sent_, q.data.size() - front_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ++errors_;
      close_socket();
      return;
    }
    front_sent_ += size_t(n);
    bytes_ += uint64_t(n);
    if (front_sent_ == q.data.size()) pop_front_sent();
  }
}

// The messages at the queue's front that one send takes: as many of one
// size in a row as the tokens allow (a shorter one may end the batch: the
// kernel cuts the last datagram short), within the kernel's limits.
size_t CollectorLink::udp_batch(double tokens) const {
  const size_t size = queue_.front().data.size();
  size_t n = 1, bytes = size;
  tokens -= double(size + ip_overhead_);
  while (gso_ && n < std::min(queue_.size(), kGsoSegments) && (!options_.rate_bps || tokens > 0)) {
    size_t next = queue_[n].data.size();
    if (next > size || bytes + next > kGsoBytes) break;
    bytes += next, tokens -= double(next + ip_overhead_), ++n;
    if (next < size) break;
  }
  return n;
}

void CollectorLink::drop_front_refused() {
  Queued &q = queue_.front();
  outcome_.refused += q.records;
  queued_bytes_ -= q.data.size();
  queued_records_ -= q.records;
  queue_.pop_front();
}

// While there are tokens: a datagram may take the bucket below zero (any
// message goes, however small the rate), the debt paid by the next refills.
void CollectorLink::write_udp(uint64_t now_ns, bool full_batches) {
  if (options_.rate_bps) {
    if (tokens_at_ns_) tokens_ += double(now_ns - tokens_at_ns_) * 1e-9 * double(options_.rate_bps) / 8;
    tokens_ = std::min(tokens_, bucket_bytes_);
    tokens_at_ns_ = now_ns;
  }
  while (!queue_.empty() && (!options_.rate_bps || tokens_ > 0)) {
    const size_t count = udp_batch(tokens_);
    if (full_batches && count == queue_.size() && count < kGsoSegments &&
        queued_bytes_ + queue_.front().data.size() <= kGsoBytes)
      return;  // the next message may join it
    size_t bytes = 0;
    iovec iov[kGsoSegments];
    for (size_t i = 0; i < count; ++i) {
      iov[i] = {queue_[i].data.data(), queue_[i].data.size()};
      bytes += queue_[i].data.size();
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = count;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint16_t))];
    if (count > 1) {  // each datagram the size of the first, the last maybe shorter
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      cmsghdr *c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t segment = uint16_t(queue_.front().data.size());
      std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
    }
    ssize_t n = ::sendmsg(fd_, &m, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) return;  // our socket is full: later
    if (n < 0 && count > 1 && errno != ECONNREFUSED) {
      gso_ = false;  // the kernel or the route cannot segment (EIO: no checksum offload): a datagram a call
      continue;
    }
    if (n != ssize_t(bytes)) {
      ++errors_;  // refused: no collector listening (ICMP port unreachable)
      for (size_t i = 0; i < count; ++i) drop_front_refused();
      continue;
    }
    if (count > 1) ++batches_, batched_datagrams_ += count;
    for (size_t i = 0; i < count; ++i) {
      bytes_ += queue_.front().data.size();
      tokens_ -= double(queue_.front().data.size() + ip_overhead_);
      pop_front_sent();
    }
  }
}

CollectorLink::Refused CollectorLink::send(std::vector<uint8_t> msg, uint64_t records) {
  if (!accepting()) return Refused::NotConnected;
  if (queued_bytes_ + msg.size() > options_.max_queued_bytes) return Refused::QueueFull;
  queued_bytes_ += msg.size();
  queued_records_ += records;
  queue_peak_ = std::max(queue_peak_, queued_bytes_);
  queue_.push_back({std::move(msg), records});
  if (transport_ == Transport::Tcp)
    write_tcp();
  else if (!gso_ || queue_.size() >= kGsoSegments || queued_bytes_ >= kGsoBytes)
    write_udp(mono_ns(), gso_);
  return Refused::No;
}

}  // namespace sluice
