// Test helper: sends the packets of a pcap file out of a network interface
// through an AF_PACKET socket, paced, so that a probe on the other end of a
// veth pair receives them through the kernel. Used by the af_packet test
// inside a network namespace it creates; never run against a real network.
//
//   afp_send IFACE FILE [PACKETS_PER_SECOND]
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: afp_send IFACE FILE [PPS]\n");
    return 2;
  }
  double pps = argc > 3 ? atof(argv[3]) : 20000;
  int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) return perror("socket"), 1;
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_ifindex = int(if_nametoindex(argv[1]));
  addr.sll_protocol = htons(ETH_P_ALL);
  if (!addr.sll_ifindex) return fprintf(stderr, "no interface %s\n", argv[1]), 1;
  if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) return perror("bind"), 1;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *p = pcap_open_offline(argv[2], err);
  if (!p) return fprintf(stderr, "%s\n", err), 1;
  pcap_pkthdr *h;
  const u_char *d;
  unsigned long sent = 0;
  timespec gap{0, long(1e9 / pps)};
  while (pcap_next_ex(p, &h, &d) == 1) {
    if (send(fd, d, h->caplen, 0) != ssize_t(h->caplen)) return perror("send"), 1;
    ++sent;
    nanosleep(&gap, nullptr);
  }
  printf("%lu\n", sent);
  pcap_close(p);
  close(fd);
  return 0;
}
