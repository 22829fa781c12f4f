"""An exception or a signal on one rank ends the job within seconds, with
loaders open (issue "Nothing lost, nothing hangs").

Not an MPI test itself: pytest runs once, outside any MPI job (ctest starts
it with --noconftest), and starts jobs of abort_worker.py (and of
examples/train_unet.py) with mpiexec, each under a timeout:
`python -m mpi4py` jobs of 2 and 3 ranks in which one rank fails at step 3
while the others wait in an allreduce, with the loader held in each way
(never closed, `with`, `finally: close()`, TorchLoader), by an exception,
sys.exit(3) or SIGINT. Before the fix, the failing rank's at-exit hook (or
its `finally`) entered the collective slabfeed_close and the job never
ended. The normal path is checked too: with no failure every loader is
closed collectively and the job exits 0.

Environment (from python/CMakeLists.txt): SLABFEED_MPIEXEC,
SLABFEED_MPIEXEC_NPFLAG, SLABFEED_MPIEXEC_PREFLAGS (space-separated),
SLABFEED_TEST_DIR, SLABFEED_SOURCE_DIR.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
WORKER = HERE / "abort_worker.py"
SOURCE = Path(os.environ.get("SLABFEED_SOURCE_DIR", HERE.parents[1]))
MPIEXEC = os.environ.get("SLABFEED_MPIEXEC", "mpiexec")
NPFLAG = os.environ.get("SLABFEED_MPIEXEC_NPFLAG", "-n")
PREFLAGS = os.environ.get("SLABFEED_MPIEXEC_PREFLAGS", "").split()
HANG = float(os.environ.get("SLABFEED_TEST_HANG", 90))  # a job running longer hangs
PROMPT = 20.0  # seconds from the failure to the end of the job, at most


def _env() -> dict:
    """The environment for a fresh job: none of an enclosing job's."""
    return {k: v for k, v in os.environ.items()
            if not re.match(r"(OMPI_COMM_WORLD|OMPI_MCA_orte|PMIX_|PMI_)", k)}


class Job:
    """A job started with mpiexec in its own session (so that a hung job is
    killed whole), its output collected as it comes."""

    def __init__(self, np: int, argv: List[str],
                 env: Optional[dict] = None) -> None:
        self.cmd = [MPIEXEC, NPFLAG, str(np), *PREFLAGS, *argv]
        self.t0 = time.time()
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,
                                  env={**_env(), **(env or {})},
                                  start_new_session=True, text=True)
        self.lines: List[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> Optional[re.Match]:
        end = time.time() + timeout
        while time.time() < end and self.p.poll() is None:
            m = re.search(pattern, self.out)
            if m:
                return m
            time.sleep(0.05)
        return re.search(pattern, self.out)

    def finish(self) -> Tuple[int, float]:
        """(exit status, end time); fails the test when the job hangs."""
        try:
            rc = self.p.wait(timeout=max(1.0, self.t0 + HANG - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            self.reader.join(5)
            pytest.fail(f"hung: killed after {HANG} s: {' '.join(self.cmd)}\n{self.out}")
        end = time.time()
        self.reader.join(5)
        print(f"$ {' '.join(self.cmd)}\n  exit {rc} after {end - self.t0:.1f} s")
        return rc, end


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="sfpy-abort-", dir=os.environ.get("SLABFEED_TEST_DIR"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def volume(workdir):
    path = os.path.join(workdir, "index24.h5")
    rc, _ = Job(1, [sys.executable, "-m", "mpi4py", str(WORKER), path, "gen", "-1"]).finish()
    assert rc == 0 and os.path.exists(path)
    return path


def _failed_at(job: Job, rank: int) -> float:
    m = re.search(rf"FAILING rank {rank} at ([0-9.]+)", job.out)
    assert m, f"the failing rank did not report:\n{job.out}"
    return float(m.group(1))


@pytest.mark.parametrize("np,mode,rank", [
    (2, "atexit", 1), (2, "with", 1), (2, "finally", 1), (2, "torch", 1),
    (2, "sysexit", 1), (3, "atexit", 1), (3, "with", 2), (3, "finally", 0),
    (3, "torch", 2),
])
def test_failure_on_one_rank_ends_the_job(volume, np, mode, rank):
    if mode == "torch":
        pytest.importorskip("torch")
    job = Job(np, [sys.executable, "-m", "mpi4py", str(WORKER), volume, mode, str(rank)])
    rc, end = job.finish()
    t = _failed_at(job, rank)
    assert rc != 0, job.out
    if mode != "sysexit":
        assert f"injected failure on rank {rank} at step 3" in job.out, job.out
    print(f"  {np} ranks, {mode}, rank {rank}: the job ended {end - t:.1f} s after the failure")
    assert end - t < PROMPT, job.out
    assert "done on" not in job.out


def test_sigint_on_one_rank_ends_the_job(volume, workdir):
    ready = os.path.join(workdir, "sigint.pid")
    job = Job(2, [sys.executable, "-m", "mpi4py", str(WORKER), volume, "sigint", "1", ready])
    end = time.time() + HANG / 2
    while not os.path.exists(ready) and time.time() < end and job.p.poll() is None:
        time.sleep(0.05)
    assert os.path.exists(ready), f"rank 1 did not get ready:\n{job.out}"
    pid = int(Path(ready).read_text())
    t = time.time()
    os.kill(pid, signal.SIGINT)  # rank 1 only: rank 0 waits in its allreduce
    rc, done = job.finish()
    print(f"  SIGINT to rank 1 (pid {pid}): the job ended {done - t:.1f} s later")
    assert rc != 0 and "KeyboardInterrupt" in job.out, job.out
    assert done - t < PROMPT, job.out


@pytest.mark.parametrize("np,mode", [(2, "atexit"), (2, "with"), (3, "finally")])
def test_normal_path_closes_collectively(volume, np, mode):
    job = Job(np, [sys.executable, "-m", "mpi4py", str(WORKER), volume, mode, "-1"])
    rc, _ = job.finish()
    assert rc == 0 and f"abort_worker: {mode}: done on {np} ranks" in job.out, job.out


# ---- examples/train_unet.py ------------------------------------------------------


@pytest.fixture(scope="module")
def field_volume(workdir):
    pytest.importorskip("torch")
    path = os.path.join(workdir, "field32.h5")
    code = ("import sys; from mpi4py import MPI; import slabfeed.tools; "
            "slabfeed.tools.generate(MPI.COMM_WORLD, sys.argv[1], shape=32, "
            "content='field', seed=1, overwrite=True)")
    rc, _ = Job(1, [sys.executable, "-c", code, path]).finish()
    assert rc == 0
    return path


def _example(volume: str, *more: str, launch: Tuple[str, ...] = ("-m", "mpi4py")) -> List[str]:
    return [sys.executable, *launch, str(SOURCE / "examples" / "train_unet.py"),
            "--file", volume, "--crop", "16", "--batch", "2", "--base", "8",
            "--depth", "1", "--log-every", "1", "--norm-batches", "2",
            "--threads", "1", "--device", "cpu", "--backend", "gloo", *more]


@pytest.mark.parametrize("launch", [("-m", "mpi4py"), ()], ids=["mpi4py", "plain"])
def test_example_failure_on_rank0_ends_the_job(field_volume, launch):
    """Rank 0 fails writing its checkpoint (an injected write error; a
    missing folder is refused before training) while rank 1 waits in the
    checkpoint's barrier: the job ends, with the documented launch and
    with a plain `python3 examples/train_unet.py` (srun's)."""
    ckpt = os.path.join(os.path.dirname(os.path.abspath(field_volume)),
                        f"abort_{'_'.join(launch) or 'plain'}.pt")
    job = Job(2, _example(field_volume, "--steps", "6", "--every", "2",
                          "--ckpt", ckpt, "--overwrite", launch=launch),
              env={"SLABFEED_TEST_FAIL": "example.save@0"})
    # rank 0 prints step 2, then fails to write the checkpoint
    assert job.wait_for(r"step +2 ", HANG / 2), f"no training step:\n{job.out}"
    t = time.time()
    rc, end = job.finish()
    assert rc != 0 and "injected failure writing" in job.out, job.out
    print(f"  example ({' '.join(launch) or 'plain'}): the job ended {end - t:.1f} s "
          f"after step 2 ({end - job.t0:.1f} s after the start)")
    assert end - t < PROMPT, job.out


def _rank_pid(root: int, rank: int) -> Optional[int]:
    """The pid of MPI rank `rank` among the descendants of `root` (from the
    launcher's variables in /proc/PID/environ)."""
    kids = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    todo, seen = [root], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += kids.get(p, [])
    for p in seen[1:]:
        try:
            env = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if b"train_unet.py" not in cmd:
            continue
        for name in (b"OMPI_COMM_WORLD_RANK", b"PMIX_RANK", b"PMI_RANK"):
            if name + b"=" + str(rank).encode() in env:
                return p
    return None


def test_example_sigint_on_one_rank_ends_the_job(field_volume):
    job = Job(2, _example(field_volume, "--steps", "100000"))
    assert job.wait_for(r"step +2 ", HANG / 2), f"no training step:\n{job.out}"
    pid = _rank_pid(job.p.pid, 1)
    if pid is None:
        os.killpg(job.p.pid, signal.SIGKILL)
        job.p.wait()
        pytest.skip("cannot find the process of rank 1")
    t = time.time()
    os.kill(pid, signal.SIGINT)
    rc, done = job.finish()
    print(f"  example, SIGINT to rank 1 (pid {pid}): the job ended {done - t:.1f} s later")
    assert rc != 0 and "KeyboardInterrupt" in job.out, job.out
    assert done - t < PROMPT, job.out
