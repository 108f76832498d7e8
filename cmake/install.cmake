# cmake --install: headers under <prefix>/include/fusejit, libfusejit.a (C++),
# libfusejit_c.so (C API), the CLI, a CMake package (fusejit::fusejit,
# fusejit::fusejit_c) and fusejit.pc for the C API. See docs/packaging.md.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(fusejit_lib PROPERTIES EXPORT_NAME fusejit)
add_library(fusejit::fusejit ALIAS fusejit_lib)
add_library(fusejit::fusejit_c ALIAS fusejit_c)
# Installed binaries find libnvrtc, yaml-cpp (and libLLVM-14, with the CPU
# backend) where they were linked from. The static libfusejit.a exports
# libLLVM-14.so by absolute path as a link-only dependency (fusejitConfig.cmake
# checks that it is there).
set_target_properties(fusejit fusejit_c PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

set(FUSEJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fusejit)
install(TARGETS fusejit_lib fusejit_c EXPORT fusejitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fusejit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fusejit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(EXPORT fusejitTargets NAMESPACE fusejit:: DESTINATION ${FUSEJIT_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fusejitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fusejitConfig.cmake INSTALL_DESTINATION ${FUSEJIT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fusejitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fusejitConfig.cmake ${PROJECT_BINARY_DIR}/fusejitConfigVersion.cmake
  DESTINATION ${FUSEJIT_CMAKE_DIR})

# fusejit.pc finds its prefix from where it lies (relocatable, like the CMake package).
file(RELATIVE_PATH FUSEJIT_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${PROJECT_SOURCE_DIR}/cmake/fusejit.pc.in ${PROJECT_BINARY_DIR}/fusejit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fusejit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The test: install to a temporary prefix, build examples/consumer against it, run it.
# Not in sanitizer builds: the consumer is not instrumented, so it cannot link
# (or load) an instrumented library; packaging is tested by the normal build.
if(FUSEJIT_BUILD_TESTS AND NOT FUSEJIT_SANITIZE)
  # The toolkit's root is bin/'s parent (include/ may lie under targets/<arch>/).
  get_filename_component(cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  add_test(NAME install_consumer_test
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
            -DWORK_DIR=${PROJECT_BINARY_DIR}/install_consumer_test -DGENERATOR=${CMAKE_GENERATOR}
            -DCUDAToolkit_ROOT=${cuda_root}
            -P ${PROJECT_SOURCE_DIR}/cmake/install_consumer_test.cmake)
  set_tests_properties(install_consumer_test PROPERTIES TIMEOUT 600)

  # pip install ./python into a fresh venv, library from this build (python/setup.py).
  set(FUSEJIT_PIP_PYTHON "")
  foreach(candidate /usr/bin/python3 python3)
    execute_process(COMMAND ${candidate} -c "import setuptools, wheel, pip, venv"
                    RESULT_VARIABLE pip_rc OUTPUT_QUIET ERROR_QUIET)
    if(pip_rc EQUAL 0)
      set(FUSEJIT_PIP_PYTHON ${candidate})
      break()
    endif()
  endforeach()
  if(FUSEJIT_PIP_PYTHON)
    add_test(NAME python_package_test
             COMMAND ${PROJECT_SOURCE_DIR}/tests/python_package_test.sh ${FUSEJIT_PIP_PYTHON}
                     ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    set_tests_properties(python_package_test PROPERTIES TIMEOUT 300)
  else()
    message(STATUS "fusejit: no python3 with venv, pip, setuptools and wheel; python_package_test not registered")
  endif()
endif()
