"""One timed TCP stream, for the testbed's self-check (run inside a namespace).

    rate_probe.py recv PORT BYTES     listens on PORT, takes BYTES, prints one JSON line
    rate_probe.py send HOST PORT BYTES

The rate is read over the stream's last 80%: the first 20% carries TCP's slow start and
whatever tbf's bucket held, neither of which is the link's rate. Its clock is the kernel's
arrival time of the packets (SO_TIMESTAMPNS), not the time the receiver got to read them, so
a receiver that a loaded machine wakes late does not make the link look slower. tbf
limits Ethernet frames, headers included, so the payload rate is scaled to frames by the
connection's MSS: a full segment of MSS payload bytes travels as one FRAME_BYTES frame.
Every wait is bounded: a probe that cannot finish exits 1 within its timeout.
"""

import json
import socket
import struct
import sys
import time

FRAME_BYTES = 1514  # MTU 1500 + the 14-byte Ethernet header (the veths' default MTU)
SKIP = 0.2
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; Python 3.11 does not name it
TIMEOUT_S = 60.0


def arrival(ancillary):
    """The kernel's receive time (CLOCK_REALTIME seconds) of the last packet a read returned,
    or None where the read carried none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return seconds + nanoseconds * 1e-9
    return None


def receive(port, total):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Set before any packet arrives (the accepted socket inherits it): the kernel stamps
    # packets only once some socket has asked for it.
    server.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    server.bind(("0.0.0.0", port))
    server.listen(1)
    server.settimeout(TIMEOUT_S)
    print(json.dumps({"listening": port}), flush=True)
    conn, _ = server.accept()
    conn.settimeout(TIMEOUT_S)
    buffer = memoryview(bytearray(1 << 20))
    received, start, start_bytes, now, unstamped = 0, None, 0, None, 0
    while received < total:
        n, ancillary, _, _ = conn.recvmsg_into([buffer], socket.CMSG_SPACE(16))
        if n == 0:
            break
        now = arrival(ancillary)
        if now is None:  # the reading time then, on the same clock
            now, unstamped = time.time(), unstamped + 1
        received += n
        if start is None and received >= SKIP * total:
            start, start_bytes = now, received
    mss = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    conn.close()
    if received < total or start is None or now <= start:
        print(json.dumps({"error": f"received {received} of {total} bytes"}), flush=True)
        return 1
    payload_bps = (received - start_bytes) * 8 / (now - start)
    print(json.dumps({"bytes": received, "seconds": round(now - start, 4), "payload_bps": payload_bps,
                      "mss": mss, "frame_bps": payload_bps * FRAME_BYTES / mss,
                      "unstamped_reads": unstamped}), flush=True)
    return 0


def send(host, port, total):
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # the receiver may not listen yet: retry until the deadline
        try:
            conn = socket.create_connection((host, port), timeout=TIMEOUT_S)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    chunk = bytes(1 << 20)
    left = total
    while left > 0:
        conn.sendall(chunk[:min(left, len(chunk))])
        left -= min(left, len(chunk))
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)  # returns when the receiver has taken everything and closed
    conn.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "recv":
        sys.exit(receive(int(sys.argv[2]), int(sys.argv[3])))
    if len(sys.argv) == 5 and sys.argv[1] == "send":
        sys.exit(send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    sys.exit(f"usage: {sys.argv[0]} recv PORT BYTES | send HOST PORT BYTES")
