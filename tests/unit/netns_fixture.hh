// A network namespace with a veth pair (va <-> vb) for tests that send
// traffic through the kernel: never another address, never the host's
// interfaces.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace sluice::test {

// A network namespace with a veth pair of `queues` queues each and its own
// loopback (up), removed at the end. Needs root (CAP_NET_ADMIN); `ok` is false, with the reason, otherwise.
struct VethNamespace {
  std::string name = "sluice-test-" + std::to_string(getpid());
  bool ok = false;
  std::string why;
  explicit VethNamespace(int queues) {
    std::string q = " numtxqueues " + std::to_string(queues) + " numrxqueues " + std::to_string(queues);
    if (geteuid() != 0) {
      why = "not root";
      return;
    }
    std::string ns = "ip netns exec " + name + " ";
    ok = system(("ip netns add " + name + " 2>/dev/null").c_str()) == 0 &&
         system((ns + "ip link add va" + q + " type veth peer name vb" + q).c_str()) == 0 &&
         system((ns + "sysctl -qw net.ipv6.conf.all.disable_ipv6=1").c_str()) == 0 &&
         system((ns + "ip link set va up").c_str()) == 0 && system((ns + "ip link set vb up").c_str()) == 0 &&
         system((ns + "ip link set lo up").c_str()) == 0;
    if (!ok) why = "cannot create a network namespace with a veth pair here";
  }
  // The prefix that runs a command in the namespace.
  std::string exec() const { return "ip netns exec " + name + " "; }
  ~VethNamespace() { system(("ip netns del " + name + " 2>/dev/null").c_str()); }
};

}  // namespace sluice::test
