# `cmake --install`: headers, static libraries, the CMake package (Tandem::runtime,
# Tandem::compiler) and pkg-config files (tandem-runtime.pc, tandem.pc). tests/install checks it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TANDEM_VERSION ${PROJECT_VERSION})  # project() in the top CMakeLists.txt
set(TANDEM_INCLUDE_SUBDIR ${CMAKE_INSTALL_INCLUDEDIR}/tandem)  # headers keep their tree paths
set(TANDEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)

# Headers are included by their tree path ("runtime/Executable.h", "compiler/Plan.pb.h"); in the
# tree that is the global include_directories, installed it is include/tandem.
# tandem_shapes (compiler/shapes, MLIR-free) is the runtime's too: its plan verifier uses it.
set(TANDEM_RUNTIME_LIBS tandem_runtime tandem_cuda tandem_cpu_dnnl tandem_cpu_avx2 tandem_cpu_ref
    tandem_shapes tandem_training tandem_runtime_core tandem_checkpoint_proto tandem_plan_proto)
set(TANDEM_COMPILER_LIBS tandem_driver tandem_tool_support tandem_frontend tandem_datasets tandem_onnx_io
    tandem_compiler tandem_passes tandem_placement tandem_dialect)
foreach(t tandem_plan_proto tandem_runtime_core)
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${TANDEM_INCLUDE_SUBDIR}>)
endforeach()

# The user-facing names; the libraries behind them come along as their link dependencies.
add_library(tandem_package_runtime INTERFACE)
target_link_libraries(tandem_package_runtime INTERFACE tandem_runtime)
set_target_properties(tandem_package_runtime PROPERTIES EXPORT_NAME runtime)
add_library(tandem_package_compiler INTERFACE)  # ONNX/GraphBuilder -> Plan -> Executable in-process
target_link_libraries(tandem_package_compiler INTERFACE tandem_driver)
set_target_properties(tandem_package_compiler PROPERTIES EXPORT_NAME compiler)

install(TARGETS ${TANDEM_RUNTIME_LIBS} ${TANDEM_COMPILER_LIBS} tandem_mlir_deps
        tandem_package_runtime tandem_package_compiler
        EXPORT TandemTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION ${TANDEM_CMAKE_DIR})

foreach(dir runtime compiler frontend passes tools/driver)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${TANDEM_INCLUDE_SUBDIR}/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()
# Generated: the Plan protobuf and the dialect's and passes' TableGen output.
install(FILES ${PROJECT_BINARY_DIR}/compiler/Plan.pb.h DESTINATION ${TANDEM_INCLUDE_SUBDIR}/compiler)
install(FILES ${PROJECT_BINARY_DIR}/runtime/training/Checkpoint.pb.h
        DESTINATION ${TANDEM_INCLUDE_SUBDIR}/runtime/training)
install(DIRECTORY ${PROJECT_BINARY_DIR}/compiler/ DESTINATION ${TANDEM_INCLUDE_SUBDIR}/compiler
        FILES_MATCHING PATTERN "*.h.inc" PATTERN "CMakeFiles" EXCLUDE)
install(DIRECTORY ${PROJECT_BINARY_DIR}/passes/ DESTINATION ${TANDEM_INCLUDE_SUBDIR}/passes
        FILES_MATCHING PATTERN "*.h.inc" PATTERN "CMakeFiles" EXCLUDE)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/TandemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TandemConfig.cmake
                              INSTALL_DESTINATION ${TANDEM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake
                                 VERSION ${TANDEM_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TandemConfig.cmake ${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake
        DESTINATION ${TANDEM_CMAKE_DIR})

# pkg-config: static libraries in link order, the runtime's in a linker group for the runtime <->
# CUDA backend cycle (pkg-config would merge a repeated -l), then what they link.
# tandem-runtime.pc needs no MLIR; tandem.pc adds the compiler and MLIR.
set(TANDEM_PC_RUNTIME_LIBS "-Wl,--start-group")
foreach(l ${TANDEM_RUNTIME_LIBS})
  string(APPEND TANDEM_PC_RUNTIME_LIBS " -l${l}")
endforeach()
string(APPEND TANDEM_PC_RUNTIME_LIBS " -Wl,--end-group")
set(TANDEM_PC_COMPILER_LIBS "")
foreach(l ${TANDEM_COMPILER_LIBS})
  string(APPEND TANDEM_PC_COMPILER_LIBS " -l${l}")
endforeach()
set(TANDEM_PC_RUNTIME_DEPS "-ldnnl -lprotobuf -lcrypto ${OpenMP_CXX_FLAGS} -lpthread -l${CMAKE_DL_LIBS}")
set(TANDEM_PC_CFLAGS "")
if(TANDEM_ENABLE_CUDA)
  string(PREPEND TANDEM_PC_RUNTIME_DEPS "${CUDAToolkit_LIBRARY_DIR}/libcudart_static.a -lrt ")
  set(TANDEM_PC_CFLAGS "-DTANDEM_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
endif()
string(REPLACE ";" " -I" TANDEM_PC_MLIR_INCLUDES "-I${LLVM_INCLUDE_DIRS}")
set(TANDEM_PC_COMPILER_DEPS "-L${LLVM_LIBRARY_DIR} -Wl,-rpath,${LLVM_LIBRARY_DIR} -lMLIR -lLLVM -lonnx -lonnx_proto -lz")
configure_file(${CMAKE_CURRENT_LIST_DIR}/tandem-runtime.pc.in ${PROJECT_BINARY_DIR}/tandem-runtime.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/tandem.pc.in ${PROJECT_BINARY_DIR}/tandem.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tandem-runtime.pc ${PROJECT_BINARY_DIR}/tandem.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
