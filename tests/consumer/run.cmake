# cmake -DSRC=... -DBIN=... -DLIBDIR=lib -DC_COMPILER=... -DVERSION=...
#       -DPKG_CONFIG=... [-DMPIEXEC="mpiexec -n 1 ..."] -P run.cmake
# Installs slabfeed into a temporary prefix and builds tests/consumer/main.c
# against it four ways, with the plain C compiler (not an MPI wrapper):
# find_package with the shared and with the static target, pkg-config
# --libs, and pkg-config --static against a static-only copy of the prefix.
# Each consumer runs once (under MPIEXEC when given) and must print VERSION.
separate_arguments(MPIEXEC UNIX_COMMAND "${MPIEXEC}")
set(prefix ${BIN}/consumer-prefix)
set(static_prefix ${BIN}/consumer-prefix-static)
set(work ${BIN}/consumer-build)
file(REMOVE_RECURSE ${prefix} ${static_prefix} ${work})
file(MAKE_DIRECTORY ${work})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "install: ${what} failed (${rc}):\n${ARGN}\n${out}${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(run_consumer what exe)
  run("${what}: run" ${MPIEXEC} ${exe})
  string(STRIP "${out}" out)
  message("${what}: ${out}")
  if(NOT out MATCHES "consumer: slabfeed ${VERSION} found and linked")
    message(FATAL_ERROR "install: ${what}: consumer printed no version ${VERSION}")
  endif()
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BIN} --prefix ${prefix})

# (a, b) find_package: shared and static targets, one project.
run("consumer configure" ${CMAKE_COMMAND} -S ${SRC}/tests/consumer -B ${work}/cmake
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER})
run("consumer build" ${CMAKE_COMMAND} --build ${work}/cmake)
run_consumer("find_package, slabfeed::slabfeed" ${work}/cmake/consumer)
run_consumer("find_package, slabfeed::slabfeed_static" ${work}/cmake/consumer_static)

# (c) pkg-config. The test adds an rpath for each -L directory so that the
# programs run wherever the libraries are; pkg-config itself gives none.
if(NOT PKG_CONFIG)
  # CI installs pkg-config (tools/install-deps); a machine without it
  # still checks the CMake consumers.
  message("install: SKIP: pkg-config not found: the pkg-config consumers were not built")
  return()
endif()
function(pc_build what pc_path exe)
  set(ENV{PKG_CONFIG_PATH} ${pc_path})
  run("${what}" ${PKG_CONFIG} --cflags --libs ${ARGN} slabfeed)
  separate_arguments(flags UNIX_COMMAND "${out}")
  set(rpath "")
  foreach(f IN LISTS flags)
    if(f MATCHES "^-L(.+)")
      list(APPEND rpath "-Wl,-rpath,${CMAKE_MATCH_1}")
    endif()
  endforeach()
  # --static: every object of the archive, as for the static target above.
  set(whole "")
  if(ARGN STREQUAL "--static")
    set(whole -Wl,--whole-archive ${pc_path}/../libslabfeed.a -Wl,--no-whole-archive)
  endif()
  string(STRIP "${out}" out)
  message("${what}: ${out}")
  run("${what}: compile and link" ${C_COMPILER} ${SRC}/tests/consumer/main.c
      -o ${exe} ${whole} ${flags} ${rpath})
  run_consumer("${what}" ${exe})
endfunction()
pc_build("pkg-config" ${prefix}/${LIBDIR}/pkgconfig ${work}/consumer_pc)

# A prefix with the static library only: -lslabfeed then means libslabfeed.a.
file(COPY ${prefix}/ DESTINATION ${static_prefix})
file(GLOB shared ${static_prefix}/${LIBDIR}/libslabfeed.so*)
file(REMOVE ${shared})
pc_build("pkg-config --static" ${static_prefix}/${LIBDIR}/pkgconfig ${work}/consumer_pc_static --static)

message("install: 4 consumers built and run (find_package shared, static; pkg-config, --static)")
