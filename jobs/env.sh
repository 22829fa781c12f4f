# shellcheck shell=bash
# Sourced in your own shell after jobs/local.sh (or tools/build) has built
# slabfeed, so that the README's commands run as written:
#   . jobs/env.sh
# sets, for the build of SLABFEED_MPI (build/ by default, as tools/build):
#   PATH        the apps (slabfeed-gen, slabfeed-info, ...) first
#   PYTHONPATH  the Python package built there
#   SF_PY       the interpreter the package was built for (CMake's; a
#               `python3` first on PATH, e.g. pyenv or conda, may be
#               another one without apt's numpy, mpi4py and torch)
#   SF_SRC      the source tree (examples/ lives there)
#   sfrun       a function: the launcher of that build's MPI with its flags
#               (--oversubscribe under Open MPI), e.g. `sfrun -n 2 slabfeed-gen ...`
# and, as root, Open MPI's OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1. Nothing is
# installed or built; it says so when the build is missing.

SF_SRC=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
. "$SF_SRC/jobs/mpi.sh"
SF_BUILD=$(sf_build_dir)
case $SF_BUILD in /*) ;; *) SF_BUILD=$SF_SRC/$SF_BUILD ;; esac
if [ ! -x "$SF_BUILD/apps/slabfeed-gen" ]; then
  echo "jobs/env.sh: no build in $SF_BUILD: run jobs/local.sh (or tools/build) first" >&2
  return 1 2>/dev/null || exit 1
fi
sf_launcher "$SF_BUILD"
SF_PY=$(sed -n 's/^_Python3_EXECUTABLE:INTERNAL=//p' "$SF_BUILD/CMakeCache.txt")
SF_PY=${SF_PY:-/usr/bin/python3}
case ":$PATH:" in *":$SF_BUILD/apps:"*) ;; *) PATH=$SF_BUILD/apps:$PATH ;; esac
case ":${PYTHONPATH:-}:" in
  *":$SF_BUILD/python:"*) ;;
  *) PYTHONPATH=$SF_BUILD/python${PYTHONPATH:+:$PYTHONPATH} ;;
esac
export PATH PYTHONPATH SF_PY SF_SRC SF_BUILD
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
sfrun() { "${SF_MPIRUN[@]}" "$@"; }
echo "jobs/env.sh: apps from $SF_BUILD/apps, Python $SF_PY, ranks started by 'sfrun' (${SF_MPIRUN[*]})"
