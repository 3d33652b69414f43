"""kiln.profiler: record_function ranges, schedules and step(), key_averages().table() and the
Chrome trace, against torch.profiler (torch as the oracle for what is recorded when)."""
import json
import threading
import time

import pytest

import kiln
from oracle import need_torch


def trace_calls(T):
    calls = []

    def ready(p):
        calls.append((p.step_num, sorted((e.key, e.count) for e in p.key_averages())))

    with T.profiler.profile(schedule=T.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1),
                            on_trace_ready=ready) as p:
        for _ in range(12):
            with T.profiler.record_function("work"):
                pass
            p.step()
    every3 = T.profiler.schedule(wait=0, warmup=1, active=3)
    with T.profiler.profile(schedule=every3, on_trace_ready=ready) as p:
        for _ in range(6):
            with T.profiler.record_function("w"):
                pass
            p.step()
    with T.profiler.profile(on_trace_ready=ready):
        with T.profiler.record_function("once"):
            pass
    return calls


def test_schedule_and_trace_ready_equal_torch():
    torch = need_torch()
    assert trace_calls(kiln) == trace_calls(torch)
    for kw in [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=3),
               dict(wait=2, warmup=1, active=3, repeat=1, skip_first=2)]:
        k, t = kiln.profiler.schedule(**kw), torch.profiler.schedule(**kw)
        assert [k(i).name for i in range(20)] == [t(i).name for i in range(20)], kw


def test_nested_ranges_self_time_and_table():
    @kiln.profiler.record_function("decorated")
    def work():
        time.sleep(0.002)

    with kiln.profiler.profile(activities=[kiln.profiler.ProfilerActivity.CPU]) as prof:
        with kiln.profiler.record_function("outer"):
            work()
            work()
            time.sleep(0.002)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["decorated"].count == 2 and avg["outer"].count == 1
    outer, inner = avg["outer"], avg["decorated"]
    assert outer.cpu_time_total >= inner.cpu_time_total + 2000 * 0.9
    assert abs(outer.self_cpu_time_total - (outer.cpu_time_total - inner.cpu_time_total)) < 1e-6
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU",
                                "total", "CPU", "time", "avg", "#", "of", "Calls"]
    assert lines[3].split()[0] == "outer" and lines[4].split()[0] == "decorated"
    assert lines[3].split()[3] == "100.00%" and lines[-1].startswith("Self CPU time total: ")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="cuda_time_total")


def test_ranges_from_threads_and_chrome_trace(tmp_path):
    def worker():
        with kiln.profiler.record_function("in_thread"):
            time.sleep(0.001)

    with kiln.profiler.profile() as prof:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        with kiln.profiler.record_function("main"):
            pass
    with kiln.profiler.record_function("not_recorded"):
        pass
    events = prof.events()
    assert sorted(e.name for e in events) == ["in_thread", "main"]
    assert len({e.thread for e in events}) == 2
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert sorted(e["name"] for e in trace["traceEvents"]) == ["in_thread", "main"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace["traceEvents"])
    handler = kiln.profiler.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w")
    handler(prof)
    written = [p.name for p in (tmp_path / "tb").iterdir()]
    assert len(written) == 1 and written[0].startswith("w.") and written[0].endswith(".pt.trace.json")


def test_autograd_profiler_and_compiled_ranges():
    with kiln.autograd.profiler.profile() as prof:
        with kiln.autograd.profiler.record_function("x"):
            pass
    assert [(e.key, e.count) for e in prof.key_averages()] == [("x", 1)]
    assert [e.name for e in prof.function_events] == ["x"]
    with kiln.autograd.profiler.profile(enabled=False) as off:
        with kiln.autograd.profiler.record_function("x"):
            pass
    assert list(off.events()) == []

    def f(x):
        with kiln.profiler.record_function("inside"):
            y = x * 2
        return y + 1

    x = kiln.randn(3)
    with kiln.profiler.profile() as prof:
        out = kiln.compile(f)(x)
    assert [(e.key, e.count) for e in prof.key_averages()] == [("inside", 1)]
    assert (out - (x * 2 + 1)).abs().max().item() == 0
