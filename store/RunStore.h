// RunStore: what was measured and fitted on this machine — validation runs (planner
// prediction vs engine measurement), named cost-model profiles (fitted efficiency terms,
// opt-in alternatives to the built-in default, which is never changed) and host profiles
// (this machine measured as an emulated device, per thread count).
#pragma once

#include "CostModelParams.h"
#include "HostProfile.h"
#include "ValidationProfile.h"

#include <QJsonObject>

#include <optional>
#include <string>
#include <vector>

namespace shardscope {

class Database;

class RunStore {
public:
    explicit RunStore(Database& db) : db_(db) {}

    // Run history: validation documents ("shardscope.validation/1").
    struct ValidationRun {
        int id = 0;
        std::string created_at;        // ISO 8601, UTC
        std::string software_version;
        std::string name;
        QJsonObject document;
    };
    // Returns the new run's id.
    int storeValidationRun(const std::string& name, const QJsonObject& document);
    std::vector<ValidationRun> validationRuns(int limit = 100) const;  // newest first

    // Stores (or replaces) a profile under `name` (its terms' name is set to it): the planner's
    // terms, and the emulation's wall-clock terms when it was fitted on engine runs (a
    // CostModelParams converts to a profile without them). "default" is refused: the built-in
    // profile is never replaced.
    void storeCostProfile(const std::string& name, const ValidationProfile& profile);
    // A stored profile's planner terms; throws InputError when its document no longer reads.
    std::optional<CostModelParams> costProfile(const std::string& name) const;
    // The same profile with its emulation terms (for validation).
    std::optional<ValidationProfile> validationProfile(const std::string& name) const;
    std::vector<std::string> costProfileNames() const;
    // "default" (or empty) is the built-in profile, any other name a stored one. Throws
    // InputError naming the profile and the ones there are.
    CostModelParams costModelParamsNamed(const std::string& name) const;
    // The same for validation: "default" is the built-in terms with the uncalibrated wall clock.
    ValidationProfile validationProfileNamed(const std::string& name) const;

    // The stored measurement of a host at a thread count, if any.
    std::optional<HostProfile> hostProfile(const std::string& host_id, int threads) const;
    std::vector<HostProfile> hostProfiles() const;
    // Stores (or replaces) a measurement, in one transaction.
    void storeHostProfile(const HostProfile& profile);

private:
    Database& db_;
};

} // namespace shardscope
