# The CUDA runtime pieces (runtime/kernels/cuda and runtime/exec/Cuda.cu),
# compiled by nvcc into libtransfuse_cuda.a for sm_80 and sm_90 (-fPIC: CUDA
# artifacts link it into libmodel.so). CUDA is optional: without nvcc
# (the toolkit under /usr/local/cuda) TRANSFUSE_CUDA_LIB is empty, the
# project builds and tests as before and `--target cuda` says it is
# unavailable. -DTRANSFUSE_WITH_CUDA=OFF builds as if there were no nvcc.
option(TRANSFUSE_WITH_CUDA "build the cuda target where nvcc is found" ON)
if(TRANSFUSE_WITH_CUDA)
  find_program(TRANSFUSE_NVCC nvcc PATHS /usr/local/cuda/bin)
else()
  unset(TRANSFUSE_NVCC CACHE)
  set(TRANSFUSE_NVCC "")
endif()
set(TRANSFUSE_CUDA_LIB "")
set(TRANSFUSE_CUDA_LIB_DIR "")
set(TRANSFUSE_CUDA_ARCH_FLAGS -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90)
if(TRANSFUSE_NVCC)
  get_filename_component(cuda_bin ${TRANSFUSE_NVCC} DIRECTORY)
  get_filename_component(TRANSFUSE_CUDA_ROOT ${cuda_bin} DIRECTORY)
  set(TRANSFUSE_CUDA_LIB_DIR ${TRANSFUSE_CUDA_ROOT}/lib64)
  set(cuda_units kernels/cuda/Norm kernels/cuda/Attention kernels/cuda/AttentionBf16
                 kernels/cuda/Gemm kernels/cuda/GemmBf16 kernels/cuda/CublasLt kernels/cuda/Embedding
                 kernels/cuda/Decode kernels/cuda/Layout kernels/cuda/Train kernels/cuda/AttentionGrad
                 exec/Cuda)
  file(GLOB cuda_headers ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.cuh)
  list(APPEND cuda_headers ${CMAKE_CURRENT_SOURCE_DIR}/exec/Cuda.cuh
       ${CMAKE_CURRENT_SOURCE_DIR}/exec/ModelDesc.h ${CMAKE_CURRENT_SOURCE_DIR}/exec/Ops.h
       ${CMAKE_CURRENT_SOURCE_DIR}/kernels/ElementwiseMath.h ${CMAKE_CURRENT_SOURCE_DIR}/Status.h
       ${CMAKE_CURRENT_SOURCE_DIR}/HostDevice.h ${CMAKE_CURRENT_SOURCE_DIR}/Philox.h
       ${CMAKE_CURRENT_SOURCE_DIR}/kernels/Optimizer.h)
  set(cuda_objects "")
  foreach(unit ${cuda_units})
    set(object ${CMAKE_CURRENT_BINARY_DIR}/cuda/${unit}.o)
    get_filename_component(object_dir ${object} DIRECTORY)
    add_custom_command(
      OUTPUT ${object}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${object_dir}
      COMMAND ${TRANSFUSE_NVCC} -O2 -std=c++17 -Xcompiler=-fPIC,-Wall ${TRANSFUSE_CUDA_ARCH_FLAGS}
              -I${CMAKE_SOURCE_DIR} -c ${CMAKE_CURRENT_SOURCE_DIR}/${unit}.cu -o ${object}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${unit}.cu ${cuda_headers}
      COMMENT "nvcc ${unit}.cu (sm_80, sm_90)" VERBATIM)
    list(APPEND cuda_objects ${object})
  endforeach()
  set(TRANSFUSE_CUDA_LIB ${CMAKE_CURRENT_BINARY_DIR}/libtransfuse_cuda.a)
  add_custom_command(
    OUTPUT ${TRANSFUSE_CUDA_LIB}
    COMMAND ${CMAKE_COMMAND} -E rm -f ${TRANSFUSE_CUDA_LIB}
    COMMAND ${CMAKE_AR} qcs ${TRANSFUSE_CUDA_LIB} ${cuda_objects}
    DEPENDS ${cuda_objects}
    COMMENT "libtransfuse_cuda.a" VERBATIM)
  add_custom_target(transfuse_cuda ALL DEPENDS ${TRANSFUSE_CUDA_LIB})
endif()
set(TRANSFUSE_NVCC ${TRANSFUSE_NVCC} PARENT_SCOPE)
set(TRANSFUSE_CUDA_LIB ${TRANSFUSE_CUDA_LIB} PARENT_SCOPE)
set(TRANSFUSE_CUDA_LIB_DIR ${TRANSFUSE_CUDA_LIB_DIR} PARENT_SCOPE)
set(TRANSFUSE_CUDA_ROOT ${TRANSFUSE_CUDA_ROOT} PARENT_SCOPE)
set(TRANSFUSE_CUDA_ARCH_FLAGS ${TRANSFUSE_CUDA_ARCH_FLAGS} PARENT_SCOPE)
