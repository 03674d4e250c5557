#!/usr/bin/env python3
"""Aggregate decode throughput of a running `tessera serve` at a given number of concurrent clients (standard library
only, for machines without Node.js; bench/serve_load.js is the full load test). Each client sends completions back to
back with a fixed max_tokens and seeded sampling. Two figures:

- whole requests (as before): completion tokens from the responses' usage, between the first request sent and the
  last answer received. Its tail, when fewer and fewer clients still wait for their last answer, runs below the
  configured concurrency, so it understates a steady rate, the more so for short runs.
- steady window (--stream, the default): the clients stream, and every token that arrives between --warmup seconds
  after the start and --seconds after that counts; then the clients hang up. Every client is busy for the whole
  window, so this is the server's rate at that concurrency. Each request asks for the chosen token's logprob, so
  every token comes as an event of its own (a token whose text is still an incomplete character would otherwise
  be folded into the next event).

- pairs (--pairs N): N steady windows at 1 client, each followed by one at --clients, with the ratio of each pair
  and their median. A shared or throttled machine drifts in speed over minutes; a ratio taken within one pair is
  measured in one phase, where 1-client and N-client runs minutes apart are not.

    python3 bench/serve_parallel.py --url http://127.0.0.1:8080 --clients 8 --seconds 30 --max-tokens 64
    python3 bench/serve_parallel.py --url http://127.0.0.1:8080 --clients 8 --seconds 15 --pairs 6
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


def whole_requests(url, max_tokens, deadline, index, results, errors):
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


def streaming(url, max_tokens, stop, index, arrivals, errors):
    """Streams completions back to back until `stop` is set, appending each token's arrival time."""
    parts = urllib.parse.urlsplit(url)
    k = 0
    while not stop.is_set():
        body = json.dumps({"prompt": f"Story {index} part {k}:", "max_tokens": max_tokens, "temperature": 0.8,
                           "seed": index * 1000 + k, "stream": True, "logprobs": 0})
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                errors.append(f"HTTP {r.status}: {r.read()[:200]!r}")
                continue
            while not stop.is_set():
                line = r.readline()
                if not line:
                    errors.append("the stream ended without [DONE]")
                    break
                if not line.startswith(b"data: "):
                    continue
                if line.strip() == b"data: [DONE]":
                    break
                choice = json.loads(line[6:])["choices"][0]
                if choice["finish_reason"] is None:
                    arrivals.append(time.monotonic())
        except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError) as e:
            if not stop.is_set():
                errors.append(repr(e))
        finally:
            conn.close()  # after the window: hanging up cancels the request on the server
        k += 1


def window(url, clients, warmup, seconds, max_tokens, errors):
    """Tokens per second streamed to `clients` clients between warmup and warmup + seconds."""
    arrivals, stop = [], threading.Event()
    threads = [threading.Thread(target=streaming, args=(url, max_tokens, stop, i, arrivals, errors))
               for i in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    opens = start + warmup
    closes = opens + seconds
    time.sleep(max(0.0, closes - time.monotonic()))
    stop.set()
    for t in threads:
        t.join()
    return sum(1 for t in arrivals if opens <= t < closes)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20, help="length of the run (whole requests) or the window")
    p.add_argument("--warmup", type=float, default=5, help="seconds before the window opens (streaming)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--whole-requests", action="store_true", help="count whole responses instead of a window")
    p.add_argument("--pairs", type=int, default=0, help="alternate 1-client and --clients windows this many times")
    a = p.parse_args()
    if not 1 <= a.clients <= 1024 or not 0 < a.seconds <= 3600 or a.max_tokens < 1 or not 0 <= a.warmup <= 600:
        p.error("--clients must be in [1, 1024], --seconds in (0, 3600], --warmup in [0, 600], --max-tokens >= 1")
    if not 0 <= a.pairs <= 100 or (a.pairs and a.whole_requests):
        p.error("--pairs must be in [0, 100] and counts steady windows (not with --whole-requests)")
    errors = []
    start = time.monotonic()
    if a.pairs:
        ratios = []
        for i in range(a.pairs):
            one = window(a.url, 1, a.warmup, a.seconds, a.max_tokens, errors) / a.seconds
            many = window(a.url, a.clients, a.warmup, a.seconds, a.max_tokens, errors) / a.seconds
            ratios.append(many / one if one > 0 else 0.0)
            print(json.dumps({"pair": i + 1, "tokens_per_second_1": round(one, 2),
                              f"tokens_per_second_{a.clients}": round(many, 2), "ratio": round(ratios[-1], 3)}))
        print(json.dumps({"clients": a.clients, "pairs": a.pairs, "window_seconds": a.seconds, "errors": len(errors),
                          "median_ratio": round(statistics.median(ratios), 3),
                          "min_ratio": round(min(ratios), 3), "max_ratio": round(max(ratios), 3)}))
    elif a.whole_requests:
        results = []
        threads = [threading.Thread(target=whole_requests,
                                    args=(a.url, a.max_tokens, start + a.seconds, i, results, errors))
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
    else:
        tokens = window(a.url, a.clients, a.warmup, a.seconds, a.max_tokens, errors)
        print(json.dumps({"clients": a.clients, "window_seconds": a.seconds, "warmup_seconds": a.warmup,
                          "errors": len(errors), "window_tokens": tokens,
                          "tokens_per_second": round(tokens / a.seconds, 2)}))
    for e in errors[:5]:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
