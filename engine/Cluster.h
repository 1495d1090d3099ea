// EmulatedCluster: N emulated devices, each driven by its own worker thread,
// arranged as a layout's device mesh and grouped into emulated nodes, with the
// Communicator that moves data between them.
//
// Mesh (as the planner places it, core/Layout.h): device id =
//   ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank
// so tensor-parallel groups are neighbours inside a node, then cp, dp, pp.
// Emulated node = id / node_devices. Groups made for every device:
//   tp        same (cp, dp, pp), tp ranks in order
//   cp        same (tp, dp, pp), cp ranks in order: the ring of context parallelism (cp > 1)
//   dp        the data-parallel gradient group: same (tp, pp), the (dp, cp) ranks in order
//             dp_rank * cp + cp_rank; with cp = 1 the dp ranks. Megatron-LM reduces gradients
//             over dp x cp (parallel_state.py, "data_parallel_group_with_cp").
//   shard     ZeRO shard group: ranks [k*g, (k+1)*g) of the dp group, g = zero group size x cp
//             (Megatron's distributed optimizer shards over dp x cp)
//   replica   the dp group's ranks with the same position inside their shard group (HSDP's outer group)
//   embedding first and last pipeline stage (tied word embedding), same (tp, cp, dp), when pp > 1
//   ep, edp   Megatron's expert grid per stage: the stage's rank r = tp_rank + tp (cp_rank +
//             cp dp_rank) is also etp_rank + etp (ep_rank + ep edp_rank); ep: the ep ranks of the
//             same (etp, edp) ranks (experts/ep routed experts each), edp: the edp ranks of the
//             same (etp, ep) ranks (the expert gradients' reduction); etp: the etp ranks of the
//             same (ep, edp) ranks (each expert's matrices split over them); edp_shard: under HSDP
//             the consecutive slices of an edp group inside one replica (the experts' ZeRO shards)
//   world     every device
// Pipeline neighbours are reached by send/recv to stageNeighbour().
//
// Each device gets a KernelPool of one thread: the workers share the host's cores.
// Backend (Communicator.h): with threads this process runs every device's worker; with MPI
// every rank of the mpirun job builds the same cluster and runs its own devices' workers
// (MpiCommunicator.h), the other devices' objects standing by unused.
// Not here: what the workers compute.
#pragma once

#include "Communicator.h"
#include "Device.h"
#include "Layout.h"
#include "RunFault.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::engine {

struct MeshPosition {
    int tp = 0, cp = 0, dp = 0, pp = 0;
    int node = 0;
};

struct DeviceGroups {
    CommGroup* tp = nullptr;
    CommGroup* cp = nullptr;         // null unless cp > 1
    CommGroup* dp = nullptr;         // dp x cp
    CommGroup* shard = nullptr;
    CommGroup* replica = nullptr;
    CommGroup* embedding = nullptr;  // null unless pp > 1 and this is the first or last stage
    CommGroup* ep = nullptr;         // expert parallel (Megatron's expert grid, see above); null unless ep > 1
    CommGroup* edp = nullptr;        // expert data parallel: the stage's devices holding the same experts
    // The experts' ZeRO shard group: edp itself, or under HSDP (zero_group < dp) the slice of edp / R
    // consecutive edp ranks (R = dp / zero_group replicas) inside one replica of the dense shard
    // groups; across the replicas the experts' shards are summed over `replica` (Megatron-LM's
    // intra/inter partial expert-data-parallel groups).
    CommGroup* edp_shard = nullptr;
    CommGroup* etp = nullptr;        // expert tensor parallel: the slices of the same experts; null unless etp > 1
    // etp x ep of the same edp rank (Megatron's tp_ep group, the MoE dispatcher's counts gather);
    // null unless etp > 1 and ep > 1 (otherwise it is the etp or the ep group). Rank etp_idx + etp ep_idx.
    CommGroup* tpep = nullptr;
    CommGroup* world = nullptr;
};

// What stopped a run: the device whose worker failed first and why.
struct WorkerFailure {
    int device = -1;
    std::string message;
    RunFaultKind kind = RunFaultKind::Other;
};

class EmulatedCluster {
public:
    // layout.devices() devices of `profile` (device i named "device i (profile)").
    // Throws std::invalid_argument for a degree < 1 or a shard group that does not divide dp.
    // ClusterBackend::Mpi needs an MpiSession (MpiSession.h; MpiUnavailable without MPI).
    EmulatedCluster(const Layout& layout, const DeviceProfile& profile, const LinkSpec& links,
                    const std::atomic<bool>* cancel = nullptr, ClusterBackend backend = ClusterBackend::Threads);
    // A flat cluster of n devices (dp = n): for collectives alone.
    EmulatedCluster(int devices, const DeviceProfile& profile, const LinkSpec& links,
                    const std::atomic<bool>* cancel = nullptr, ClusterBackend backend = ClusterBackend::Threads);
    ~EmulatedCluster();
    EmulatedCluster(const EmulatedCluster&) = delete;
    EmulatedCluster& operator=(const EmulatedCluster&) = delete;

    int size() const { return int(devices_.size()); }
    const Layout& layout() const { return layout_; }
    EmulatedDevice& device(int id) { return *devices_[size_t(id)]; }
    const EmulatedDevice& device(int id) const { return *devices_[size_t(id)]; }
    Communicator& communicator() { return *comm_; }
    const MeshPosition& position(int id) const { return positions_[size_t(id)]; }
    const DeviceGroups& groups(int id) const { return groups_[size_t(id)]; }
    // The device at pipeline stage pp + delta with the same (tp, cp, dp); -1 outside the pipeline.
    int stageNeighbour(int id, int delta) const;
    int meshId(int tp, int cp, int dp, int pp) const;

    // Whether this process runs device `id` (every device with threads).
    bool runsDevice(int id) const { return comm_->runsDevice(id); }

    // Runs work(device id) on one new thread per device of this process and joins them all,
    // whatever happens. The first worker to throw (other than ClusterAborted)
    // aborts the communicator, so the others stop at their next collective;
    // its id and message are returned. A run stopped by the cancel flag
    // returns nothing and sets cancelled(). One run at a time. With MPI a failure stops every
    // rank (Communicator::workerFailed) instead of returning.
    std::optional<WorkerFailure> run(const std::function<void(int device)>& work);
    bool cancelled() const { return cancelled_; }

private:
    void build(const DeviceProfile& profile, const LinkSpec& links, const std::atomic<bool>* cancel,
               ClusterBackend backend);

    Layout layout_;
    std::vector<std::unique_ptr<EmulatedDevice>> devices_;
    std::unique_ptr<Communicator> comm_;
    std::vector<MeshPosition> positions_;
    std::vector<DeviceGroups> groups_;
    bool cancelled_ = false;
};

} // namespace shardscope::engine
