#!/usr/bin/env python3
"""distinct_copy.py IN OUT KEY: the classic pcap IN with every IPv4 and IPv6
address XORed with KEY (a 32-bit number; 0 leaves them), written to OUT.

For bench_meters.sh: copies of one trace laid end to end hold the same
connections; a meter that does not time flows out on packet time
(softflowd reading a file) merges them into one. XOR with one key per copy
keeps each copy's conversations whole (both directions map alike) and makes
them another copy's strangers. Ethernet frames, with any 802.1Q/802.1ad
tags, are rewritten; other frames are left as they are. The IPv4 header
checksum is recomputed; TCP and UDP checksums are left stale (no meter
compared checks them)."""
import struct
import sys


def ipv4_checksum(header):
    total = sum(struct.unpack("!%dH" % (len(header) // 2), header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def rewrite(frame, key4):
    off, ethertype = 14, frame[12] << 8 | frame[13] if len(frame) >= 14 else 0
    while ethertype in (0x8100, 0x88A8) and len(frame) >= off + 4:
        ethertype = frame[off + 2] << 8 | frame[off + 3]
        off += 4
    if ethertype == 0x0800 and len(frame) >= off + 20 and frame[off] >> 4 == 4:
        ihl = (frame[off] & 0x0F) * 4
        if ihl < 20 or len(frame) < off + ihl:
            return
        for i in range(8):
            frame[off + 12 + i] ^= key4[i % 4]
        frame[off + 10:off + 12] = b"\0\0"
        frame[off + 10:off + 12] = struct.pack("!H", ipv4_checksum(bytes(frame[off:off + ihl])))
    elif ethertype == 0x86DD and len(frame) >= off + 40 and frame[off] >> 4 == 6:
        for i in range(32):
            frame[off + 8 + i] ^= key4[i % 4]


def main():
    src, dst, key = sys.argv[1], sys.argv[2], int(sys.argv[3])
    data = open(src, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    if struct.unpack(order + "I", data[20:24])[0] != 1:
        sys.exit("%s: not Ethernet" % src)
    key4 = struct.pack("!I", key)
    out = bytearray(data[:24])
    at = 24
    while at + 16 <= len(data):
        caplen = struct.unpack(order + "I", data[at + 8:at + 12])[0]
        frame = bytearray(data[at + 16:at + 16 + caplen])
        if key:
            rewrite(frame, key4)
        out += data[at:at + 16] + frame
        at += 16 + caplen
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
