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
                                    const EmulationHost& host, const ValidationProfile& base)
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
    const Problem problem =
        emulatedProblem(request.model, request.batch, engine::PrecisionMode::FP32, false, device, links, devices);
    const CostModelParams roofline = engineCostModelParams(device, links, request.bucket_bytes, base.terms);
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
    const Prediction probed = stepWith(kProbeS);
    e.barriers = std::max(0.0, (probed.step_time_s - e.critical_s) / kProbeS);
    e.oversubscription = std::max(1.0, double(devices) / double(host.cores));
    e.compute_s = std::max(e.critical_s, e.oversubscription * e.busy_s);
    // A barrier's wait is hidden when the workers outside its group can keep every core busy
    // meanwhile (N - g >= C). By group: data-parallel (the ZeRO shard group, or dp x cp),
    // pipeline (pairs), the rest tensor-parallel (with their share of the bubble).
    const double dpBarriers = std::max(0.0, (probed.time_s.dp_comm - base0.time_s.dp_comm) / kProbeS);
    const double ppBarriers = std::max(0.0, (probed.time_s.pp_comm - base0.time_s.pp_comm) / kProbeS);
    const double tpBarriers = std::max(0.0, e.barriers - dpBarriers - ppBarriers);
    const double dpGroup =
        double(priced.zero_stage > 0 ? priced.zeroGroupSize() : priced.dp) * double(priced.cp);
    auto hidden = [&](double group) { return double(devices) - group >= double(host.cores); };
    e.hidden_barriers = (hidden(dpGroup) ? dpBarriers : 0) + (hidden(2) ? ppBarriers : 0) +
                        (hidden(double(priced.tp)) ? tpBarriers : 0);
    const EmulationWallTerms& t = base.wall;
    e.wall_s = t.compute_factor * e.compute_s + t.sync_s * (e.barriers - e.hidden_barriers) +
               t.hidden_sync_s * e.hidden_barriers;
    return e;
}

} // namespace shardscope
