# ctest install_consumer_test: installs BUILD_DIR to a temporary prefix, builds
# examples/consumer against it (find_package and pkg-config) and runs it.
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -P this
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/fusejit/fusejit.h include/fusejit/engine.h bin/fusejit)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()
file(GLOB pc ${prefix}/lib*/pkgconfig/fusejit.pc ${prefix}/lib/*/pkgconfig/fusejit.pc)
get_filename_component(pc_dir "${pc}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
set(ENV{FUSEJIT_CACHE_DIR} ${WORK_DIR}/cache)

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCUDAToolkit_ROOT=${CUDAToolkit_ROOT})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${prefix}/bin/fusejit --version)
run(${WORK_DIR}/build/consumer_cpp)
run(${WORK_DIR}/build/consumer_c)
if(EXISTS ${WORK_DIR}/build/consumer_c_pkgconfig)
  run(${WORK_DIR}/build/consumer_c_pkgconfig)
endif()
file(REMOVE_RECURSE ${WORK_DIR})
