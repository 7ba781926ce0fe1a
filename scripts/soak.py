"""The soak run behind scripts/soak: a mixed workload against one Tafel for N minutes, the
server killed with SIGKILL now and then and started again, every acknowledged write checked
after each restart and at the end; RSS and latency percentiles over time go to a CSV and a
plot. Exits non-zero if any acknowledged write was lost or changed, or the server misbehaved."""

from __future__ import annotations

import argparse
import csv
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
TABLE = "soak"
ROWS = 400  # row keys per partition


def conn_str(port: int) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};"
            f"TableEndpoint=http://127.0.0.1:{port}/devstoreaccount1;")


class Server:
    def __init__(self, binary: str, data: Path, port: int, admin: int, log: Path):
        self.cmd = [binary, "serve", "--data-dir", str(data), "--port", str(port),
                    "--admin-port", str(admin), "--drain-seconds", "0"]
        self.admin = admin
        self.log = open(log, "ab")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"soak: the server exited with {self.proc.returncode} on start (see its log)")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        sys.exit("soak: the server was not ready within 120 s")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except (OSError, AttributeError):
            pass
        return float("nan")


class Model:
    """What each key must hold: its acknowledged value, or any of a set while a write whose
    answer was lost (the server killed under it) is in doubt."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: dict[tuple[str, str], int | None] = {}
        self.doubt: dict[tuple[str, str], set] = {}

    def acked(self, key, value) -> None:
        with self.lock:
            self.known[key] = value
            self.doubt.pop(key, None)

    def unsure(self, key, value) -> None:
        with self.lock:
            self.doubt.setdefault(key, {self.known.get(key)}).add(value)

    def allowed(self, key) -> set:
        with self.lock:
            return set(self.doubt.get(key, {self.known.get(key)}))


class Gate:
    """Lets the main thread hold the workers still (between operations) while it checks."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.closed = False
        self.active = 0

    def enter(self) -> None:
        with self.cond:
            while self.closed:
                self.cond.wait()
            self.active += 1

    def leave(self) -> None:
        with self.cond:
            self.active -= 1
            self.cond.notify_all()

    def hold(self) -> None:
        with self.cond:
            self.closed = True
            while self.active:
                self.cond.wait()

    def release(self) -> None:
        with self.cond:
            self.closed = False
            self.cond.notify_all()


class Stats:
    """Latencies since the last sample: of single-entity operations, and of batches and
    partition queries (400 rows, most of their time spent decoding in Python)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.point: list[float] = []
        self.bulk: list[float] = []
        self.errors = 0
        self.ops = 0

    def record(self, seconds: float, bulk: bool) -> None:
        with self.lock:
            (self.bulk if bulk else self.point).append(seconds)
            self.ops += 1

    def take(self) -> tuple[list[float], list[float], int]:
        with self.lock:
            out = (self.point, self.bulk, self.errors)
            self.point, self.bulk, self.errors = [], [], 0
            return out


def worker(i: int, workers: int, port: int, model: Model, stats: Stats, stop: threading.Event,
           gate: Gate, failures: list, rng: random.Random) -> None:
    table = TableClient.from_connection_string(conn_str(port), TABLE, retry_total=6, retry_backoff_factor=0.5)
    partitions = [f"p{n:02d}" for n in range(i, 32, workers)]
    while not stop.is_set():
        gate.enter()
        try:
            one_op(table, partitions, model, stats, failures, rng)
        finally:
            gate.leave()


def one_op(table: TableClient, partitions: list, model: Model, stats: Stats, failures: list,
           rng: random.Random) -> None:
    pk = rng.choice(partitions)
    rk = f"r{rng.randrange(ROWS):04d}"
    key = (pk, rk)
    op = rng.random()
    value = rng.randrange(1 << 30)
    started = time.monotonic()
    try:
        if op < 0.30:
            model.unsure(key, value)
            table.upsert_entity({"PartitionKey": pk, "RowKey": rk, "V": value, "Pad": "x" * rng.randrange(2000)},
                                mode=UpdateMode.REPLACE)
            model.acked(key, value)
        elif op < 0.40:
            model.unsure(key, value)
            table.upsert_entity({"PartitionKey": pk, "RowKey": rk, "V": value}, mode=UpdateMode.MERGE)
            model.acked(key, value)
        elif op < 0.50:
            model.unsure(key, None)
            try:
                table.delete_entity(pk, rk)
            except ResourceNotFoundError:
                pass
            model.acked(key, None)
        elif op < 0.60:
            rks = sorted({f"r{rng.randrange(ROWS):04d}" for _ in range(20)})
            ops = [("upsert", {"PartitionKey": pk, "RowKey": r, "V": value}) for r in rks]
            for r in rks:
                model.unsure((pk, r), value)
            table.submit_transaction(ops)
            for r in rks:
                model.acked((pk, r), value)
        elif op < 0.95:
            allowed = model.allowed(key)
            try:
                got = table.get_entity(pk, rk)["V"]
            except ResourceNotFoundError:
                got = None
            if got not in allowed:
                failures.append(f"{key}: read {got}, acknowledged {allowed}")
        else:
            seen = {e["RowKey"]: e["V"] for e in table.query_entities(f"PartitionKey eq '{pk}'", select=["RowKey", "V"])}
            for r in range(ROWS):
                k = (pk, f"r{r:04d}")
                allowed = model.allowed(k)
                if seen.get(k[1]) not in allowed:
                    failures.append(f"{k}: query saw {seen.get(k[1])}, acknowledged {allowed}")
        stats.record(time.monotonic() - started, bulk=0.50 <= op < 0.60 or op >= 0.95)
    except AzureError:
        # Killed under it, past the retries: the write stays in doubt.
        with stats.lock:
            stats.errors += 1
        time.sleep(0.2)


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of `values`, in ms (NaN if none)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def verify(port: int, model: Model, failures: list) -> int:
    """Every key against the model: the whole table, read after a restart."""
    table = TableClient.from_connection_string(conn_str(port), TABLE)
    seen = {(e["PartitionKey"], e["RowKey"]): e["V"] for e in table.list_entities(select=["PartitionKey", "RowKey", "V"])}
    with model.lock:
        keys = set(model.known) | set(model.doubt) | set(seen)
    checked = 0
    for k in keys:
        allowed = model.allowed(k)
        got = seen.get(k)
        if got not in allowed:
            failures.append(f"{k}: {got} after a restart, acknowledged {allowed}")
        else:
            model.acked(k, got)  # what is there is now settled
        checked += 1
    return checked


def plot(samples: list[dict], kills: list[float], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [s["t_min"] for s in samples]
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    axes[0].plot(t, [s["rss_mb"] for s in samples], color="tab:blue")
    axes[0].set_ylabel("server RSS (MiB)")
    axes[1].plot(t, [s["bulk_p99_ms"] for s in samples], color="tab:orange", label="p99, batches and queries")
    axes[1].plot(t, [s["p99_ms"] for s in samples], color="tab:red", label="p99, single-entity operations")
    axes[1].plot(t, [s["p50_ms"] for s in samples], color="tab:gray", label="p50, single-entity operations")
    axes[1].set_ylabel("latency (ms)")
    axes[1].set_yscale("log")
    axes[1].legend(loc="upper right", fontsize="small")
    axes[2].plot(t, [s["ops_per_s"] for s in samples], color="tab:green")
    axes[2].set_ylabel("operations / s")
    axes[2].set_xlabel("minutes")
    for ax in axes:
        for k in kills:
            ax.axvline(k, color="black", alpha=0.25, linewidth=1)
    fig.suptitle("Tafel soak: mixed workload, kill -9 at the grey lines")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--kill-every", type=float, default=180, help="seconds between kills, on average")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--sample", type=float, default=15, help="seconds per sample")
    ap.add_argument("--binary", default="target/release/tafel")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    port, admin = 10402, 10412
    srv = Server(args.binary, args.out / "data", port, admin, args.out / "tafel.log")
    srv.start()
    TableServiceClient.from_connection_string(conn_str(port)).create_table_if_not_exists(TABLE)
    model, stats, failures, gate = Model(), Stats(), [], Gate()
    stop = threading.Event()
    threads = [threading.Thread(target=worker, args=(i, args.workers, port, model, stats, stop, gate, failures,
                                                     random.Random(rng.random())), daemon=True)
               for i in range(args.workers)]
    for th in threads:
        th.start()
    began = time.monotonic()
    end = began + args.minutes * 60
    next_kill = began + rng.expovariate(1 / args.kill_every)
    next_sample = began + args.sample
    samples, kills, verified = [], [], 0
    rss_now: list[float] = []
    while time.monotonic() < end and not failures:
        time.sleep(0.5)
        rss_now.append(srv.rss_mb())
        now = time.monotonic()
        if now >= next_kill:
            srv.kill()
            kills.append((now - began) / 60)
            srv.start()
            gate.hold()  # the writes in flight finish (retried), then every key is checked
            verified += verify(port, model, failures)
            gate.release()
            print(f"[{(now - began) / 60:5.1f} min] kill -9 #{len(kills)}: restarted, "
                  f"every key checked ({verified} checks so far)", flush=True)
            next_kill = time.monotonic() + rng.expovariate(1 / args.kill_every)
        if now >= next_sample:
            point, bulk, errors = stats.take()
            sample = {"t_min": round((now - began) / 60, 2), "rss_mb": round(max(rss_now), 1),
                      "ops_per_s": round((len(point) + len(bulk)) / args.sample, 1),
                      "p50_ms": round(quantile(point, 0.5), 2), "p99_ms": round(quantile(point, 0.99), 2),
                      "bulk_p99_ms": round(quantile(bulk, 0.99), 2), "errors": errors, "kills": len(kills)}
            samples.append(sample)
            rss_now = []
            print(f"[{sample['t_min']:5.1f} min] {sample['ops_per_s']:7.1f} ops/s  p50 {sample['p50_ms']:6.2f} ms  "
                  f"p99 {sample['p99_ms']:7.2f} ms  (batches, queries: p99 {sample['bulk_p99_ms']:7.2f} ms)  "
                  f"RSS {sample['rss_mb']:6.1f} MiB  errors {errors}", flush=True)
            next_sample += args.sample
    stop.set()
    for th in threads:
        th.join(timeout=60)
    verified += verify(port, model, failures)
    code = srv.stop()
    srv.start()  # a clean stop, then a start: still all there
    verified += verify(port, model, failures)
    srv.stop()
    with open(args.out / "samples.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(samples[0]) if samples else ["t_min"])
        w.writeheader()
        w.writerows(samples)
    if samples:
        plot(samples, kills, args.out / "soak.png")
    p99s = [s["p99_ms"] for s in samples if s["p99_ms"] == s["p99_ms"]]
    print(f"\nsoak: {args.minutes:g} min, {stats.ops} operations, {len(kills)} kill -9, {verified} key checks; "
          f"RSS max {max(s['rss_mb'] for s in samples) if samples else 0:.0f} MiB; "
          f"single-entity p99 per sample: median {statistics.median(p99s) if p99s else 0:.1f} ms, "
          f"max {max(p99s) if p99s else 0:.1f} ms; "
          f"clean stop exit {code}; {len(failures)} failures")
    print(f"soak: {args.out / 'samples.csv'}, {args.out / 'soak.png'}")
    for f in failures[:20]:
        print("  FAILED", f)
    sys.exit(1 if failures or code != 0 else 0)


if __name__ == "__main__":
    main()
