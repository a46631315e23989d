#!/usr/bin/python3
"""Aggregate decode throughput of an OpenAI-compatible server under N concurrent clients.

Starts a server from a command line, waits for GET /health to answer 200, sends one warm-up
request (--warmup-tokens), then for each client count N runs N threads; each thread sends
--requests non-streamed POST /v1/chat/completions requests one after the other (its own short
prompts, greedy, max_tokens --max-tokens, "ignore_eos": true for llama-server; gemlet ignores
unknown fields).
Per N it reports wall time, total completion tokens (the responses' usage.completion_tokens),
aggregate completion tokens/s (total / wall) and the median per-request latency. Prompt
processing is part of every request (each prompt is ~20-30 tokens after the chat template), so
the figure is decode-dominated but not pure decode.

Python 3 standard library only. Two ways to run it:

1. One server, started once, client counts varied against it:

     python3 bench/server/parallel_clients.py \
       --server-cmd "build/apps/gemlet/gemlet serve -m M --port 8091 -n 8 -c 1024 -t 2" \
       --url http://127.0.0.1:8091 --clients 1,2,4,8 --requests 4

2. Several servers, each restarted with exactly N slots for each client count, alternating
   (round 1: N=1 A, N=1 B, N=2 A, N=2 B, ...; then round 2, ...). Placeholders in a command:
   {n} (slots = clients), {port}, {ctx} (--slot-ctx, per slot), {ctx_total} (n * --slot-ctx:
   llama-server splits -c among its slots). A command that contains {n} is restarted per N.

     python3 bench/server/parallel_clients.py --rounds 3 --clients 1,2,4,8 --requests 4 \
       --server-cmd "llama=/work/ext/llama-build/bin/llama-server -m M --port {port} -np {n} -c {ctx_total} -t 2 -tb 2 --no-webui" \
       --server-cmd "gemlet=build/apps/gemlet/gemlet serve -m M --port {port} -n {n} -c {ctx} -t 2" \
       --jsonl bench/server/runs-DATE.jsonl

   "NAME=" before a command names it in the output (default: server1, server2, ...).

Output: one JSON object per (round, server, N) on stdout and in --jsonl (appended), then a table
of medians over rounds per server and N, and the ratio of each server to the first one. Each
record has /proc/loadavg read just before its measurement: the machine may be shared, and only
ratios of alternating runs mean much there. Server logs go to --log-dir.

     python3 bench/server/parallel_clients.py --summarize bench/server/runs-DATE.jsonl

prints the table again from saved records. Ratio columns: the ratio of the medians, and the
median of the per-round ratios (each server against the first one in the same round and N, run
minutes apart).
"""

import argparse
import datetime
import http.client
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


def log(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


class Server:
    """A server process we started (stopped by its own pid, SIGTERM then SIGKILL)."""

    def __init__(self, cmd, url, log_path):
        self.cmd, self.url, self.log_path = cmd, url, log_path
        self.proc = None

    def start(self, timeout):
        log(f"starting: {self.cmd}")
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(shlex.split(self.cmd), stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} before /health answered; "
                                   f"log {self.log_path}:\n{self.tail()}")
            try:
                status, _ = request(self.url, "GET", "/health", None, 5)
                if status == 200:
                    return time.monotonic() - t0
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"no 200 from {self.url}/health within {timeout} s; log {self.log_path}:\n{self.tail()}")

    def tail(self, n=20):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                log("server ignored SIGTERM for 30 s: SIGKILL")
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        rc, self.proc = self.proc.returncode, None
        return rc


def request(url, method, path, body, timeout):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def chat(url, prompt, max_tokens, timeout):
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
        "ignore_eos": True,  # llama-server's; gemlet ignores unknown fields
    }
    t0 = time.monotonic()
    status, raw = request(url, "POST", "/v1/chat/completions", body, timeout)
    latency = time.monotonic() - t0
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {raw[:500].decode('utf-8', 'replace')}")
    resp = json.loads(raw)  # gemlet may lead a slow non-streamed answer with whitespace: json allows it
    usage = resp.get("usage", {})
    return {
        "latency_s": latency,
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "finish_reason": (resp.get("choices") or [{}])[0].get("finish_reason"),
    }


def run_clients(url, n, requests, max_tokens, timeout):
    results, errors = [], []
    lock = threading.Lock()
    barrier = threading.Barrier(n + 1)

    def client(c):
        barrier.wait()
        for r in range(requests):
            prompt = f"Request {r + 1} of client {c + 1}: write a short note."
            try:
                res = chat(url, prompt, max_tokens, timeout)
                res["client"], res["request"] = c + 1, r + 1
                with lock:
                    results.append(res)
            except Exception as e:  # noqa: BLE001 -- reported, the run marked failed
                with lock:
                    errors.append(f"client {c + 1} request {r + 1}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    tokens = sum(r["completion_tokens"] for r in results)
    lat = [r["latency_s"] for r in results]
    return {
        "clients": n,
        "requests_per_client": requests,
        "requests_ok": len(results),
        "errors": errors,
        "wall_s": round(wall, 3),
        "completion_tokens": tokens,
        "prompt_tokens": sum(r["prompt_tokens"] for r in results),
        "tokens_per_s": round(tokens / wall, 3) if wall > 0 else 0.0,
        "median_latency_s": round(statistics.median(lat), 3) if lat else None,
        "min_completion_tokens": min((r["completion_tokens"] for r in results), default=None),
        "finish_reasons": sorted({str(r["finish_reason"]) for r in results}),
    }


def parse_servers(specs):
    servers = []
    for i, spec in enumerate(specs):
        name, cmd = f"server{i + 1}", spec
        head = spec.split(None, 1)[0] if spec.strip() else ""
        if "=" in head and "/" not in head.split("=", 1)[0]:
            name, cmd = spec.split("=", 1)
        servers.append((name.strip(), cmd.strip()))
    return servers


def print_table(records, names, clients):
    """Markdown table of medians over rounds (min-max in brackets) per server and client count."""
    def vals(name, n, key):
        return [r[key] for r in records if r["server"] == name and r["clients"] == n and r[key] is not None]

    def cell(v):
        if not v:
            return "-"
        return f"{statistics.median(v):.2f}" + (f" ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else "")

    def round_ratios(name, n):
        base = {r["round"]: r["tokens_per_s"] for r in records if r["server"] == names[0] and r["clients"] == n}
        return [r["tokens_per_s"] / base[r["round"]] for r in records
                if r["server"] == name and r["clients"] == n and base.get(r["round"])]

    head = ["clients"] + [f"{nm} t/s" for nm in names] + [f"{nm}/{names[0]}" for nm in names[1:]] + \
           [f"{nm}/{names[0]} per round" for nm in names[1:]] + [f"{nm} median latency s" for nm in names]
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(" ---: " for _ in head) + "|")
    for n in clients:
        tps = [vals(nm, n, "tokens_per_s") for nm in names]
        meds = [statistics.median(t) if t else None for t in tps]
        ratios = [f"{m / meds[0]:.2f}" if m and meds[0] else "-" for m in meds[1:]]
        per_round = [cell(round_ratios(nm, n)) for nm in names[1:]]
        cells = [str(n)] + [cell(t) for t in tps] + ratios + per_round + \
                [cell(vals(nm, n, "median_latency_s")) for nm in names]
        print("| " + " | ".join(cells) + " |")
    rounds = sorted({r["round"] for r in records})
    reqs = sorted({r["requests_per_client"] for r in records})
    mt = sorted({r["max_tokens"] for r in records})
    print(f"\n(medians over {len(rounds)} round(s), min-max in brackets; requests per client {reqs}, "
          f"max_tokens {mt}; prompt processing included in every request)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", metavar="JSONL", help="only print the table of the records in JSONL (no server)")
    ap.add_argument("--server-cmd", action="append",
                    help="[NAME=]COMMAND; repeat for several servers (placeholders {n} {port} {ctx} {ctx_total})")
    ap.add_argument("--url", help="base URL (default http://127.0.0.1:{port})")
    ap.add_argument("--port", type=int, default=8091, help="base port for {port}; each start takes the next one")
    ap.add_argument("--clients", default="1,2,4,8", help="comma-separated client counts")
    ap.add_argument("--requests", type=int, default=4, help="requests per client, one after the other")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--warmup-tokens", type=int, default=16, help="max_tokens of the warm-up request")
    ap.add_argument("--slot-ctx", type=int, default=1024, help="{ctx}; {ctx_total} is n times it")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--startup-timeout", type=float, default=600)
    ap.add_argument("--request-timeout", type=float, default=900)
    ap.add_argument("--jsonl", help="append every record to this file")
    ap.add_argument("--log-dir", help="server logs (default: a new temporary folder)")
    args = ap.parse_args()

    # SIGTERM, and SIGINT even where a background job inherited it ignored, unwind through the
    # finally blocks below, which stop the server we started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    clients = [int(x) for x in args.clients.split(",") if x.strip()]
    if args.summarize:
        with open(args.summarize) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        names = list(dict.fromkeys(r["server"] for r in recs))
        print_table(recs, names, sorted({r["clients"] for r in recs}))
        return 0
    if not args.server_cmd:
        ap.error("--server-cmd is required (or --summarize JSONL)")
    servers = parse_servers(args.server_cmd)
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="parallel_clients.")
    os.makedirs(log_dir, exist_ok=True)
    log(f"server logs in {log_dir}")
    jsonl = open(args.jsonl, "a") if args.jsonl else None
    records = []
    port = args.port
    running = {}  # name -> Server, for commands started once

    def emit(rec):
        records.append(rec)
        line = json.dumps(rec, sort_keys=True)
        print(line, flush=True)
        if jsonl:
            jsonl.write(line + "\n")
            jsonl.flush()

    def measure(rnd, name, cmd_template, n, server):
        load = loadavg()
        log(f"round {rnd} {name} N={n}: load {load}")
        rec = run_clients(server.url, n, args.requests, args.max_tokens, args.request_timeout)
        rec.update({"round": rnd, "server": name, "loadavg_before": load,
                    "cmd": server.cmd, "max_tokens": args.max_tokens,
                    "time": datetime.datetime.now().isoformat(timespec="seconds"),
                    "per_n_restart": "{n}" in cmd_template})
        emit(rec)
        log(f"  {rec['completion_tokens']} tokens in {rec['wall_s']} s = {rec['tokens_per_s']} t/s, "
            f"median latency {rec['median_latency_s']} s, errors {len(rec['errors'])}")

    def make(name, cmd_template, n):
        nonlocal port
        p = port
        port += 1
        cmd = cmd_template.format(n=n, port=p, ctx=args.slot_ctx, ctx_total=n * args.slot_ctx)
        url = (args.url or "http://127.0.0.1:{port}").format(port=p)
        return Server(cmd, url, os.path.join(log_dir, f"{name}.{p}.log"))

    def warm(server):
        res = chat(server.url, "Warm-up: say hello.", args.warmup_tokens, args.request_timeout)
        log(f"  warm-up: {res['completion_tokens']} tokens in {res['latency_s']:.2f} s")

    try:
        for rnd in range(1, args.rounds + 1):
            for n in clients:
                for name, tmpl in servers:
                    if "{n}" in tmpl:
                        srv = make(name, tmpl, n)
                        try:
                            startup = srv.start(args.startup_timeout)
                            log(f"  {name}: /health 200 after {startup:.1f} s")
                            warm(srv)
                            measure(rnd, name, tmpl, n, srv)
                        finally:
                            rc = srv.stop()
                            if rc not in (0, None, -signal.SIGTERM):
                                log(f"  {name} exited with {rc}; log tail:\n{srv.tail()}")
                    else:
                        srv = running.get(name)
                        if srv is None:
                            srv = make(name, tmpl, n)
                            startup = srv.start(args.startup_timeout)
                            log(f"  {name}: /health 200 after {startup:.1f} s")
                            warm(srv)
                            running[name] = srv
                        measure(rnd, name, tmpl, n, srv)
    finally:
        for srv in running.values():
            srv.stop()
        if jsonl:
            jsonl.close()

    print_table(records, [name for name, _ in servers], clients)
    failed = [r for r in records if r["errors"]]
    if failed:
        print(f"\n{len(failed)} run(s) had errors; first: {failed[0]['errors'][0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
