"""examples/train_unet.py and examples/predict.py as users start them
(`mpiexec -n 2 python3 examples/train_unet.py ...`): a user error is reported
once per job, in one line `PROG: error: MESSAGE` from rank 0, and every rank
exits with status 2 promptly: no traceback, no MPI_ABORT, with a plain
launch and with `python -m mpi4py`. The arguments are checked before the
loader opens and before training: a crop the U-Net cannot halve, a
checkpoint folder that does not exist, an existing checkpoint without
--overwrite (the file kept as it was), --locality with the default
hold-out, a glob pattern the shell expanded (a hint to quote it); a
missing volume (slabfeed's agreed error at open) is one line too.
Checkpoints are written aside (no partial or temporary file after a
failed save). Rank 0 prints the time to the first batch. predict.py takes
a checkpoint trained on a glob pattern, says what to do with one that held
out whole volumes, and its --help shows one default per flag.

Not an MPI test itself: pytest runs once, outside any MPI job (ctest starts
it with --noconftest), and starts the jobs with mpiexec, each under a
timeout. Environment (python/CMakeLists.txt): SLABFEED_MPIEXEC,
SLABFEED_MPIEXEC_NPFLAG, SLABFEED_MPIEXEC_PREFLAGS, SLABFEED_TEST_DIR,
SLABFEED_SOURCE_DIR.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Sequence, Tuple

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
SOURCE = Path(os.environ.get("SLABFEED_SOURCE_DIR", HERE.parents[1]))
TRAIN = str(SOURCE / "examples" / "train_unet.py")
PREDICT = str(SOURCE / "examples" / "predict.py")
MPIEXEC = os.environ.get("SLABFEED_MPIEXEC", "mpiexec")
NPFLAG = os.environ.get("SLABFEED_MPIEXEC_NPFLAG", "-n")
PREFLAGS = os.environ.get("SLABFEED_MPIEXEC_PREFLAGS", "").split()
LIMIT = float(os.environ.get("SLABFEED_TEST_HANG", 120))  # a job running longer hangs


def _open_mpi() -> bool:
    try:
        v = subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True,
                           timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in v or "OpenRTE" in v


# Open MPI's mpiexec prints a banner of its own when a rank exits non-zero;
# -q silences it, so that what is left on stderr is the ranks' own output.
QUIET = ["-q"] if _open_mpi() else []


def _env() -> dict:
    """The environment for a fresh job: none of an enclosing job's."""
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"(OMPI_COMM_WORLD|OMPI_MCA_orte|PMIX_|PMI_)", k)}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
    return env


def job(np: int, argv: Sequence[str], cwd: str, **env: str) -> Tuple[int, str, str, float]:
    """(exit status, stdout, stderr, seconds) of an mpiexec job (`env`: more
    environment); fails the test when it runs longer than LIMIT (the whole
    job killed)."""
    cmd = [MPIEXEC, NPFLAG, str(np), *QUIET, *PREFLAGS, *argv]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**_env(), **env}, cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"hung: killed after {LIMIT} s: {' '.join(cmd)}\n{out}\n{err}")
    dt = time.time() - t0
    print(f"$ {' '.join(cmd)}\n  exit {p.returncode} after {dt:.1f} s")
    return p.returncode, out, err, dt


def expect_usage_error(res: Tuple[int, str, str, float], prog: str, *words: str) -> str:
    """Exit status 2, one line `PROG: error: ...` naming the problem (every
    word of `words` in it) and nothing else on stderr where mpiexec is
    quiet, no traceback, no MPI_Abort. Returns the message."""
    rc, out, err, dt = res
    both = out + err
    assert rc == 2, f"exit {rc}\n{both}"
    errors = [line for line in err.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(errors) == 1, both
    if QUIET:
        assert err.splitlines() == errors, both
    for w in words:
        assert w in errors[0], both
    assert "Traceback" not in both and "MPI_ABORT" not in both and "MPI_Abort" not in both
    assert "aborting the job" not in both
    return errors[0]


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="sfpy-exargs-", dir=os.environ.get("SLABFEED_TEST_DIR"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


GEN = ("import sys; from mpi4py import MPI; import slabfeed.tools as t; "
       "[t.generate(MPI.COMM_WORLD, p, shape=s, content='field', seed=i) for i, (p, s) in "
       "enumerate([(sys.argv[1], 32), (sys.argv[2], (24, 16, 16)), (sys.argv[3], (24, 16, 16)), "
       "(sys.argv[4], (24, 16, 16))])]")


@pytest.fixture(scope="module")
def volumes(workdir):
    """field32.h5 (32^3) and a suite of three 24x16x16 boxes suite/b0..2.h5."""
    os.makedirs(os.path.join(workdir, "suite"))
    paths = [os.path.join(workdir, "field32.h5")] + \
        [os.path.join(workdir, "suite", f"b{i}.h5") for i in range(3)]
    rc, out, err, _ = job(1, [sys.executable, "-c", GEN, *paths], workdir)
    assert rc == 0, out + err
    return paths


def train(volume: str, *more: str, launch: Sequence[str] = ()) -> List[str]:
    return [sys.executable, *launch, TRAIN, "--file", volume, "--crop", "8", "--batch", "2",
            "--base", "4", "--depth", "1", "--log-every", "1", "--norm-batches", "1",
            "--threads", "1", "--device", "cpu", "--backend", "gloo", *more]


def predict(ckpt: str, out: str, *more: str) -> List[str]:
    return [sys.executable, PREDICT, "--ckpt", ckpt, "--out", out, "--threads", "1",
            "--device", "cpu", *more]


def files(d: str) -> List[str]:
    return sorted(os.listdir(d))


# ---- train_unet.py: refused before the loader opens, once per job ---------------


@pytest.mark.parametrize("launch", [(), ("-m", "mpi4py")], ids=["plain", "mpi4py"])
def test_crop_not_divisible(volumes, workdir, launch):
    """--crop 30 with --depth 2: refused up front (it failed in the first
    forward pass, a traceback per rank and MPI_ABORT)."""
    res = job(2, train(volumes[0], "--crop", "30", "--depth", "2", "--steps", "2",
                       launch=launch), workdir)
    expect_usage_error(res, "train_unet.py", "--crop 30", "2**depth = 4", "--crop 28 or 32")
    assert "step" not in res[1] and "first batch" not in res[1], res[1]
    assert res[3] < 60, res


def test_ckpt_folder_missing(volumes, workdir):
    """--ckpt in a folder that does not exist: refused before training (it
    trained every step, then failed at the save and lost the run)."""
    missing = os.path.join(workdir, "no", "such", "dir")
    res = job(2, train(volumes[0], "--steps", "4", "--ckpt",
                       os.path.join(missing, "run.pt")), workdir)
    expect_usage_error(res, "train_unet.py", "--ckpt", "no such directory", missing)
    assert not re.search(r"^step ", res[1], re.M), res[1]
    assert not os.path.exists(os.path.join(workdir, "no"))


def test_ckpt_not_replaced_without_overwrite(volumes, workdir):
    """An existing checkpoint is refused unless --overwrite (the project's
    rule: slabfeed-gen, slabfeed-predict, slabfeed.Writer), before training,
    and left as it was; --overwrite replaces it, --resume of the same file
    goes on writing it; no temporary file is left beside it."""
    d = os.path.join(workdir, "ck-exists")
    os.makedirs(d)
    ck = os.path.join(d, "run.pt")
    Path(ck).write_bytes(b"not a checkpoint, but the user's file")
    res = job(2, train(volumes[0], "--steps", "2", "--ckpt", ck), workdir)
    expect_usage_error(res, "train_unet.py", f"--ckpt {ck} exists", "--overwrite")
    assert not re.search(r"^step ", res[1], re.M), res[1]
    assert Path(ck).read_bytes() == b"not a checkpoint, but the user's file"
    assert files(d) == ["run.pt"]
    rc, out, err, _ = job(2, train(volumes[0], "--steps", "2", "--ckpt", ck, "--overwrite"),
                          workdir)
    assert rc == 0 and f"checkpoint: step 2 written to {ck}" in out, out + err
    assert files(d) == ["run.pt"]
    rc, out, err, _ = job(2, train(volumes[0], "--steps", "3", "--ckpt", ck, "--resume", ck),
                          workdir)
    assert rc == 0 and f"checkpoint: step 3 written to {ck}" in out, out + err
    assert re.search(r"from step 2$", out, re.M), out
    assert files(d) == ["run.pt"]


def test_locality_with_default_holdout(volumes, workdir):
    """--locality with the default hold-out: says to pass --holdout-frac 0
    (the library's refusal did not), once."""
    res = job(2, train(volumes[0], "--steps", "2", "--locality"), workdir)
    expect_usage_error(res, "train_unet.py", "--locality", "--holdout-frac 0")
    rc, out, err, _ = job(2, train(volumes[0], "--steps", "2", "--locality",
                                   "--holdout-frac", "0"), workdir)
    assert rc == 0 and re.search(r"^step +2 ", out, re.M), out + err


@pytest.mark.parametrize("launch", [(), ("-m", "mpi4py")], ids=["plain", "mpi4py"])
def test_missing_volume(workdir, launch):
    """A volume that does not exist: the library's error, once (it was a
    FileIOError traceback on every rank and MPI_ABORT)."""
    gone = os.path.join(workdir, "nothere.h5")
    res = job(2, train(gone, "--steps", "2", launch=launch), workdir)
    expect_usage_error(res, "train_unet.py", gone)


def test_pattern_matching_nothing(workdir):
    pat = os.path.join(workdir, "nothing*.h5")
    res = job(2, train(pat, "--steps", "2"), workdir)
    expect_usage_error(res, "train_unet.py", f"pattern '{pat}' matches no file")


def test_argparse_errors_once(volumes, workdir):
    """argparse's own errors (an unknown flag, a bad value) once, not once
    per rank with the usage."""
    res = job(2, train(volumes[0], "--steps", "2", "--no-such-flag"), workdir)
    expect_usage_error(res, "train_unet.py", "unrecognized arguments: --no-such-flag")
    res = job(2, train(volumes[0], "--holdout", "1,2"), workdir)
    expect_usage_error(res, "train_unet.py", "--holdout", "'1,2'")


def test_shell_expanded_glob(volumes, workdir):
    """`--file suite/b*.h5` unquoted: the shell passes the files after the
    first as arguments; argparse's "unrecognized arguments" gets the C
    apps' hint (quote the pattern or repeat --file), once per job, exit 2,
    in train_unet.py and predict.py; an argument that is not a file gets
    no hint."""
    suite = volumes[1:]
    res = job(2, train(suite[0], "--steps", "2", *suite[1:]), workdir)
    msg = expect_usage_error(res, "train_unet.py",
                             f"unrecognized arguments: {suite[1]} {suite[2]}",
                             "glob pattern the shell expanded", "quote it",
                             "--file 'dir/*.h5'", "repeat --file")
    assert not re.search(r"^step ", res[1], re.M), res[1]
    res = job(2, predict(os.path.join(workdir, "no.pt"), os.path.join(workdir, "g.h5"),
                         "--file", *suite), workdir)
    assert expect_usage_error(res, "predict.py", "unrecognized arguments:",
                              "repeat --file") == msg.replace("train_unet.py", "predict.py")
    res = job(2, train(suite[0], "--steps", "2", "no-such-file.h5"), workdir)
    msg = expect_usage_error(res, "train_unet.py", "unrecognized arguments: no-such-file.h5")
    assert "glob" not in msg and "repeat --file" not in msg, msg


def test_pair_without_scale_factor(workdir):
    """A super-resolution pair (slabfeed-gen --scale-factor 2) trained
    without --scale-factor: the library's refusal at open, once, naming the
    flag to pass."""
    apps = Path(os.environ.get("SLABFEED_APPS_TEST_DIR", SOURCE / "build" / "tests"))
    gen = apps.parent / "apps" / "slabfeed-gen"
    if not gen.exists():
        pytest.skip(f"SKIP: no {gen}")
    pair = os.path.join(workdir, "pair.h5")
    rc, out, err, _ = job(1, [str(gen), "--file", pair, "--shape", "16", "--content", "field",
                              "--scale-factor", "2", "--quiet"], workdir)
    assert rc == 0, out + err
    res = job(2, train(pair, "--steps", "2"), workdir)
    expect_usage_error(res, "train_unet.py", "--scale-factor 2")


def test_help_once(workdir):
    rc, out, err, _ = job(2, [sys.executable, TRAIN, "--help"], workdir)
    assert rc == 0 and out.count("usage: train_unet.py") == 1, out + err
    assert "--overwrite" in out


# ---- checkpoints written aside; the time to the first batch ----------------------


def test_failed_save_leaves_no_partial_file(volumes, workdir):
    """A save that fails half-way on rank 0 (injected after torch.save wrote
    the temporary file: SLABFEED_TEST_FAIL=example.save@0) while rank 1
    waits: the job ends promptly (an internal failure: MPI_Abort), the
    previous checkpoint is as it was and no temporary file is left."""
    d = os.path.join(workdir, "ck-fails")
    os.makedirs(d)
    ck = os.path.join(d, "run.pt")
    Path(ck).write_bytes(b"the previous checkpoint")
    rc, out, err, dt = job(2, train(volumes[0], "--steps", "4", "--every", "2", "--ckpt", ck,
                                    "--overwrite"), workdir,
                           SLABFEED_TEST_FAIL="example.save@0")
    assert rc != 0 and "injected failure writing" in err, out + err
    assert re.search(r"^step +2 ", out, re.M) and not re.search(r"^step +3 ", out, re.M), out
    assert files(d) == ["run.pt"] and Path(ck).read_bytes() == b"the previous checkpoint"
    assert dt < 60, dt


def test_first_batch_time(volumes, workdir):
    """Rank 0 prints one line `first batch after T s (open O s)`, from the
    process's start (so T > O > 0), before the first training step."""
    rc, out, err, dt = job(2, train(volumes[0], "--steps", "2"), workdir)
    assert rc == 0, out + err
    lines = re.findall(r"^first batch after (\d+\.\d\d) s \(open (\d+\.\d\d) s\)$", out, re.M)
    assert len(lines) == 1, out
    first, opened = map(float, lines[0])
    assert 0 <= opened < first < dt, (first, opened, dt)
    assert out.index("first batch after") < re.search(r"^step +1 ", out, re.M).start()


# ---- predict.py ------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(volumes, workdir):
    """A run trained on a pattern of one volume (its band held out), and one
    trained on the suite's pattern with volume 2 held out."""
    one = os.path.join(workdir, "glob-one.pt")
    suite = os.path.join(workdir, "suite.pt")
    pat_one = os.path.join(workdir, "field3*.h5")
    pat_suite = os.path.join(workdir, "suite", "b*.h5")
    for ck, args in ((one, train(pat_one, "--steps", "2", "--ckpt", one)),
                     (suite, train(pat_suite, "--steps", "2", "--holdout-volumes", "2",
                                   "--ckpt", suite))):
        rc, out, err, _ = job(2, args, workdir)
        assert rc == 0 and os.path.exists(ck), out + err
    return one, suite


def test_predict_glob_checkpoint(checkpoints, workdir):
    """A checkpoint trained on `--file 'dir/field3*.h5'`: predict.py expands
    the pattern as the loader does (it passed it to describe() as a file
    name: a FileIOError traceback on every rank) and writes the band."""
    out = os.path.join(workdir, "glob-band.h5")
    rc, o, e, _ = job(2, predict(checkpoints[0], out), workdir)
    assert rc == 0, o + e
    assert re.search(r"^predict: wrote prediction \(5, 4, 32, 32\) to ", o, re.M), o
    assert re.search(r"^  4:temperature +\S+ +\S+$", o, re.M), o


def test_predict_held_out_volumes(checkpoints, volumes, workdir):
    """A checkpoint that held out whole volumes: with --file of one volume
    and the default --region band, the message is about the held-out
    volumes (not "trained with --holdout-frac 0", as a ValueError traceback);
    without --file it says to pass one; --region whole predicts the volume."""
    out = os.path.join(workdir, "held.h5")
    held = volumes[3]
    res = job(2, predict(checkpoints[1], out, "--file", held), workdir)
    msg = expect_usage_error(res, "predict.py", "held out whole volumes", f"2 '{held}'",
                             "--region whole")
    assert "--holdout-frac" not in msg
    res = job(2, predict(checkpoints[1], out), workdir)
    expect_usage_error(res, "predict.py", "suite of 3 volumes", "--file", held)
    assert not os.path.exists(out)
    rc, o, e, _ = job(2, predict(checkpoints[1], out, "--file", held, "--region", "whole",
                                 "--tile", "4", "--pad", "2"), workdir)
    assert rc == 0 and "predict: wrote prediction (5, 24, 16, 16)" in o, o + e


def test_predict_out_exists(checkpoints, workdir):
    out = os.path.join(workdir, "exists.h5")
    Path(out).write_bytes(b"keep me")
    res = job(2, predict(checkpoints[0], out), workdir)
    expect_usage_error(res, "predict.py", f"--out {out} exists", "--overwrite")
    assert Path(out).read_bytes() == b"keep me"
    res = job(2, predict(os.path.join(workdir, "no.pt"), out), workdir)
    expect_usage_error(res, "predict.py", "no such file")


def test_predict_help_one_default_per_flag(workdir):
    """predict.py --help: one "(default: ...)" per option at most (--file
    showed its own and argparse's "(default: None)")."""
    rc, out, err, _ = job(1, [sys.executable, PREDICT, "--help"], workdir)
    assert rc == 0, out + err
    text = out[out.index("options:"):]
    entries = re.split(r"\n  (?=-)", text)
    assert len(entries) > 15, text
    for entry in entries:
        assert entry.count("default:") <= 1, entry
        assert "(default: None)" not in entry and "(default: False)" not in entry, entry
