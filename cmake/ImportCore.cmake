# The core libraries (kiln_runtime, kiln_ir, kiln_compiler, kiln_codegen, kiln_passes) of another
# build folder of this checkout, as imported targets with the link interface their own
# CMakeLists give them. None of them includes Python.h, so a second interpreter's build links
# them as they are. The folder must be built from the same sources first (the Makefile's `build`
# for another PYTHON builds the default one before).
get_filename_component(KILN_CORE_BUILD_DIR ${KILN_CORE_BUILD_DIR} ABSOLUTE)
foreach(lib runtime ir compiler codegen passes)
  set(archive ${KILN_CORE_BUILD_DIR}/${lib}/libkiln_${lib}.a)
  if(NOT EXISTS ${archive})
    message(FATAL_ERROR "KILN_CORE_BUILD_DIR=${KILN_CORE_BUILD_DIR} has no ${lib}/libkiln_${lib}.a: "
                        "build the default folder first (make build)")
  endif()
  add_library(kiln_${lib} STATIC IMPORTED GLOBAL)
  set_target_properties(kiln_${lib} PROPERTIES IMPORTED_LOCATION ${archive})
endforeach()
# Headers: the sources, and the op table's generated headers in the core's build folder.
target_include_directories(kiln_runtime INTERFACE ${CMAKE_SOURCE_DIR} ${KILN_CORE_BUILD_DIR})
target_link_libraries(kiln_runtime INTERFACE OpenMP::OpenMP_CXX ${CMAKE_DL_LIBS} ${KILN_DNNL_LIB}
                      ${KILN_OPENBLAS_OMP_LIB} mvec)  # as runtime/CMakeLists.txt links it
target_link_libraries(kiln_ir INTERFACE kiln_runtime)
target_link_libraries(kiln_compiler INTERFACE kiln_ir kiln_runtime)
target_link_libraries(kiln_codegen INTERFACE kiln_ir ${CMAKE_DL_LIBS})
target_link_libraries(kiln_passes INTERFACE kiln_ir kiln_compiler kiln_codegen)
