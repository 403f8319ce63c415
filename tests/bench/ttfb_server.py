#!/usr/bin/env python3
"""tests/bench/ttfb_server.py [PORT] - a stock Python http.server on 127.0.0.1 that answers
every POST with a short event stream, for measuring a client's time to first byte against
a server that reads the request the ordinary way (headers with readline, then the body).
Prints its URL on the first line. HTTP/1.1 keep-alive when KEEPALIVE=1 (default: the
stock HTTP/1.0, one connection per request). TWO_WRITES=1 answers the way handler code
usually does (send_response/end_headers, then wfile.write: headers and body in two
writes); the default writes the response once, so only the client's writes matter."""
import http.server
import os
import sys

BODY = (b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


class Handler(http.server.BaseHTTPRequestHandler):
    if os.environ.get("KEEPALIVE") == "1":
        protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        if os.environ.get("TWO_WRITES") == "1":  # what BaseHTTPRequestHandler code does
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
            return
        # The whole response in one write, so only the request's writes are measured
        # (headers then body in two writes would add the server's own Nagle delay).
        head = ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                "Content-Length: %d\r\n\r\n" % len(BODY)).encode()
        if self.protocol_version != "HTTP/1.1":
            head = head.replace(b"HTTP/1.1", b"HTTP/1.0")
        self.wfile.write(head + BODY)
        self.wfile.flush()

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
print("http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
