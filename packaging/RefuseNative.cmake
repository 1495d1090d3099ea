# Run by CPack before it writes a package (CPACK_PRE_BUILD_SCRIPTS): a build made with
# SHARDSCOPE_NATIVE=ON holds instructions of the build machine's CPU only.
if(CPACK_SHARDSCOPE_NATIVE)
  message(FATAL_ERROR "this build was configured with -DSHARDSCOPE_NATIVE=ON (-march=native): its package "
                      "could die with an illegal instruction on another machine; configure with "
                      "-DSHARDSCOPE_NATIVE=OFF (the default) to package")
endif()
