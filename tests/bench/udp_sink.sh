# Sourced by the benchmarks that export to a collector: a UDP socket bound on
# loopback and never read, so that sending costs what it costs with a real
# collector (no ICMP "port unreachable", no records counted lost).
#
#   TMP=$(mktemp -d); source tests/bench/udp_sink.sh
#   start_udp_sink    # sets PORT, and SINK, the process to kill at the end
start_udp_sink() {
  python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True); time.sleep(86400)' > "$TMP/port" &
  SINK=$!
  for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
  PORT=$(cat "$TMP/port")
}
