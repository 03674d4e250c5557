#!/usr/bin/env python3
"""Aggregate decode throughput of a running `tessera serve` at a given number of concurrent clients (standard library
only, for machines without Node.js; bench/serve_load.js is the full load test). Each client sends completions back to
back with a fixed max_tokens and seeded sampling; the figure is completion tokens per second over all
clients, counted from the responses' usage, between the first request sent and the last answer received.

    python3 bench/serve_parallel.py --url http://127.0.0.1:8080 --clients 8 --seconds 20 --max-tokens 64
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse


def client(url, max_tokens, deadline, index, results, errors):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    k = 0
    while time.monotonic() < deadline:
        body = json.dumps({"prompt": f"Story {index} part {k}:", "max_tokens": max_tokens, "temperature": 0.8,
                           "seed": index * 1000 + k})
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                errors.append(f"HTTP {r.status}: {data[:200]!r}")
                continue
            results.append((time.monotonic(), json.loads(data)["usage"]["completion_tokens"]))
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            errors.append(repr(e))
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        k += 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--max-tokens", type=int, default=64)
    a = p.parse_args()
    if not 1 <= a.clients <= 1024 or not 0 < a.seconds <= 3600 or a.max_tokens < 1:
        p.error("--clients must be in [1, 1024], --seconds in (0, 3600], --max-tokens >= 1")
    results, errors = [], []
    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(a.url, a.max_tokens, start + a.seconds, i, results, errors))
               for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = max((t for t, _ in results), default=time.monotonic())
    tokens = sum(n for _, n in results)
    print(json.dumps({"clients": a.clients, "requests": len(results), "errors": len(errors),
                      "completion_tokens": tokens, "seconds": round(end - start, 2),
                      "tokens_per_second": round(tokens / (end - start), 2)}))
    for e in errors[:5]:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
