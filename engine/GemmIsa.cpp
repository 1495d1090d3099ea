#include "GemmIsa.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace shardscope::engine::isa {

#ifdef SHARDSCOPE_GEMM_DISPATCH
// Built from GemmKernel.cpp, one namespace per level (engine/CMakeLists.txt).
#define SHARDSCOPE_LEVEL_KERNELS                                                                 \
    void gemmF32(const GemmBlock<float>&);                                                       \
    void gemmF64(const GemmBlock<double>&);                                                      \
    void softmaxF32(float* x, std::ptrdiff_t n, float scale, float* max, float* sum);            \
    void softmaxF64(double* x, std::ptrdiff_t n, double scale, double* max, double* sum);
namespace v3 {
SHARDSCOPE_LEVEL_KERNELS
}
namespace v4 {
SHARDSCOPE_LEVEL_KERNELS
}
#undef SHARDSCOPE_LEVEL_KERNELS
#endif

std::vector<LevelKernels> supportedLevelKernels()
{
    std::vector<LevelKernels> out;
#ifdef SHARDSCOPE_GEMM_DISPATCH
    // __builtin_cpu_supports checks CPUID and that the OS saves the vector registers (XCR0).
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        out.push_back({"x86-64-v4", v4::gemmF32, v4::gemmF64, v4::softmaxF32, v4::softmaxF64});
    if (__builtin_cpu_supports("x86-64-v3"))
        out.push_back({"x86-64-v3", v3::gemmF32, v3::gemmF64, v3::softmaxF32, v3::softmaxF64});
#endif
    return out;
}

const LevelKernels& levelKernels()
{
    static const LevelKernels kernels = [] {
        const std::vector<LevelKernels> supported = supportedLevelKernels();
        const char* wanted = std::getenv("SHARDSCOPE_ENGINE_ISA");
        if (!wanted || !*wanted)
            return supported.empty() ? LevelKernels{} : supported.front();
        if (std::strcmp(wanted, "baseline") == 0)
            return LevelKernels{};
        for (const LevelKernels& k : supported)
            if (std::strcmp(wanted, k.level) == 0)
                return k;
        // Decided inside the first GEMM, perhaps on a worker thread: said, not thrown.
        std::string known = "baseline";
        for (const LevelKernels& k : supported)
            known += std::string(", ") + k.level;
        const LevelKernels fallback = supported.empty() ? LevelKernels{} : supported.front();
        std::fprintf(stderr, "shardscope: SHARDSCOPE_ENGINE_ISA=%s is not a level this build and CPU support (%s); "
                             "using %s\n", wanted, known.c_str(), *fallback.level ? fallback.level : "baseline");
        return fallback;
    }();
    return kernels;
}

} // namespace shardscope::engine::isa
