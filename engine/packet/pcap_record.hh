// One record of a pcap (or pcapng) file, as libpcap reads it: what the
// runtime's reader of trace files (PcapFileReader, behind EthDevice) takes
// from each record, apart from DPDK, so that it can be tested and fuzzed alone.
#pragma once
#include <cstdint>

struct pcap;  // libpcap's pcap_t

namespace sluice {

struct PcapRecord {
  uint64_t ns = 0;       // capture time, UNIX nanoseconds
  uint32_t caplen = 0;   // bytes in the file
  uint32_t len = 0;      // length on the wire
  const uint8_t *data = nullptr;  // caplen bytes, valid until the next read
};

// Reads the next record of `p`, opened with nanosecond time stamps
// (pcap_open_offline_with_tstamp_precision, PCAP_TSTAMP_PRECISION_NANO).
// False at the end of the file or on a record libpcap cannot read.
bool next_pcap_record(pcap *p, PcapRecord &out);

// A record's capture time in nanoseconds from libpcap's seconds and
// fraction (read at nanosecond precision).
uint64_t record_time_ns(int64_t sec, int64_t ns);

}  // namespace sluice
