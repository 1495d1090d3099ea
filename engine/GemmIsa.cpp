#include "GemmIsa.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace shardscope::engine::isa {

#ifdef SHARDSCOPE_GEMM_DISPATCH
// Built from GemmKernel.cpp, one namespace per level (engine/CMakeLists.txt).
namespace v3 {
void gemmF32(const GemmBlock<float>&);
void gemmF64(const GemmBlock<double>&);
}
namespace v4 {
void gemmF32(const GemmBlock<float>&);
void gemmF64(const GemmBlock<double>&);
}
#endif

std::vector<GemmKernels> supportedGemmKernels()
{
    std::vector<GemmKernels> out;
#ifdef SHARDSCOPE_GEMM_DISPATCH
    // __builtin_cpu_supports checks CPUID and that the OS saves the vector registers (XCR0).
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        out.push_back({"x86-64-v4", v4::gemmF32, v4::gemmF64});
    if (__builtin_cpu_supports("x86-64-v3"))
        out.push_back({"x86-64-v3", v3::gemmF32, v3::gemmF64});
#endif
    return out;
}

const GemmKernels& gemmKernels()
{
    static const GemmKernels kernels = [] {
        const std::vector<GemmKernels> supported = supportedGemmKernels();
        const char* wanted = std::getenv("SHARDSCOPE_ENGINE_ISA");
        if (!wanted || !*wanted)
            return supported.empty() ? GemmKernels{} : supported.front();
        if (std::strcmp(wanted, "baseline") == 0)
            return GemmKernels{};
        for (const GemmKernels& k : supported)
            if (std::strcmp(wanted, k.level) == 0)
                return k;
        // Decided inside the first GEMM, perhaps on a worker thread: said, not thrown.
        std::string known = "baseline";
        for (const GemmKernels& k : supported)
            known += std::string(", ") + k.level;
        const GemmKernels fallback = supported.empty() ? GemmKernels{} : supported.front();
        std::fprintf(stderr, "shardscope: SHARDSCOPE_ENGINE_ISA=%s is not a level this build and CPU support (%s); "
                             "using %s\n", wanted, known.c_str(), *fallback.level ? fallback.level : "baseline");
        return fallback;
    }();
    return kernels;
}

} // namespace shardscope::engine::isa
