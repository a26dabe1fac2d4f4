#!/usr/bin/env python3
"""The h11 side of the HTTP1 parser's differential test (Tests/HTTP1Tests/H11DifferentialTests.swift).

Reads a JSON array of requests, each a hex string of the bytes a client sends, and prints one JSON array of
verdicts in the same order: how h11 (a strict HTTP/1.1 implementation, pinned in scripts/h11-requirements.txt)
reads the first request of each as a server.

  {"verdict": "accept", "method": hex, "target": hex, "version": "1.1", "headers": [[name hex, value hex], ...],
   "body": hex}
  {"verdict": "refuse", "status": 400}
  {"verdict": "incomplete"}

Names are as sent; h11 lowercases a Transfer-Encoding value. Header values are never printed as text.
"""
import json
import sys

import h11


def verdict(data: bytes) -> dict:
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(data)
    request = None
    body = bytearray()
    try:
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                return {"verdict": "incomplete"}
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return {"verdict": "refuse", "status": 400, "event": type(event).__name__}
    except h11.RemoteProtocolError as error:
        return {"verdict": "refuse", "status": error.error_status_hint}
    return {
        "verdict": "accept",
        "method": request.method.hex(),
        "target": request.target.hex(),
        "version": request.http_version.decode("ascii"),
        "headers": [[name.hex(), value.hex()] for name, value in request.headers.raw_items()],
        "body": bytes(body).hex(),
    }


def main() -> None:
    with open(sys.argv[1], encoding="ascii") as corpus:
        requests = json.load(corpus)
    json.dump([verdict(bytes.fromhex(request)) for request in requests], sys.stdout)


if __name__ == "__main__":
    main()
