# Run at build time (cmake -P) by the ht_version_info target in src/core/CMakeLists.txt:
# writes OUT, the definitions of version() and git_commit() (src/core/version.hpp), and
# touches it only when they change, so an unchanged tree relinks nothing.
#   -DSOURCE_DIR=<repository> -DOUT=<file.cpp> -DVERSION=<x.y.z> [-DCOMMIT=<override>]
# The commit is `git rev-parse --short=12 HEAD`, with "-dirty" when tracked files differ
# from it; "unknown" outside a git checkout (a source tarball: pass -DHPCTRAIN_GIT_COMMIT).
if(NOT COMMIT)
  set(COMMIT unknown)
  find_program(GIT git)
  if(GIT)
    execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                    OUTPUT_VARIABLE head RESULT_VARIABLE rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND head)
      set(COMMIT ${head})
      execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
      if(rc EQUAL 0 AND changes)
        string(APPEND COMMIT -dirty)
      endif()
    endif()
  endif()
endif()
string(RANDOM LENGTH 8 tag)  # parallel builds may run this twice at once
file(CONFIGURE OUTPUT ${OUT}.${tag} @ONLY CONTENT [[
// Written by cmake/version_info.cmake at build time; do not edit.
#include "core/version.hpp"

namespace hpctrain {
const char* version() { return "@VERSION@"; }
const char* git_commit() { return "@COMMIT@"; }
}  // namespace hpctrain
]])
file(COPY_FILE ${OUT}.${tag} ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.${tag})
