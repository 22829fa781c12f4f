# slabfeed_write_pc(<output>): slabfeed.pc from what CMake found — MPI's
# flags and libraries as FindMPI reports them (MPI implementations name
# their .pc files differently, Cray's and Intel's often ship none), and for
# `pkg-config --static` every library the static archive needs.
# The prefix is relative to the .pc file, so `cmake --install --prefix` works.

# _sf_pc_link(<out> <item>...): link items (paths, -flags, bare names,
# imported targets, $<LINK_ONLY:...>) as flags; targets are resolved.
function(_sf_pc_link out)
  set(flags "")
  set(skip OFF)
  foreach(item IN LISTS ARGN)
    if(skip OR item STREQUAL "")
      set(skip OFF)
      continue()
    endif()
    if(item STREQUAL "debug")            # keyword lists: keep the optimized one
      set(skip ON)
      continue()
    elseif(item STREQUAL "optimized" OR item STREQUAL "general")
      continue()
    endif()
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    elseif(item MATCHES "^\\$<")
      continue()                       # other generator expressions: build-only
    endif()
    if(TARGET "${item}")
      get_target_property(type "${item}" TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(loc "${item}" LOCATION)
        if(loc)
          _sf_pc_link(f "${loc}")
          list(APPEND flags ${f})
        endif()
      endif()
      get_target_property(deps "${item}" INTERFACE_LINK_LIBRARIES)
      if(deps)
        _sf_pc_link(f ${deps})
        list(APPEND flags ${f})
      endif()
    elseif(IS_ABSOLUTE "${item}")
      get_filename_component(dir "${item}" DIRECTORY)
      get_filename_component(name "${item}" NAME)
      if(name MATCHES "^lib(.+)\\.(so|a|dylib)$")
        if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
          list(APPEND flags "-L${dir}")
        endif()
        list(APPEND flags "-l${CMAKE_MATCH_1}")
      else()
        list(APPEND flags "${item}")
      endif()
    elseif(item MATCHES "^-")
      list(APPEND flags "${item}")
    else()
      list(APPEND flags "-l${item}")
    endif()
  endforeach()
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

# Joins flags; a repeated -l/-L/-I/-D keeps its last place (a static link
# needs a library after its users). Other flags stay as they are: they may
# be pairs such as -Xlinker -rpath -Xlinker DIR.
function(_sf_pc_join out)
  set(l ${ARGN})
  list(REVERSE l)
  set(kept "")
  foreach(f IN LISTS l)
    if(NOT f MATCHES "^-[lLID]" OR NOT f IN_LIST kept)
      list(APPEND kept "${f}")
    endif()
  endforeach()
  list(REVERSE kept)
  list(JOIN kept " " s)
  set(${out} "${s}" PARENT_SCOPE)
endfunction()

function(slabfeed_write_pc output)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(SF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    set(SF_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
    set(SF_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
  else()
    file(RELATIVE_PATH up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
    string(REGEX REPLACE "/$" "" up "${up}")
    set(SF_PC_PREFIX "\${pcfiledir}/${up}")
    set(SF_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
    set(SF_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()

  # Cflags: slabfeed.h includes mpi.h.
  set(cflags "-I\${includedir}")
  foreach(d IN LISTS MPI_C_INCLUDE_DIRS)
    if(NOT d IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES)
      list(APPEND cflags "-I${d}")
    endif()
  endforeach()
  foreach(d IN LISTS MPI_C_COMPILE_DEFINITIONS)
    list(APPEND cflags "-D${d}")
  endforeach()
  list(APPEND cflags ${MPI_C_COMPILE_OPTIONS})
  _sf_pc_join(SF_PC_CFLAGS ${cflags})

  # Libs: the API takes MPI communicators, so MPI is public.
  separate_arguments(mpi_link_flags UNIX_COMMAND "${MPI_C_LINK_FLAGS}")
  _sf_pc_link(libs ${mpi_link_flags} ${MPI_C_LIBRARIES})
  _sf_pc_join(SF_PC_LIBS "-L\${libdir}" -lslabfeed ${libs})

  # Libs.private: what libslabfeed.a needs besides MPI. HDF5 with its own
  # dependencies as found; the shared CUDA runtime; the host C++ runtime of
  # the .cu objects (the CUDA link's implicit libraries a C link lacks).
  set(private ${HDF5_C_LIBRARIES})
  if(SLABFEED_HAVE_CUDA)
    list(APPEND private CUDA::cudart ${SLABFEED_CUDA_HOST_LIBS})
  endif()
  list(APPEND private m ${CMAKE_THREAD_LIBS_INIT})
  _sf_pc_link(priv ${private})
  _sf_pc_join(SF_PC_LIBS_PRIVATE ${priv})

  configure_file(${PROJECT_SOURCE_DIR}/cmake/slabfeed.pc.in ${output} @ONLY)
endfunction()
