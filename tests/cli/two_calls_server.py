#!/usr/bin/env python3
"""two_calls_server.py - a stand-in Anthropic endpoint for tests/cli/test_one_key_two_calls.sh
(not a test itself). A request without tool results is answered with ONE response holding
TWO tool_use blocks whose arguments are identical (what a model does when it repeats
itself), a request with them with a plain text reply. Each request body is appended to LOG, one JSON
document per line. Prints the port it listens on to PORTFILE, then serves until killed.

    two_calls_server.py PORTFILE LOG
"""
import http.server
import json
import sys

PORTFILE, LOG = sys.argv[1], sys.argv[2]


def sse(events):
    out = []
    for e in events:
        out.append("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e, separators=(",", ":"))))
    return "".join(out).encode()


def tool_use(index, ident):
    return [
        {"type": "content_block_start", "index": index,
         "content_block": {"type": "tool_use", "id": ident, "name": "charge", "input": {}}},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "input_json_delta", "partial_json": "{\"order\":7,\"amount\":1500}"}},
        {"type": "content_block_stop", "index": index},
    ]


def message(content_events, stop_reason):
    return ([{"type": "message_start",
              "message": {"id": "msg_two", "type": "message", "role": "assistant", "model": "m",
                          "content": [], "stop_reason": None, "stop_sequence": None,
                          "usage": {"input_tokens": 10, "output_tokens": 1}}}]
            + content_events
            + [{"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                                   "stop_sequence": None},
                "usage": {"output_tokens": 5}},
               {"type": "message_stop"}])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(LOG, "a") as f:
            f.write(body.decode() + "\n")
        if b'"tool_result"' not in body:
            events = message(tool_use(0, "toolu_a") + tool_use(1, "toolu_b"), "tool_use")
        else:
            events = message([
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": "Charged."}},
                {"type": "content_block_stop", "index": 0}], "end_turn")
        data = sse(events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
