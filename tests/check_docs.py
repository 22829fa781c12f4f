"""docs.names: every path, app and flag the documentation names exists.

Usage: check_docs.py SRC_DIR BUILD_DIR [FILE.md...]

Reads README.md and docs/*.md (or the FILEs given) and checks, reporting each miss with its
file and line:
  - paths of the source tree (src/, apps/, tests/, examples/, jobs/,
    tools/, bench/, docs/, include/, python/, cmake/, .ci/): the file or
    folder exists (a glob pattern matches at least one; placeholders such
    as <name> or {} are not checked);
  - apps (slabfeed-gen, ...): an app of the build;
  - flags on a command line of a code block or an inline code span
    (`slabfeed-gen --file x.h5 ...`, `examples/train_unet.py --crop 32`,
    `-m slabfeed.pictures slice ...`): each --flag appears in that
    command's --help;
  - a Python command of a code block or an inline code span (`python3
    -m ...`, `mpirun -n 2 python3 examples/...`) names the interpreter the
    package was built for, `$SF_PY` (set by `. jobs/env.sh`), not a bare
    `python3`: one first on PATH (pyenv, conda) may not see the package
    or apt's numpy, mpi4py and torch.
The apps and examples run with --help only (no MPI job, no data)."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

ROOTS = ("src", "apps", "tests", "examples", "jobs", "tools", "bench", "docs",
         "include", "python", "cmake", ".ci")
PATH_RE = re.compile(r"(?<![\w./$-])((?:%s)/[\w./*-]*)" %
                     "|".join(re.escape(r) for r in ROOTS))
APP_RE = re.compile(r"(?<![\w./-])(slabfeed-[a-z]+)\b")
FLAG_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
# What names a command whose flags are checked, and how to get its help.
CMD_RE = re.compile(r"(slabfeed-[a-z]+|examples/[a-z_]+\.py|"
                    r"-m slabfeed\.pictures(?: (?:slice|crops))?)")
# Not apps: names that only look like one.
NOT_APPS = {"slabfeed-partial"}
# A command that runs a bare python3: at the start of the line, or after a
# launcher (srun, mpirun, mpiexec, sfrun) and its options; environment
# assignments may come first.
BARE_PY_RE = re.compile(r"^(?:\w+=\S*\s+)*(?:(?:srun|mpirun|mpiexec(?:\.\w+)?|sfrun)"
                        r"\s[^;|&#`]*?)?(?<![\w/.$-])python3\s")
# Documents whose bare python3 commands are not checked (none).
BARE_PY_ALLOWED: set = set()


def lines_of(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def code_lines(lines):
    """(line number, text) of the command lines of code blocks (fenced, or
    indented by 4 spaces after a blank line), continuations joined, and of
    inline code spans elsewhere (one that goes on to the next line: the
    number of the line where it ends)."""
    out = []
    fenced = False
    pending, start = "", 0
    prev_blank = True
    last = -1  # the last line of a code block (an indented block goes on)
    carry = ""  # an inline span that goes on to the next line
    for n, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        block = fenced or (line.startswith("    ") and (prev_blank or pending
                                                       or last == n - 1))
        prev_blank = line.strip() == ""
        if block:
            last = n
            text = line.strip()
            if not pending:
                start = n
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            out.append((start, pending + text))
            pending = ""
            carry = ""
        else:
            # A span may go on past the line's end (an odd backtick):
            # joined with the next line, up to a blank line.
            text = carry + line if line.strip() else ""
            carry = ""
            if text.count("`") % 2:
                cut = text.rindex("`")
                text, carry = text[:cut], text[cut:] + " "
            for span in re.findall(r"`([^`]+)`", text):
                out.append((n, span))
    return out


class Helps:
    def __init__(self, src, build):
        self.src, self.build, self.cache = src, build, {}
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(build, "python") + (
            ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        self.env = env
        self.py = sys.executable  # the interpreter the package is built for

    def apps(self):
        d = os.path.join(self.build, "apps")
        return {f for f in os.listdir(d) if f.startswith("slabfeed-")}

    def text(self, cmd):
        if cmd in self.cache:
            return self.cache[cmd]
        if cmd.startswith("slabfeed-"):
            argv = [os.path.join(self.build, "apps", cmd), "--help"]
        elif cmd.startswith("examples/"):
            argv = [self.py, os.path.join(self.src, cmd), "--help"]
        else:
            argv = [self.py] + cmd.split() + ["--help"]
        try:
            r = subprocess.run(argv, capture_output=True, text=True,
                               env=self.env, timeout=120)
            t = r.stdout + r.stderr if r.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            t = None
        self.cache[cmd] = t
        return t


def check_file(path, src, helps, apps, bad):
    rel = os.path.relpath(path, src)
    lines = lines_of(path)
    for n, line in enumerate(lines, 1):
        for m in PATH_RE.finditer(line):
            p = m.group(1).rstrip(".,:;)")
            after = line[m.end():m.end() + 1]
            if (not p or after in ("{", "<", "$") or
                    re.search(r"\.\.\.|XX", p) or p.endswith("/.")):
                continue
            full = os.path.join(src, p)
            # A program or module is named by its source without the
            # extension (bench/soak: bench/soak.c).
            ok = glob.glob(full) if "*" in p else (
                os.path.exists(full) or
                any(os.path.exists(full + x) for x in (".c", ".cu", ".py",
                                                       ".sh", ".h")))
            if not ok:
                bad.append(f"{rel}:{n}: names '{p}', which does not exist")
        for m in APP_RE.finditer(line):
            a = m.group(1)
            if a not in apps and a not in NOT_APPS:
                bad.append(f"{rel}:{n}: names the app '{a}', which the "
                           f"build does not make")
    for n, text in code_lines(lines):
        if rel not in BARE_PY_ALLOWED and BARE_PY_RE.search(text):
            bad.append(f"{rel}:{n}: a command with a bare 'python3' (write "
                       f"$SF_PY, the interpreter the package was built for: "
                       f". jobs/env.sh sets it)")
        # Each command's flags: those after it, up to the next command.
        cmds = list(CMD_RE.finditer(text))
        for i, m in enumerate(cmds):
            cmd = m.group(1)
            if cmd.startswith("slabfeed-") and cmd not in apps:
                continue
            end = cmds[i + 1].start() if i + 1 < len(cmds) else len(text)
            flags = FLAG_RE.findall(text[m.end():end].split("|")[0])
            if not flags:
                continue
            help_text = helps.text(cmd)
            if help_text is None:
                bad.append(f"{rel}:{n}: '{cmd} --help' failed")
                continue
            for f in flags:
                if not re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])",
                                 help_text):
                    bad.append(f"{rel}:{n}: '{cmd}' has no flag '{f}' (its "
                               f"--help does not list it)")


def main():
    src, build = sys.argv[1], sys.argv[2]
    helps = Helps(src, build)
    apps = helps.apps()
    files = sys.argv[3:] or [os.path.join(src, "README.md")] + sorted(
        glob.glob(os.path.join(src, "docs", "*.md")))
    bad = []
    for f in files:
        check_file(f, src, helps, apps, bad)
    for b in bad:
        print("docs.names: " + b)
    print(f"docs.names: {len(files)} files, {len(helps.cache)} commands' "
          f"--help read, {len(bad)} problems")
    print("docs.names: " + ("FAIL" if bad else "PASS"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
