"""The Streamlit dashboard: AppTest for logic (a store with runs, an empty store, no store), and
the real thing served on 127.0.0.1 and screenshotted in headless Debian Chromium after its
charts rendered."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from recovery_lib.metrics.store import MetricsStore

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")
T0 = 1_790_000_000_000  # ms


def populated_store(path: Path) -> Path:
    with MetricsStore(path) as store:
        for mode, restart_s, verdict, divergent in (
            ("native", 24.5, "inconsistent", 7),
            ("causal", 22.0, "consistent", 0),
        ):
            run = store.start_run(
                "prices",
                mode,
                {"experiment": f"exp-{mode}", "run": "faulty", "fail": "mid-write", "rate": 1000},
            )
            store.add(
                "throughput",
                [(run, T0 // 1000 + s, 1000, 900 if s != 20 else 0) for s in range(60)],
            )
            store.add(
                "latency_samples",
                [(run, T0 + s * 1000, T0 + s * 1000 - 800 - s, 800 + s, f"0-0-{s}")
                 for s in range(60)],
            )  # fmt: skip
            store.add(
                "micro_batches",
                [(run, "q", b, T0 + b * 1000, 1000, 1000.0, 1100.0, 900, 700, 5, 20, 10, 10,
                  100 * b, 4096, 0, 3, None) for b in range(30)],
            )  # fmt: skip
            store.event(run, "failure_injected", {"kind": "mid-write"}, T0 + 20_000)
            store.event(run, "failure_detected", {"cause": "exit -9"}, T0 + 21_000)
            started = {"imported_ms": T0 + 23_000, "session_ready_ms": T0 + 26_000,
                       "query_built_ms": T0 + 26_100, "query_started_ms": T0 + 26_500}  # fmt: skip
            store.event(run, "job_phases", started, T0 + 26_500)
            store.event(run, "ready", {"restart_time_s": restart_s}, T0 + 21_000 + restart_s * 1000)
            recovered = {"recovery_time_s": restart_s + 9, "output_gap_s": restart_s + 2}
            store.event(run, "recovery_measured", recovered, T0 + 90_000)
            if mode == "native":  # a poison record the job found and parked
                store.event(
                    run,
                    "poison_parked",
                    {"position": "bids/0@1234", "reason": "PoisonedInput: x", "batch": 17},
                    T0 + 80_000,
                )
            store.add_consistency(
                run,
                f"ref-{mode}",
                {"query": "prices", "verdict": verdict, "outputs": 55_000,
                 "guarantee": "exactly-once" if verdict == "consistent" else "none",
                 "reference_outputs": 55_000, "lost": 0, "duplicated": 0,
                 "divergent": divergent, "unexpected": 0},
            )  # fmt: skip
        store.add(
            "job_status",
            [("q3_local", T0, "running", "r1", 11, 12, 1, T0 - 500, 41, 1, 2048, ""),
             ("q8_local", T0, "failed", "r2", 11, None, 3, T0 - 9000, 7, None, None,
              "the restart budget (3) is spent")],
        )  # fmt: skip
        store.add(
            "standby_shipments",
            [
                ("q3_local", T0 - 5000, 6, 40, 90_000, 3_000, 1, 2048, "{}"),
                ("q3_local", T0, 7, 41, 93_000, 3_000, 0, 0, "{}"),
            ],
        )
        store.add(
            "gc_runs",
            [("q3_local", T0, False, 41, 32, 120, 1_234_567, None, "{}")],
        )
        cec = store.start_run("avgprice", "cec", {"run": "faulty"})
        for k in range(3):
            state = {"open_windows": 900 + k, "extent": 2_800 + 10 * k, "replay_size": 14_000}
            store.event(cec, "cec_state", state, T0 + k * 5_000)
        recovery = {"open_windows": 898, "extent": 2_871, "torn": 1, "ec_load_s": 0.128}
        store.event(cec, "cec_recovery", {**recovery, "replayed": 14_166}, T0 + 20_000)
        pipe = store.start_run("pipeline:q1p", "unc", {})
        stages = [
            {"stage": "route", "serving": True, "last_commit": 40, "checkpoints": 41,
             "forced": 0, "line": 38},
            {"stage": "convert", "serving": True, "last_commit": 39, "checkpoints": 40,
             "forced": 0, "line": 39},
        ]  # fmt: skip
        state = {"pipeline": "q1p", "protocol": "unc", "stages": stages, "checkpoints": 81,
                 "invalid": 0, "invalid_strict": 2, "recoveries": 1}  # fmt: skip
        store.event(pipe, "pipeline_state", state, T0 + 30_000)
        recovered = {"pipeline": "q1p", "protocol": "unc", "failed": ["route"],
                     "restart": ["route"], "rewind": {}, "local": True,
                     "strict_rollback": ["convert", "route"]}  # fmt: skip
        store.event(pipe, "pipeline_recovery", recovered, T0 + 25_000)
        replicated = store.start_run("q3", "kazoo", {"run": "faulty"})
        for k, (a_live, a_batch) in enumerate(((True, 10), (False, 11), (True, 12))):
            replicas = {
                "a": {"live": a_live, "incarnation": k // 2, "pid": 7, "committed_batch": a_batch,
                      "role": "follower", "epoch": 2},
                "b": {"live": True, "incarnation": 0, "pid": 8, "committed_batch": 12 + k,
                      "role": "leader", "epoch": 2},
            }  # fmt: skip
            replaced = {"kind": "replacement", "replica": "a", "cause": "exit -9",
                        "detected_ms": T0, "survivor": "b", "started_ms": T0 + 1_000,
                        "copy_batch": 11, "joined_ms": T0 + 9_000}  # fmt: skip
            state = {"job": "q3", "output_topic": "x.out", "mode": "kazoo", "replicas": replicas,
                     "lag_batches": 2 if a_live else None, "gate_forwarded": 500,
                     "gate_dropped": {"a": 4, "b": 1}, "heartbeats": None,
                     "replacements": [replaced] if k else []}  # fmt: skip
            store.event(replicated, "replication_state", state, T0 + k * 5_000)
        store.event(replicated, "replica_joined", replaced, T0 + 9_000)
        store.event(replicated, "recovery_measured", {"output_gap_s": 1.5}, T0 + 60_000)
    return path


def app_test(path: Path):
    from streamlit.testing.v1 import AppTest

    os.environ["RECOVERY_METRICS_PATH"] = str(path)
    try:
        at = AppTest.from_file(APP, default_timeout=90)
        at.run()
    finally:
        os.environ.pop("RECOVERY_METRICS_PATH", None)
    return at


def test_the_dashboard_shows_jobs_recoveries_consistency_and_experiments(tmp_path):
    at = app_test(populated_store(tmp_path / "metrics.duckdb"))
    assert not at.exception, at.exception
    assert [t.label for t in at.tabs] == [
        "Overview",
        "Job detail",
        "Recoveries",
        "Consistency",
        "Checkpoints & GC",
        "Pipelines",
        "Replicas",
        "Experiments",
        "Papers",
        "Comparison",
    ]
    assert not at.warning
    frames = [df.value for df in at.dataframe]
    jobs = next(f for f in frames if "last heartbeat" in f.columns)  # human labels
    assert jobs["job"].tolist() == ["q3_local", "q8_local"]
    assert jobs["status"].tolist() == ["running", "failed"]
    assert "None" not in jobs.astype(str).to_numpy()  # an empty cell is blank
    banner = [e.value for e in at.error]  # above every tab: what needs a person now
    assert any("job q8_local is down: the restart budget" in b for b in banner), banner
    reports = next(f for f in frames if "verdict" in f.columns and "lost" in f.columns)
    assert sorted(reports["verdict"]) == ["consistent", "inconsistent"]
    assert sorted(reports["guarantee"]) == ["exactly-once", "none"]
    assert "Restarts, phase by phase" in [h.value for h in at.subheader]
    every = next(f for f in frames if "recovery (s)" in f.columns and "time (UTC)" in f.columns)
    assert set(every["recovery"]) == {"restart", "replica replaced", "pipeline stage restart"}
    restarted = every[every["recovery"] == "restart"]
    # Columns with empty cells show as text, blank where empty (the widget would say "None").
    assert sorted(restarted["recovery (s)"]) == ["31", "33.5"]  # beside the restart times
    assert sorted(restarted["output gap (s)"]) == ["24", "26.5"]
    assert all(isinstance(t, pd.Timestamp) for t in every["time (UTC)"])  # not epoch ms
    replica = every[every["recovery"] == "replica replaced"].iloc[0]
    assert replica["output gap (s)"] == "1.5" and replica["restart (s)"] == "9"  # whole again
    assert every[every["recovery"] == "pipeline stage restart"].iloc[0]["recovery (s)"] == ""
    parked = next(f for f in frames if "position" in f.columns and "reason" in f.columns)
    assert parked["position"].tolist() == ["bids/0@1234"] and parked["batch"].tolist() == [17]
    assert any("bytes freed" in f.columns for f in frames)
    shipped = next(f for f in frames if "bytes copied" in f.columns)
    assert shipped["lag batches"].tolist() == [0, 1]  # newest first
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["not exactly-once"] == "1"
    assert metrics["avgprice: open windows"] == "902"  # the CEC panel: the newest state
    assert metrics["EC-load time of the last recovery"] == "0.13 s"
    assert any("ec load (s)" in f.columns for f in frames)
    # The pipelines tab: stages against the recovery line, invalid checkpoints, recoveries.
    assert metrics["invalid by the strict rule"] == "2" and metrics["recoveries"] == "1"
    # The replicas tab: the newest state (both live again, b leads), the gate, a replacement.
    assert metrics["live replicas"] == "2 of 2" and metrics["leader"] == "b"
    assert metrics["lag between replicas"] == "2 batches"
    assert metrics["copies dropped by the gate"] == "5"
    replaced = next(f for f in frames if "copied batch" in f.columns)
    assert replaced["replica"].tolist() == ["a"] and replaced["copied batch"].tolist() == [11]
    stages = next(f for f in frames if "line" in f.columns and "stage" in f.columns)
    assert stages["line"].tolist() == [38, 39]
    recoveries = next(f for f in frames if "strict rule rolls back" in f.columns)
    assert recoveries["local"].tolist() == [True]
    # The papers tab: the first paper's rows beside ours, from the committed reports.
    papers = next(f for f in frames if "paper row" in f.columns)
    assert len(papers) > 10 and {"agrees", "not measured"} <= set(papers["verdict"])
    unmeasured = papers[papers["verdict"] == "not measured"]
    assert unmeasured["why it differs / is not measured"].str.len().min() > 0  # each says why
    assert metrics["job q3"] == "native · sink release"  # the advisor, no outage bound
    charts = at.get("vega_lite_chart")
    assert len(charts) >= 8  # sparklines, timeline, state, recoveries, damage, shipping, GC,
    # pipeline stages


def test_the_comparison_tab_shows_every_variant_of_a_compare_report(tmp_path, monkeypatch):
    from recovery_lib.settings import reload_settings

    native = {"name": "native", "verdict": "consistent", "guarantee": "exactly-once",
              "fired": True, "recovery_time_s": 40.0, "output_gap_s": 30.0,
              "restart_time_s": 12.0, "vs_native": {"p50_before_ms": 1.0}}  # fmt: skip
    kazoo = {**native, "name": "kazoo", "recovery_time_s": 2.0, "output_gap_s": 5.0,
             "vs_native": {"p50_before_ms": 1.8}}  # fmt: skip
    cec = {"name": "cec", "not_applicable": "job q3's build returns a DataFrame"}
    reports = tmp_path / "reports"
    reports.mkdir()
    report = {"job": "q3", "config": {"rate": 2000, "fail_at_s": 40, "duration_s": 90},
              "variants": [native, kazoo, cec]}  # fmt: skip
    (reports / "bench_compare.json").write_text(json.dumps(report))
    cec_job = {**report, "job": "avgprice", "variants": [native, {**native, "name": "cec"}]}
    (reports / "bench_compare_avgprice.json").write_text(json.dumps(cec_job))
    (reports / "bench_compare_native.json").write_text(json.dumps({"experiment": "x"}))
    monkeypatch.setenv("RECOVERY_BENCHMARK_REPORTS", str(reports))
    reload_settings()
    try:
        store = populated_store(tmp_path / "metrics.duckdb")
        at = app_test(store)
        assert not at.exception, at.exception
        table = next(df.value for df in at.dataframe if "variant" in df.value.columns)
        assert table["variant"].tolist() == ["native", "kazoo", "cec"]
        assert table["recovery (s)"].tolist()[:2] == [40.0, 2.0]
        assert "DataFrame" in table["note"].tolist()[2]
        pick = next(b for b in at.selectbox if b.label.startswith("comparison"))
        assert pick.options == ["q3 (bench_compare.json)", "avgprice (bench_compare_avgprice.json)"]
        monkeypatch.setenv("RECOVERY_METRICS_PATH", str(store))  # app_test unset it
        pick.select("avgprice (bench_compare_avgprice.json)").run()
        assert not at.exception, at.exception
        table = next(df.value for df in at.dataframe if "variant" in df.value.columns)
        assert table["variant"].tolist() == ["native", "cec"]
    finally:
        monkeypatch.delenv("RECOVERY_BENCHMARK_REPORTS")
        reload_settings()


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_no_data_gives_a_helpful_message_not_a_stack_trace(tmp_path, state):
    path = tmp_path / "metrics.duckdb"
    if state == "empty":
        MetricsStore(path).close()
    at = app_test(path)
    assert not at.exception
    text = " ".join(w.value for w in at.warning)
    assert ("No metrics store" in text) if state == "missing" else ("no runs yet" in text)


# -- a real browser ---------------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    """Distinct free ports: every socket stays bound until all are picked (a port closed at
    once could be handed out again by the next bind)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_http(url: str, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f} s")


class DevTools:
    """The minimum of the Chrome DevTools protocol: navigate, evaluate, screenshot."""

    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(ws_url, max_size=50_000_000)
        self._id = 0

    def call(self, method: str, **params):  # noqa: ANN201
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):  # noqa: ANN201
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


@pytest.mark.slow
def test_served_dashboard_renders_its_charts_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, (
        "Debian chromium is missing: `make test` installs it (apt-get install chromium)"
    )
    store = populated_store(tmp_path / "metrics.duckdb")
    port, debug_port = _free_ports(2)
    env = {**os.environ, "RECOVERY_METRICS_PATH": str(store)}
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", APP, "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    browser = None
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", 60)
        browser = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'chrome'}",
             f"--remote-debugging-port={debug_port}", "--remote-debugging-address=127.0.0.1",
             "--window-size=1400,1800", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        _wait_http(f"http://127.0.0.1:{debug_port}/json/version", 30)
        import httpx

        page = next(
            t
            for t in httpx.get(f"http://127.0.0.1:{debug_port}/json/list").json()
            if t["type"] == "page"
        )
        tools = DevTools(page["webSocketDebuggerUrl"])
        try:
            tools.call("Page.enable")
            tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
            deadline = time.monotonic() + 90
            rendered = 0
            while time.monotonic() < deadline:
                rendered = (
                    tools.evaluate(
                        "document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length"
                    )
                    or 0
                )
                if rendered >= 3:
                    break
                time.sleep(1)
            time.sleep(2)  # let the last charts paint
            text = tools.evaluate("document.body.innerText") or ""
            shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            # The Recoveries and Replicas tabs, clicked as a person would; each shot once the
            # tab's text shows and every chart in sight is drawn (either text: with or without
            # data; the assertions below say which).
            tabs = {}
            shown = {
                "Recoveries": ("a standby takeover", "No recovery yet"),
                "Replicas": ("live replicas", "No replicated job has reported yet"),
            }
            for tab, texts in shown.items():
                clicked = tools.evaluate(
                    "(() => { const b = [...document.querySelectorAll('[role=tab]')]"
                    f".find(b => b.innerText.trim() === '{tab}');"
                    " if (b) b.click(); return !!b; })()"
                )
                assert clicked, f"no tab {tab}"
                deadline = time.monotonic() + 60
                while True:
                    body = tools.evaluate("document.body.innerText") or ""
                    drawn = tools.evaluate(  # the tab selected, the charts of its panel drawn
                        "(() => { const b = [...document.querySelectorAll('[role=tab]')]"
                        f".find(b => b.innerText.trim() === '{tab}');"
                        " if (!b || b.getAttribute('aria-selected') !== 'true') return false;"
                        " const panel = document.getElementById("
                        "b.getAttribute('aria-controls') || '') || document;"
                        " return [...panel.querySelectorAll('.vega-embed')]"
                        ".filter(e => e.offsetParent !== null)"
                        ".every(e => e.querySelector('canvas, svg')); })()"
                    )
                    if drawn and any(t in body for t in texts):
                        break
                    assert time.monotonic() < deadline, f"tab {tab} never showed: {body[-2000:]}"
                    time.sleep(0.5)
                tabs[tab] = tools.call(
                    "Page.captureScreenshot", format="png", captureBeyondViewport=True
                )
            tab_text = tools.evaluate("document.body.innerText") or ""
        finally:
            tools.close()
        shots = {"overview": shot, **{t.lower(): s for t, s in tabs.items()}}
        keep = os.environ.get("RECOVERY_SCREENSHOTS_DIR")  # docs/: `make dashboard-screenshots`
        for name, taken in shots.items():
            data = base64.b64decode(taken["data"])
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, name
            if keep:
                (Path(keep) / f"dashboard_{name}.png").write_bytes(data)
        assert "live replicas" in tab_text and "replacements of dead replicas" in tab_text
        png = base64.b64decode(shot["data"])
        (tmp_path / "dashboard.png").write_bytes(png)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
        assert rendered >= 3, f"only {rendered} charts rendered"
        # Tables are drawn on a canvas; headings, tabs and run cards are text.
        for expected in ("Spark streaming recovery", "Supervised jobs", "Consistency", "prices"):
            assert expected in text
        assert "job q8_local is down" in text  # the alert banner, above every tab
        for raw in ("restart_time_s", "committed_batch", "copy_batch", "died_ms"):
            assert raw not in text  # no raw column name anywhere a person reads
    finally:
        for proc in (browser, server):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
