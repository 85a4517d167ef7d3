# What `cmake --install` puts under the prefix, and the same share/ tree in the build folder,
# so that the programs find their files the same way in both (relative to their own path,
# never through a build path: an installed prefix may be moved):
#   bin/hpctrain, bin/hpctrain-data
#   lib/hpctrain/libhpctrain_cuda.so       the CUDA backend, loaded when a rank uses a GPU
#   share/hpctrain/python/hpctrain_tools/  hpctrain study | plot | scaling
#   share/hpctrain/configs/                example configs (hpctrain init copies from here)
#   share/hpctrain/jobs/                   Slurm and mpiexec job scripts
#   share/doc/hpctrain/                    README.md, LICENSE and docs/
#   modulefiles/hpctrain/<version>         environment module (Tcl; Lmod reads it too)
# The layout is fixed (not GNUInstallDirs' variables): the programs look for
# share/hpctrain and lib/hpctrain in the folder above bin/.

# `make install` and `make package` (CPack's "preinstall") do not build first: build, then
# install or package. So packaging in a test never relinks the programs other tests run.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

file(GLOB HT_PYTHON_TOOLS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/data-tools/python/hpctrain_tools/*.py)
file(GLOB HT_CONFIGS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/configs/*.yaml)
file(GLOB HT_JOBS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/jobs/*)
file(GLOB HT_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)

# The build folder's share/ (copied at configure time; CONFIGURE_DEPENDS re-runs CMake when
# a file is added, configure_file when one changes; the copies keep their permissions).
foreach(group python/hpctrain_tools:HT_PYTHON_TOOLS configs:HT_CONFIGS jobs:HT_JOBS)
  string(REPLACE ":" ";" pair ${group})
  list(GET pair 0 dir)
  list(GET pair 1 var)
  foreach(file ${${var}})
    get_filename_component(name ${file} NAME)
    configure_file(${file} ${CMAKE_BINARY_DIR}/share/hpctrain/${dir}/${name} COPYONLY)
  endforeach()
endforeach()

install(TARGETS hpctrain hpctrain-data RUNTIME DESTINATION bin)
if(TARGET hpctrain_cuda)
  install(TARGETS hpctrain_cuda LIBRARY DESTINATION lib/hpctrain)
endif()
install(FILES ${HT_PYTHON_TOOLS} DESTINATION share/hpctrain/python/hpctrain_tools)
install(FILES ${HT_CONFIGS} DESTINATION share/hpctrain/configs)
# Job scripts keep their mode (the .sh and .sbatch files are executable, the rest not).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/jobs/ DESTINATION share/hpctrain/jobs USE_SOURCE_PERMISSIONS)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION share/doc/hpctrain)
# Under docs/, as in the source tree, so the README's links resolve.
install(FILES ${HT_DOCS} DESTINATION share/doc/hpctrain/docs)

# The module file finds the prefix from its own path (modulefiles/hpctrain/<version>), so
# it too survives a move. Not in the Debian package (component "modulefile"): there the
# programs are on PATH already.
configure_file(${PROJECT_SOURCE_DIR}/packaging/hpctrain.modulefile.in
               ${CMAKE_BINARY_DIR}/modulefiles/hpctrain/${PROJECT_VERSION} @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/modulefiles/hpctrain/${PROJECT_VERSION}
        DESTINATION modulefiles/hpctrain COMPONENT modulefile)
