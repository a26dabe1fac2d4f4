#!/usr/bin/env python3
"""The generated client's side of scripts/api-conformance.

scripts/api-conformance generates a Python client from docs/openapi.yaml with openapi-python-client (pinned in
scripts/openapi-client-requirements.txt) and runs this with that client importable as `duo_relay_client`, against
a live relay whose simulator has every fault at its own prefix:

  api-client-check.py RELAY_URL PREFIX=OUTCOME...

Each documented answer of each simulator fault (docs/API.md, "Trying it against the simulator") is driven through
the generated client and must come back parsed into its named type, with its `error` (and `limit`) narrowed as the
document says; so must the answers that need no fault (a grant, a delivery, a refused grant and body, health and
readiness). An answer the client cannot parse, or a status the document does not list (the client raises on it),
fails the run. Then the answers no client sends for (a target or head over its limit, framing the relay does not
trust, an unknown transfer coding, another HTTP version) are provoked on every operation of the document with raw
requests: each status the relay answers must be one the document lists for that operation. Prints one line per
answer, never a token or a grant.
"""

import base64
import os
import secrets
import socket
import sys
import time
from urllib.parse import urlsplit

import httpx
from ruamel.yaml import YAML

from duo_relay_client import Client
from duo_relay_client.api.grants import mint_grant
from duo_relay_client.api.health import health, readiness
from duo_relay_client.api.pushes import push
from duo_relay_client.models import (
    ApnsError,
    BadRequestError,
    Environment,
    GrantBadRequestError,
    GrantRefusedError,
    GrantRequest,
    GrantResponse,
    Health,
    PushRequest,
    PushResponse,
    RateLimitedError,
    Readiness,
    UnregisteredError,
)
from duo_relay_client.types import Unset

# What each simulator outcome becomes at the channel (docs/API.md): the status, the generated type, and the
# `error` (and for 429 the `limit`) it must carry.
EXPECTED = {
    "unregistered": (410, UnregisteredError, "unregistered", None),
    "expired-token": (410, UnregisteredError, "unregistered", None),
    "bad-device-token": (410, UnregisteredError, "unregistered", None),
    "not-for-topic": (410, UnregisteredError, "unregistered", None),
    "too-many-requests": (429, RateLimitedError, "rate_limited", "apns"),
    "too-many-token-updates": (502, ApnsError, "apns", None),
    "internal-error": (502, ApnsError, "apns", None),
    "unavailable": (502, ApnsError, "apns", None),
    "shutdown": (502, ApnsError, "apns", None),
    "stall": (502, ApnsError, "apns", None),
    "slow": (200, PushResponse, None, None),
    "goaway": (502, ApnsError, "apns", None),
    "reset": (502, ApnsError, "apns", None),
    "drop": (502, ApnsError, "apns", None),
    # Last: a rejected provider token marks the environment failing until the relay's probe sees it recover.
    "expired-provider-token": (502, ApnsError, "apns", None),
    "invalid-provider-token": (502, ApnsError, "apns", None),
}

failures = []


def check(what, response, status, kind, error=None, limit=None):
    """One answer: its status, its parsed type, and the codes it carries."""
    parsed = response.parsed
    problems = []
    if response.status_code != status:
        problems.append(f"status {response.status_code}, not {status}")
    if not isinstance(parsed, kind):
        problems.append(f"parsed as {type(parsed).__name__}, not {kind.__name__}")
    else:
        if error is not None and getattr(parsed, "error", None) != error:
            problems.append(f"error {getattr(parsed, 'error', None)!r}, not {error!r}")
        if limit is not None and getattr(parsed, "limit", None) != limit:
            problems.append(f"limit {getattr(parsed, 'limit', None)!r}, not {limit!r}")
        detail = getattr(parsed, "detail", None)
        if detail is not None and not isinstance(detail, (str, Unset)):
            problems.append("detail is not a string")
    if status in (429, 503):
        retry_after = response.headers.get("retry-after", "")
        if not (retry_after.isdigit() and int(retry_after) >= 1):
            problems.append(f"Retry-After {retry_after!r} is not whole seconds")
    line = f"{what}: {response.status_code} {type(parsed).__name__}"
    if problems:
        failures.append(f"{what}: " + "; ".join(problems))
        line += " -- " + "; ".join(problems)
    print("api-client-check: " + line)


def token(prefix=""):
    return prefix + secrets.token_hex(32)[len(prefix) :]


def sealed():
    # 2934 random bytes in standard base64, as a channel seals them (the relay never opens them).
    return base64.b64encode(secrets.token_bytes(2934)).decode()


def push_request(grant):
    return PushRequest(grant=grant, sealed=sealed(), id=secrets.token_hex(32), thread=secrets.token_hex(32))


# Requests no client sends, each with the status the relay answers it and what it is (docs/API.md), on any path.
PROVOKED = [
    (414, "a target over 4096 bytes", lambda method, path: f"{method} {path}?{'a' * 5000} HTTP/1.1\r\nHost: relay\r\n"),
    (
        431,
        "a head over 4096 bytes",
        lambda method, path: f"{method} {path} HTTP/1.1\r\nHost: relay\r\nX-Fill: {'a' * 5000}\r\n",
    ),
    (400, "a space before a colon", lambda method, path: f"{method} {path} HTTP/1.1\r\nHost : relay\r\n"),
    (
        501,
        "an unknown transfer coding",
        lambda method, path: f"{method} {path} HTTP/1.1\r\nHost: relay\r\nTransfer-Encoding: frobnicate\r\n",
    ),
    (505, "another HTTP version", lambda method, path: f"{method} {path} HTTP/2.5\r\nHost: relay\r\n"),
]


def raw_status(relay, head):
    """The status the relay answers a raw request head with (the connection closed after it)."""
    address = urlsplit(relay)
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall((head + "Connection: close\r\n\r\n").encode())
        answer = b""
        while b"\r\n" not in answer:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
    line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split(" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def check_provoked(relay):
    """Each operation of the document, provoked as PROVOKED says: the answer must be the expected one, and listed."""
    spec = YAML(typ="safe").load(open(os.path.join(os.path.dirname(__file__), "..", "docs", "openapi.yaml")))
    count = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            listed = {int(status) for status in operation["responses"]}
            for status, what, head in PROVOKED:
                answered = raw_status(relay, head(method.upper(), path))
                count += 1
                problems = []
                if answered != status:
                    problems.append(f"answered {answered}, not {status}")
                if answered not in listed:
                    problems.append(f"{answered} is not among the statuses the document lists ({sorted(listed)})")
                line = f"{method.upper()} {path} with {what}: {answered}"
                if problems:
                    failures.append(f"{line}: " + "; ".join(problems))
                    line += " -- " + "; ".join(problems)
                print("api-client-check: " + line)
    return count


def main():
    relay = sys.argv[1]
    faults = dict(argument.split("=", 1)[::-1] for argument in sys.argv[2:])
    missing = set(EXPECTED) - set(faults)
    if missing:
        print(f"api-client-check: no prefix given for {sorted(missing)}", file=sys.stderr)
        return 1
    # raise_on_unexpected_status: a status the document does not list for the operation raises here.
    client = Client(base_url=relay, raise_on_unexpected_status=True, timeout=httpx.Timeout(30.0))

    check("GET /healthz", health.sync_detailed(client=client), 200, Health)
    check("GET /readyz", readiness.sync_detailed(client=client), 200, Readiness)
    refused = mint_grant.sync_detailed(client=client, body=GrantRequest(token="0", environment=Environment.SANDBOX))
    check("grant with a malformed token", refused, 400, GrantBadRequestError, "bad_request")

    def grant(device_token):
        answer = mint_grant.sync_detailed(
            client=client, body=GrantRequest(token=device_token, environment=Environment.SANDBOX)
        )
        check("grant", answer, 200, GrantResponse)
        if not isinstance(answer.parsed, GrantResponse):
            raise SystemExit("api-client-check: no grant, nothing more to try")
        if answer.parsed.expires_at.timestamp() <= time.time():
            failures.append("grant: expires_at is not in the future")
        return answer.parsed.grant

    delivered = push.sync_detailed(client=client, body=push_request(grant(token())))
    check("push, delivered", delivered, 200, PushResponse)
    unopened = push.sync_detailed(client=client, body=push_request("A" * 60))
    check("push with a grant that does not open", unopened, 401, GrantRefusedError, "grant_invalid")
    malformed = push_request(grant(token()))
    malformed.sealed = "not base64 of 2934 bytes"
    answer = push.sync_detailed(client=client, body=malformed)
    check("push with a malformed sealed", answer, 400, BadRequestError, "bad_request")

    for outcome, (status, kind, error, limit) in EXPECTED.items():
        answer = push.sync_detailed(client=client, body=push_request(grant(token(faults[outcome]))))
        check(f"push, simulator {outcome}", answer, status, kind, error, limit)

    provoked = check_provoked(relay)

    if failures:
        print(f"api-client-check: {len(failures)} answers not as documented:", file=sys.stderr)
        for failure in failures:
            print("  " + failure, file=sys.stderr)
        return 1
    print(
        f"api-client-check: every answer parsed into its type ({len(EXPECTED)} simulator faults), "
        f"and {provoked} provoked answers listed for their operations"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
