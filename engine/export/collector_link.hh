// The connection from an exporter to its collector, over UDP or TCP. It never
// blocks the thread that exports: UDP datagrams that cannot be sent and TCP
// messages that do not fit a bounded send queue are refused (the caller
// counts their records as lost); a TCP connection that fails or drops is
// retried with exponential back-off, and the caller learns of each new
// connection (templates must go again).
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

  // Resolves host (numeric or a name) now; throws std::runtime_error with a
  // message for the user when it cannot.
  CollectorLink(const std::string &host, uint16_t port, Transport transport);
  ~CollectorLink();
  CollectorLink(const CollectorLink &) = delete;
  CollectorLink &operator=(const CollectorLink &) = delete;

  // Sends (UDP) or queues (TCP) one message carrying `records` records.
  // False when it was refused: not connected, queue full, send error.
  bool send(std::vector<uint8_t> msg, uint64_t records);
  // Drives the connection: connects or reconnects when due, writes queued
  // TCP data. Call it often (each loop pass of the exporter's segment).
  void poll(uint64_t now_ns);
  // True once for each new socket: a TCP connection started (its messages
  // queue until it is up), or the UDP socket at the start.
  bool take_new_connection();
  bool connected() const { return fd_ >= 0 && connected_; }
  // Takes messages: connected, or (TCP) a connection under way.
  bool accepting() const { return fd_ >= 0; }
  // Records in messages accepted by send() but lost later (a TCP connection
  // that dropped with data queued).
  uint64_t take_lost_records();
  // Records in messages written to the socket since the last call.
  uint64_t take_sent_records();
  // TCP: waits up to timeout for queued data to go out (end of run).
  void drain(uint64_t timeout_ns);

  std::string describe() const;
  uint64_t messages() const { return messages_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t errors() const { return errors_; }
  uint64_t connects() const { return connects_; }

 private:
  void open_socket();
  void close_socket(bool lose_queue);
  void write_queue();

  std::string host_;
  uint16_t port_;
  Transport transport_;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  int fd_ = -1;
  bool connected_ = false;
  bool fresh_ = false;
  uint64_t next_attempt_ns_ = 0, backoff_ns_ = 0;
  struct Queued {
    std::vector<uint8_t> data;
    uint64_t records;
  };
  std::deque<Queued> queue_;
  size_t queued_bytes_ = 0, front_sent_ = 0;
  uint64_t lost_records_ = 0, sent_records_ = 0;
  uint64_t messages_ = 0, bytes_ = 0, errors_ = 0, connects_ = 0;
};

}  // namespace sluice
