// The connection from an exporter to its collector, over UDP or TCP. It never
// blocks the thread that exports: messages wait in a bounded queue and go out
// as poll() finds room: over TCP when the socket takes them, over UDP at a
// pace (a token bucket of `rate_bps`), so that a burst of records (the end of
// a run, a full table expiring) does not overflow the collector's socket
// buffer. A message that does not fit the queue is refused (the caller counts
// its records as lost); a TCP connection that fails or drops is retried with
// exponential back-off, and the caller learns of each new connection
// (templates must go again).
//
// Over UDP, messages of one size in a row go to the kernel in one call,
// each still a datagram of its own (UDP generic segmentation offload,
// UDP_SEGMENT): the kernel's path through UDP, IP and the device is taken
// once for up to kGsoSegments of them instead of once each. A datagram cost
// the exporter's thread 2.5 us over loopback, about two thirds of its time
// at a million flows; in batches of 32, 0.46 us. Where the kernel or the
// route refuses (no checksum offload, an old kernel), one call a datagram.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace sluice {

class CollectorLink {
 public:
  enum class Transport { Udp, Tcp };

  struct Options {
    uint64_t rate_bps = 0;              // UDP pace: bits per second of IP packets; 0: unpaced
    size_t max_queued_bytes = 8u << 20;  // messages waiting to be sent, octets
  };

  // Resolves host (numeric or a name) now; throws std::runtime_error with a
  // message for the user when it cannot.
  CollectorLink(const std::string &host, uint16_t port, Transport transport, const Options &options);
  ~CollectorLink();
  CollectorLink(const CollectorLink &) = delete;
  CollectorLink &operator=(const CollectorLink &) = delete;

  enum class Refused { No, NotConnected, QueueFull };
  // Queues one message carrying `records` flow records and sends what it can
  // (over UDP, once a batch of them is queued: poll() sends the rest).
  Refused send(std::vector<uint8_t> msg, uint64_t records);
  // Drives the connection: connects or reconnects when due, sends queued
  // messages as far as the socket and the pace allow. Never waits. Call it
  // often (each loop pass of the exporter's segment).
  void poll(uint64_t now_ns);
  // True once for each new socket: a TCP connection started (its messages
  // queue until it is up), or the UDP socket at the start.
  bool take_new_connection();
  bool connected() const { return fd_ >= 0 && connected_; }
  // Takes messages: connected, or (TCP) a connection under way.
  bool accepting() const { return fd_ >= 0; }
  // Nothing waits to be sent.
  bool idle() const { return queue_.empty(); }
  // A message of `bytes` octets would fit the queue now.
  bool has_room(size_t bytes) const { return queued_bytes_ + bytes <= options_.max_queued_bytes; }
  // Octets and flow records of the messages waiting to be sent.
  size_t queued_bytes() const { return queued_bytes_; }
  uint64_t queued_records() const { return queued_records_; }
  // How long the queue needs to go out at the pace (0 when unpaced).
  uint64_t paced_drain_ns() const;
  // Empties the queue; returns the flow records it held.
  uint64_t abandon();

  // What became of the records of accepted messages since the last call:
  // written to the socket, lost when the UDP socket refused a message (no
  // collector listening), lost when a TCP connection dropped with messages
  // queued.
  struct Outcome {
    uint64_t sent = 0, refused = 0, dropped = 0;
  };
  Outcome take_outcome();

  std::string describe() const;
  uint64_t messages() const { return messages_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t errors() const { return errors_; }
  uint64_t connects() const { return connects_; }
  // Datagrams sent in batches (UDP_SEGMENT), and the sends that carried them.
  uint64_t batched_datagrams() const { return batched_datagrams_; }
  uint64_t batches() const { return batches_; }
  // Whether batches go out (false once the kernel refused one).
  bool batching() const { return gso_; }
  // A send's most datagrams (the kernel's UDP_MAX_SEGMENTS, 64 before 6.x)
  // and octets (a UDP datagram's largest payload, with room to spare).
  static constexpr size_t kGsoSegments = 64, kGsoBytes = 60000;
  // The most octets that waited in the queue at once.
  size_t queue_peak() const { return queue_peak_; }

 private:
  void open_socket();
  void close_socket();
  void write_tcp();
  // full_batches: only batches that could take no more (send(): what comes
  // next may join the last one).
  void write_udp(uint64_t now_ns, bool full_batches = false);
  size_t udp_batch(double tokens) const;  // how many queued messages the next send takes
  void drop_front_refused();
  void pop_front_sent();
  void lose_queue(uint64_t &into);

  std::string host_;
  uint16_t port_;
  Transport transport_;
  Options options_;
  size_t ip_overhead_ = 0;  // IP and UDP header octets per datagram, for the pace
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  int fd_ = -1;
  bool connected_ = false;
  bool fresh_ = false;
  uint64_t next_attempt_ns_ = 0, backoff_ns_ = 0;
  // The pace: tokens are octets, refilled at rate_bps / 8 per second up to
  // bucket_bytes_ (a few ms' worth: the largest burst a collector sees).
  double tokens_ = 0, bucket_bytes_ = 0;
  uint64_t tokens_at_ns_ = 0;
  struct Queued {
    std::vector<uint8_t> data;
    uint64_t records;
  };
  std::deque<Queued> queue_;
  size_t queued_bytes_ = 0, front_sent_ = 0, queue_peak_ = 0;
  uint64_t queued_records_ = 0;
  Outcome outcome_;
  uint64_t messages_ = 0, bytes_ = 0, errors_ = 0, connects_ = 0;
  bool gso_ = true;
  uint64_t batched_datagrams_ = 0, batches_ = 0;
};

}  // namespace sluice
