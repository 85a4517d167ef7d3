# A Debian package of this build: cpack -G DEB --config <build>/CPackConfig.cmake
# (or `cmake --build <build> --target package`). It installs under /usr what
# cmake/install.cmake installs, less the module file (the programs are on PATH already).
#
# Which package depends on how the build was configured:
#   hpctrain       a CPU-only build (-DHPCTRAIN_WITH_CUDA=OFF, or no CUDA toolkit found);
#                  every dependency is a Debian package.
#   hpctrain-cuda  a build with the CUDA backend. NVIDIA's libraries (CUDA runtime,
#                  cuBLAS, cuDNN, NCCL) are not Debian packages and may come from NVIDIA's
#                  repositories, a runfile or a tarball, so the package cannot depend on
#                  them: its description names them and the folder the programs look in
#                  (their run path). It replaces hpctrain and provides it.
# The library dependencies come from dpkg-shlibdeps; the others are listed here.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_VENDOR "hpctrain")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
# Only the install rules without a component: the module file (component "modulefile")
# stays out.
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};hpctrain;Unspecified;/")

set(HPCTRAIN_PACKAGE_MAINTAINER "hpctrain maintainers <root@localhost>" CACHE STRING
    "Maintainer field of the Debian package")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${HPCTRAIN_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# mpiexec (hydra) to launch the ranks; python3 with yaml, numpy and matplotlib for
# hpctrain study, plot and scaling.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "mpich, python3, python3-yaml, python3-numpy, python3-matplotlib")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "dataset-fashion-mnist, slurm-client")
set(HT_PACKAGE_SUMMARY "data-parallel neural-network training on MPI clusters")
string(CONCAT HT_PACKAGE_TEXT
       "hpctrain trains neural networks data-parallel under mpiexec or srun: ring all-reduce,\n"
       "parameter averaging or asynchronous parameter servers, HDF5 data shards, checkpoints\n"
       "that survive node failures and time limits, and a scaling-study driver.\n"
       "Example configs and Slurm job scripts are in /usr/share/hpctrain (hpctrain init DIR\n"
       "copies a starter set), the documentation in /usr/share/doc/hpctrain.")
if(HT_HAVE_CUDA)
  set(CPACK_PACKAGE_NAME hpctrain-cuda)
  set(CPACK_DEBIAN_PACKAGE_PROVIDES hpctrain)
  set(CPACK_DEBIAN_PACKAGE_CONFLICTS hpctrain)
  set(CPACK_DEBIAN_PACKAGE_REPLACES hpctrain)
  get_filename_component(HT_CUDNN_DIR ${CUDNN_LIBRARY} DIRECTORY)
  set(HT_CUDA_DIRS ${CUDAToolkit_LIBRARY_DIR} ${HT_CUDNN_DIR})
  list(REMOVE_DUPLICATES HT_CUDA_DIRS)
  string(REPLACE ";" " and " HT_CUDA_DIRS "${HT_CUDA_DIRS}")
  string(APPEND HT_PACKAGE_TEXT
         "\nThis build has the CUDA backend (CUDA ${CUDAToolkit_VERSION}, architectures\n"
         "${CMAKE_CUDA_ARCHITECTURES}). Its GPU ranks need NVIDIA's CUDA runtime "
         "${CUDAToolkit_VERSION_MAJOR}, cuBLAS, cuDNN 9\nand NCCL 2, which are not Debian "
         "packages: it looks for them in ${HT_CUDA_DIRS},\nthen LD_LIBRARY_PATH. CPU ranks "
         "never load them.")
else()
  set(CPACK_PACKAGE_NAME hpctrain)
  string(APPEND HT_PACKAGE_TEXT "\nThis build has the CPU backend only.")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY ${HT_PACKAGE_SUMMARY})
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION ${HT_PACKAGE_TEXT})
include(CPack)
