#include "WallClockModel.h"
#include "CostModel.h"
#include "EmulatedHardware.h"

#include <algorithm>
#include <thread>

namespace shardscope {

EmulationHost emulationHost(const engine::DeviceProfile& profile)
{
    return EmulationHost{profile, int(std::max(1u, std::thread::hardware_concurrency()))};
}

WallClockEstimate estimateWallClock(const engine::TrainRequest& request, const Layout& priced,
                                    const EmulationHost& host, const CostModelParams& base)
{
    WallClockEstimate e;
    if (!host.known())
        return e;
    const int devices = int(priced.devices());
    // Devices talk through the host's memory: one node, links at the copy bandwidth.
    const engine::DeviceProfile& device = host.profile;
    engine::LinkSpec links;
    links.intra_bytes_per_second = device.memory_bytes_per_second;
    links.inter_bytes_per_second = device.memory_bytes_per_second;
    links.node_devices = 0;
    // The host holds every value as a float (bf16 is rounded, not stored narrow): its traffic is fp32's.
    const Problem problem = emulatedProblem(request.model, request.batch, engine::PrecisionMode::FP32, device, links,
                                            devices);
    const CostModelParams roofline = engineCostModelParams(device, links, request.bucket_bytes, base);
    auto stepWith = [&](double barrierS) {
        CostModelParams p = roofline;
        p.intra_latency_s = p.inter_latency_s = p.collective_launch_s = barrierS;
        return CostModel(problem, p).evaluate(priced);
    };
    const Prediction base0 = stepWith(0);
    // A millisecond per barrier: the step time grows by a millisecond per barrier.
    constexpr double kProbeS = 1e-3;
    e.critical_s = base0.step_time_s;
    e.busy_s = std::max(0.0, base0.step_time_s - base0.time_s.bubble);
    e.barriers = std::max(0.0, (stepWith(kProbeS).step_time_s - e.critical_s) / kProbeS);
    e.oversubscription = std::max(1.0, double(devices) / double(host.cores));
    e.compute_s = std::max(e.critical_s, e.oversubscription * e.busy_s);
    const EmulationWallTerms& t = base.emulation_wall;
    e.wall_s = t.compute_factor * e.compute_s + t.sync_s * e.barriers;
    return e;
}

} // namespace shardscope
