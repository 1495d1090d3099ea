#include "StoredProfiles.h"
#include "Catalog.h"

namespace shardscope {

ValidationProfile validationProfileNamed(const Catalog& catalog, const std::string& name)
{
    ValidationProfile profile(costModelParamsNamed(catalog, name));  // its errors name the profile
    if (const auto document = catalog.costProfile(name)) {
        FieldErrors errors;
        profile.wall = validationProfileFromJson(*document, "cost_model." + name, errors).wall;
        if (!errors.empty())
            throw InputError(errors);
    }
    return profile;
}

} // namespace shardscope
