"""`sluice.bench.procfs`'s series of a run's threads by kind, on real processes of this machine."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from sluice.bench.procfs import THREAD_KINDS, ThreadSeries, thread_seconds


def spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_process_s_threads_are_counted_by_kind_from_the_first_sample_and_a_gone_one_keeps_its_last() -> None:
    # a child process that burns CPU on a thread named as Spark names its task threads, and on
    # another named as nothing the series knows
    code = ("import threading, time, sys\n"
            "def burn(s, name=None):\n"
            "    if name:  # as the JVM names its threads (Python 3.11 leaves the OS thread unnamed)\n"
            "        open(f'/proc/self/task/{threading.get_native_id()}/comm', 'w').write(name)\n"
            "    end = time.thread_time() + s\n"
            "    while time.thread_time() < end: pass\n"
            "def task():  # and, done, renames itself as Spark 4.2 names an idle task thread\n"
            "    burn(0.6, 'Executor task l'); burn(0, 'Executor task i'); print('burnt', flush=True)\n"
            "    sys.stdin.readline()\n"
            "burn(0.3); t = threading.Thread(target=task); t.start(); t.join(); print('done', flush=True);"
            " time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        series = ThreadSeries()
        series.sample([child.pid])  # as the load starts: counted from here
        assert child.stdout is not None and child.stdin is not None and child.stdout.readline() == "burnt\n"
        series.sample([child.pid])
        last = {kind: points[-1][1] for kind, points in series.series.items()}
        # the thread named as Spark's task threads are, busy or idle (Linux keeps 15 characters of a name)
        assert 0.45 <= last["task"] <= 0.75, last
        assert 0.2 <= last["rest"] <= 0.5, last  # the main thread's burn and the interpreter's start
        assert last["jit"] == last["gc"] == last["stream"] == 0.0
        assert set(series.series) == {"machine", *THREAD_KINDS}
        assert last["machine"] >= last["task"] + last["rest"] - 0.05  # the machine was busy at least as long
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"  # the task thread ended: it keeps what it had
        series.sample([child.pid])
        assert series.series["task"][-1][1] == last["task"]
    finally:
        child.kill()
        child.wait()
    assert thread_seconds(child.pid) is None  # gone
    series.sample([child.pid])
    assert series.series["task"][-1][1] == last["task"]  # a process gone keeps what it last had


def test_a_renamed_thread_s_cpu_before_the_rename_stays_with_its_old_kind() -> None:
    # one thread burns 0.4 s named as Spark's task threads, is read, then renames itself (as Spark
    # renames its task threads) and burns 0.3 s more: 0.4 stays `task`, the 0.3 goes to `rest`
    code = ("import threading, time, sys\n"
            "def name(n): open(f'/proc/self/task/{threading.get_native_id()}/comm', 'w').write(n)\n"
            "def burn(s):\n"
            "    end = time.thread_time() + s\n"
            "    while time.thread_time() < end: pass\n"
            "go = threading.Event()\n"
            "def work():\n"
            "    name('Executor task l'); burn(0.4); print('one', flush=True); go.wait()\n"
            "    name('dispatcher-even'); burn(0.3); print('two', flush=True); time.sleep(30)\n"
            "threading.Thread(target=work, daemon=True).start()\n"
            "sys.stdin.readline(); go.set(); time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        series = ThreadSeries()
        series.sample([child.pid])
        assert child.stdout.readline() == "one\n"
        series.sample([child.pid])
        task = series.series["task"][-1][1]
        assert 0.3 <= task <= 0.5, series.series
        rest = series.series["rest"][-1][1]
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline() == "two\n"
        series.sample([child.pid])
        assert series.series["task"][-1][1] == task  # its first 0.4 s are still a task's
        assert 0.25 <= series.series["rest"][-1][1] - rest <= 0.4, series.series
    finally:
        child.kill()
        child.wait()


def test_a_process_first_seen_later_is_counted_from_its_start() -> None:
    series = ThreadSeries()
    series.sample([])
    burner = threading.Thread(target=spin, args=(0.2,))
    burner.start()
    burner.join()
    # this process was not seen in the first sample: all of its CPU so far counts (at least the burn)
    series.sample([__import__("os").getpid()])
    assert sum(points[-1][1] for kind, points in series.series.items() if kind != "machine") >= 0.2
