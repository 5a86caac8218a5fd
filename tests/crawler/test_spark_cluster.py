"""``neardup recluster --engine spark --master spark://...``: on a Spark cluster, not local mode.

A standalone Spark cluster, the simplest real one, runs on this machine for the module: a master
and two workers of one core each, each a JVM of its own started with the ``spark-class`` that
PySpark installs, listening on 127.0.0.1 only. The command then runs as a user runs it against
a cluster, in a process of its own: its tasks run in two executor JVMs that the workers start
in their work directory, with Python workers that each executor starts, and every shuffle
crosses from one executor to the other; what local mode shares (one JVM, one working
directory, the driver's Python) is not shared here. Every test here takes a JVM or more of its
own: they are all slow.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

from crawler.cli import main
from tests.crawler.test_recluster import truth_corpus, warc_pages
from tests.crawler.test_spark import planted_corpus, without_timing

pytestmark = pytest.mark.slow

SPARK_CLASS = Path(pyspark.__file__).with_name("bin") / "spark-class"
#: how long a master or a worker may take to say it is ready
START = 120
#: workers of the cluster, each with one core and an executor of its own per application
WORKERS = 2


class Standalone:
    """A running standalone cluster: its master's URL and the worker's work directory."""

    def __init__(self, url: str, work: Path) -> None:
        self.url = url
        self.work = work


def _started(args: list[str], log: Path, ready: str, env: dict[str, str]) -> tuple[Any, str]:
    """A Spark daemon in the foreground, once its log has a line matching ``ready``."""
    with open(log, "wb") as out:
        daemon = subprocess.Popen([str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT,
                                  env=env, start_new_session=True)
    deadline = time.monotonic() + START
    while time.monotonic() < deadline:
        found = re.search(ready, log.read_text(errors="replace"))
        if found:
            return daemon, found.group(0)
        if daemon.poll() is not None:
            break
        time.sleep(0.2)
    daemon.kill()
    pytest.fail(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    home = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(SPARK_CLASS.parent.parent),
           "SPARK_LOCAL_IP": "127.0.0.1",
           # no REST submission server: it would listen on a fixed port, 6066
           "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    master, said = _started(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
         "--webui-port", "0"], home / "master.log", r"Starting Spark master at spark://\S+", env)
    url = said.rsplit(" ", 1)[-1]
    daemons = [master]
    try:
        for n in range(WORKERS):  # one core each: the shuffles cross executors
            worker, _ = _started(
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                 "--webui-port", "0", "--cores", "1", "--memory", "1g",
                 "--work-dir", str(home / "work"), url],
                home / f"worker-{n}.log", r"Successfully registered with master", env)
            daemons.insert(0, worker)
    except BaseException:
        for daemon in daemons:
            daemon.kill()
        raise
    yield Standalone(url, home / "work")
    for daemon in daemons:
        daemon.terminate()
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()


@pytest.fixture(scope="module", autouse=True)
def nobody_answers(tmp_path_factory):
    """The command on a master URL where no master listens, started as the module starts:
    Spark tries to register with it for a minute before it gives up (three tries, twenty
    seconds apart, fixed in Spark's standalone client: no setting makes them fewer), and that
    minute passes while the other tests run. Their own applications run on the module's
    cluster; this one never reaches any."""
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path_factory.mktemp("nobody")
    (home / "t.jsonl").write_text('{"id": 1, "text": "a document"}\n')
    url = f"spark://127.0.0.1:{port}"
    started = started_command(url, home, sys.executable, "--jsonl", "t.jsonl", "-o", "c.jsonl")
    yield url, started
    if started.process.stdout and not started.process.stdout.closed:  # its test was not run
        started.process.kill()
        started.process.communicate()


class Done:
    """What a command left: its exit status and its output."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


class Started:
    """A command running in a process of its own, to be waited for."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def communicate(self, timeout: float) -> Done:
        stdout, stderr = self.process.communicate(timeout=timeout)
        return Done(self.process.returncode, stdout, stderr)


def started_command(master: str, cwd: Path, python: str, *argv: str,
                    program: tuple[str, ...] = ("-m", "crawler.cli")) -> Started:
    """``neardup recluster --engine spark`` on ``master``, in a process of its own in ``cwd``
    (``program``: what Python runs, the command's module or a script that calls it), its
    driver on loopback, its executors running ``python``; started, not waited for."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    for inherited in ("PYSPARK_PYTHON", "PYSPARK_GATEWAY_PORT"):  # the setting must do it
        env.pop(inherited, None)
    return Started(subprocess.Popen(
        [sys.executable, *program, "recluster", "--engine", "spark",
         "--master", master, "--spark-conf", "spark.driver.host=127.0.0.1",
         "--spark-conf", f"spark.pyspark.python={python}", *argv, "--quiet"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ))


#: the command, as ``python -m crawler.cli`` runs it, with one thing more in its process: the
#: moment the engine logs that the greedy rounds are decided, it kills the application's
#: executors (every JVM the workers started for it), and says so in ``lost.json``. What they
#: hold then (the preferences, the rounds' steps, the documents) is gone, and the numbering and
#: the write still have to read it
LOSES_ITS_EXECUTORS = """
import json, logging, os, signal, sys
from pathlib import Path
from pyspark.sql import SparkSession
from crawler.cli import main

lost_after = "estimates and greedy rounds"
killed = []

def executors(app):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv and app in argv:
            yield int(pid)

class LoseTheExecutors(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith(lost_after) and not killed:
            app = SparkSession.getActiveSession().sparkContext.applicationId
            for pid in executors(app.encode()):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            Path("lost.json").write_text(json.dumps({"app": app, "killed": len(killed)}))

logger = logging.getLogger("crawler.recluster.spark.run")
logger.setLevel(logging.DEBUG)
logger.addHandler(LoseTheExecutors())
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds executors in /proc")
def test_on_a_cluster_that_loses_its_executors_the_command_writes_what_the_local_engine_writes(
        standalone, tmp_path, monkeypatch, capsys):
    """A WARC file, JSON Lines without ids (so named by path and line) and real pages with
    planted copies, each given by a path relative to the command's directory, which is not the
    executor's. Midway every executor is lost (a preempted node), and takes what it kept with
    it: Spark computes that again from its lineage, on the executors the workers start in
    their place, so the run goes on, and the cluster's clusters.jsonl is the local engine's,
    byte for byte. A local checkpoint, which cannot be computed again, would fail the run
    (``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``)."""
    planted_corpus(tmp_path / "pages", 80)
    warc_pages(tmp_path)
    docs, _ = truth_corpus(seed=11, mixed=3, identical=2, singles=2)
    (tmp_path / "t.jsonl").write_text(
        "".join(json.dumps({"text": " ".join(tokens) + "."}) + "\n" for _, tokens in docs))
    (tmp_path / "loses_its_executors.py").write_text(LOSES_ITS_EXECUTORS)
    given = ["--warc", "crawl.warc.gz", "--jsonl", "t.jsonl", "--html", "pages",
             "--threshold", "0.8", "--json"]

    done = started_command(standalone.url, tmp_path, sys.executable, *given,
                           "-o", "spark.jsonl", program=("loses_its_executors.py",),
                           ).communicate(timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    monkeypatch.chdir(tmp_path)
    assert main(["recluster", *given, "-o", "local.jsonl", "--quiet"]) == 0
    expected = json.loads(capsys.readouterr().out)

    lost = json.loads((tmp_path / "lost.json").read_text())
    assert lost["killed"] == WORKERS  # the executors were there to lose, and were lost
    assert got["spark"] == {"master": standalone.url, "cores": 2, "settings": {
        "spark.driver.host": "127.0.0.1", "spark.pyspark.python": sys.executable}}
    assert (tmp_path / "spark.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert without_timing(got) == without_timing(expected)
    assert expected["summary"]["mixed_clusters"] >= 10
    ids = [json.loads(line)["id"] for line in (tmp_path / "spark.jsonl").read_text().splitlines()]
    for each_input in ("http://site.test/", "t.jsonl:", "pages/"):
        assert any(doc_id.startswith(each_input) for doc_id in ids), each_input
    # the tasks ran in executors the workers started, in their work directory, and the
    # workers started the application others to go on with
    assert len(list((standalone.work / lost["app"]).glob("*/stderr"))) > WORKERS


def test_executors_whose_python_lacks_neardup_or_is_missing_are_one_line(standalone, tmp_path):
    """A cluster whose executors run a Python without neardup (PySpark's default there is
    ``python3``, whatever the driver runs), or no Python at all: one line that says which
    Python and what to do, exit status 2, and no traceback."""
    docs, _ = truth_corpus(seed=3, mixed=1, identical=1, singles=1)
    (tmp_path / "t.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": " ".join(t)}) + "\n" for i, t in docs))
    bare = tmp_path / "python-without-site-packages"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(bare.stat().st_mode | stat.S_IXUSR)
    # the two applications side by side, a core each; a task fails once, not Spark's four
    # times, before the job does
    started = [(started_command(standalone.url, tmp_path, python, "--jsonl", "t.jsonl", "-o",
                                f"c{n}.jsonl", "--spark-conf", "spark.cores.max=1",
                                "--spark-conf", "spark.task.maxFailures=1"), says)
               for n, (python, says) in enumerate((
                   (str(bare), f"the executors' Python ({bare}) cannot import '"),
                   (str(tmp_path / "no-python"), "the executors cannot start Python '")))]
    for each, says in started:
        done = each.communicate(timeout=600)
        assert done.returncode == 2, done.stderr[-3000:]
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"neardup recluster: error: {says}"), last
        assert last.endswith("--spark-conf spark.pyspark.python=PATH (under spark-submit, "
                             "--conf)"), last
        assert "Traceback" not in done.stderr


def test_a_master_that_does_not_answer_is_one_line_after_spark_gives_up(nobody_answers):
    """A master URL that is well formed but where no master listens (a typo in the port, a
    master not started): Spark tries for a minute, stops the context and says why only in its
    log; the command ends with one line that says so, exit status 2."""
    url, started = nobody_answers
    done = started.communicate(timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"neardup recluster: error: cannot start Spark on {url}: "
                    "java.lang.IllegalStateException: Cannot call methods on a stopped "
                    "SparkContext. (Spark gave up on the master: is it running, and reachable "
                    "from here? Spark's log above says why)"), last
    assert "Traceback" not in done.stderr
