#include "ValidationProfile.h"
#include "JsonReader.h"

namespace shardscope {

QJsonObject toJson(const ValidationProfile& p)
{
    QJsonObject o = toJson(p.terms);
    if (!(p.wall == EmulationWallTerms{}))
        o.insert("emulation_wall", QJsonObject{{"compute_factor", p.wall.compute_factor},
                                               {"sync_s", p.wall.sync_s},
                                               {"hidden_sync_s", p.wall.hidden_sync_s}});
    return o;
}

ValidationProfile validationProfileFromJson(const QJsonObject& json, const std::string& path, FieldErrors& errors)
{
    ValidationProfile p(costModelParamsFromJson(json, path, errors));
    // Profiles fitted on published runs only have no emulation terms: the uncalibrated ones apply.
    if (json.contains(QLatin1String("emulation_wall"))) {
        JsonReader r(json, path, errors);
        JsonReader wall = r.object("emulation_wall", true);
        wall.rejectUnknownKeys({"compute_factor", "sync_s", "hidden_sync_s"});
        p.wall.compute_factor = wall.number("compute_factor", 1, true, 1e-3, 1e3);
        p.wall.sync_s = wall.number("sync_s", 0, true, 0, 1);
        p.wall.hidden_sync_s = wall.number("hidden_sync_s", 0, false, 0, 1);
    }
    return p;
}

} // namespace shardscope
