// A device profile for the tests that run operations through the Kernels facade: every field
// the clock needs, large enough for any test shape (the figures are irrelevant to results).
#pragma once

#include "Device.h"

inline shardscope::engine::DeviceProfile kernelTestProfile()
{
    shardscope::engine::DeviceProfile p;
    p.name = "test";
    p.memory_bytes = 1e9;
    p.peak_flops_fp32 = 1e12;
    p.memory_bytes_per_second = 1e11;
    return p;
}
