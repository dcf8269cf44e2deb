// NVRTC entry points Tandem calls, resolved from libnvrtc at first call (LazyLibraries.h).
// NVRTC needs no GPU: compile-only code (tests, plan tools) loads it without a device.
// Add a function here when code starts calling it: the link fails until then.
#include <nvrtc.h>

#include "runtime/cuda/LazyLibraries.h"

#define RTC_STUB(NAME, PARAMS, ARGS) \
  TANDEM_CUDA_STUB(Nvrtc, NVRTC_ERROR_INTERNAL_ERROR, nvrtcResult, NAME, PARAMS, ARGS)

RTC_STUB(nvrtcVersion, (int* major, int* minor), (major, minor))
RTC_STUB(nvrtcGetNumSupportedArchs, (int* numArchs), (numArchs))
RTC_STUB(nvrtcGetSupportedArchs, (int* supportedArchs), (supportedArchs))
TANDEM_CUDA_STUB(Nvrtc, "NVRTC could not be loaded (see the CUDA backend's error)", const char*,
                 nvrtcGetErrorString, (nvrtcResult result), (result))

RTC_STUB(nvrtcCreateProgram,
         (nvrtcProgram* prog, const char* src, const char* name, int numHeaders, const char* const* headers,
          const char* const* includeNames),
         (prog, src, name, numHeaders, headers, includeNames))
RTC_STUB(nvrtcDestroyProgram, (nvrtcProgram* prog), (prog))
RTC_STUB(nvrtcCompileProgram, (nvrtcProgram prog, int numOptions, const char* const* options),
         (prog, numOptions, options))
RTC_STUB(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t* logSizeRet), (prog, logSizeRet))
RTC_STUB(nvrtcGetProgramLog, (nvrtcProgram prog, char* log), (prog, log))
RTC_STUB(nvrtcGetPTXSize, (nvrtcProgram prog, size_t* ptxSizeRet), (prog, ptxSizeRet))
RTC_STUB(nvrtcGetPTX, (nvrtcProgram prog, char* ptx), (prog, ptx))
RTC_STUB(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t* cubinSizeRet), (prog, cubinSizeRet))
RTC_STUB(nvrtcGetCUBIN, (nvrtcProgram prog, char* cubin), (prog, cubin))
