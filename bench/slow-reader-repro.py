# Reproduces what the soak found (bench/results/soak.md): a client that reads an answer slowly
# but steadily is let go by toolgate as if it had stopped reading. An upstream answers 8 MiB of
# JSON text; the client reads PIECE bytes every PAUSE seconds through a 64 KiB receive buffer.
# toolgate counts a client as stalled while a write of its answer waits (poll_write Pending),
# and Linux wakes that write only once a third of the socket's send buffer (autotuned up to
# net.ipv4.tcp_wmem's max, 4 MiB) has drained, so the client's steady reads stay unseen.
#
#   python3 bench/slow-reader-repro.py [PIECE] [PAUSE] [--at-cap]
#
# 65536 0.06: ~1 MB/s, cut at ~4.3 MB after 1 s ("the client accepted no bytes within
# write_timeout_ms"). 65536 0.025 --at-cap: ~2 MB/s, with max_connections = 4 and a new
# connection every 100 ms, cut after 0.5 s ("stalled, closed for a new client at
# max_connections"). TOOLGATE_BIN names the gateway (default: a release build in
# $CARGO_TARGET_DIR or target/).
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

args = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
PIECE = int(args[0]) if args else 65536
PAUSE = float(args[1]) if len(args) > 1 else 0.06
AT_CAP = "--at-cap" in sys.argv
TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
GATEWAY = os.environ.get("TOOLGATE_BIN", os.path.join(TARGET, "release", "toolgate"))
SIZE = 8 << 20

BODY = json.dumps({
    "id": "x", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "a" * SIZE}}],
}).encode()


def serve(connection):
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    length = re.search(rb"content-length: *(\d+)", head, re.I)
    while len(rest) < (int(length.group(1)) if length else 0):
        rest += connection.recv(65536)
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                       b"content-length: %d\r\nconnection: close\r\n\r\n" % len(BODY) + BODY)
    connection.close()


def upstream(listener):
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection,), daemon=True).start()


def churn(port):
    """New connections at the cap, each silent: each makes the gateway reclaim one."""
    held = []
    while True:
        try:
            held.append(socket.create_connection(("127.0.0.1", port)))
        except OSError:
            pass
        held = held[-8:]
        time.sleep(0.1)


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    threading.Thread(target=upstream, args=(listener,), daemon=True).start()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    workdir = tempfile.mkdtemp(prefix="slow-reader-repro.")
    config = os.path.join(workdir, "gateway.toml")
    cap = "max_connections = 4\n" if AT_CAP else ""
    with open(config, "w") as out:
        out.write(f'[server]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "off"\n'
                  f'idle_timeout_ms = 500\nwrite_timeout_ms = 1000\n{cap}\n'
                  f'[upstreams.u]\nurl = "http://127.0.0.1:{listener.getsockname()[1]}"\n\n'
                  f'[audit]\noutput = "off"\n\n[[routes]]\npath = "/v1"\nupstream = "u"\n')
    log_path = os.path.join(workdir, "toolgate.log")
    gateway = subprocess.Popen([GATEWAY, "serve", "--config", config],
                               stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                               env=dict(os.environ, TOOLGATE_LOG="warn"))
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        if AT_CAP:
            threading.Thread(target=churn, args=(port,), daemon=True).start()
        request = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        client.connect(("127.0.0.1", port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                       b"content-type: application/json\r\nconnection: close\r\n"
                       b"content-length: %d\r\n\r\n%s" % (len(request), request.encode()))
        received, began = 0, time.time()
        while True:
            try:
                piece = client.recv(PIECE)
            except ConnectionResetError:
                break
            if not piece:
                break
            received += len(piece)
            time.sleep(PAUSE)
        took = time.time() - began
        whole = received > len(BODY)
        print(f"read {received} bytes (the body is {len(BODY)}) in {took:.1f} s, "
              f"{received / took / 1e6:.2f} MB/s: {'whole' if whole else 'CUT'}")
        for line in open(log_path):
            if "stopped reading" in line:
                print(line.strip())
        return 0 if whole else 1
    finally:
        gateway.terminate()
        gateway.wait()
        shutil.rmtree(workdir, ignore_errors=True)


sys.exit(main())
