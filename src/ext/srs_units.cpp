#include "ext/srs_units.hpp"

#include <boost/container/flat_map.hpp>
#include <cstdlib>
#include <cstring>

#include "ext/catalog.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

namespace ot::ext {
namespace {

struct Lookup {
    bool found;
    core::Srs srs;
};

// proj4 text → linear unit in metres. Pure C string work: it runs inside pg_call.
double proj4_metres_per_unit(const char* proj4) {
    if (const char* p = std::strstr(proj4, "+to_meter=")) return std::strtod(p + 10, nullptr);
    struct Unit {
        const char* token;
        double metres;
    };
    static const Unit units[] = {{"+units=m ", 1.0},          {"+units=km", 1000.0},     {"+units=us-ft", 0.3048006096012192},
                                 {"+units=ft", 0.3048},       {"+units=yd", 0.9144},     {"+units=us-yd", 0.914401828803658},
                                 {"+units=ch", 20.1168},      {"+units=link", 0.201168}, {"+units=mi", 1609.344},
                                 {"+units=us-mi", 1609.347218694437}};
    for (const Unit& u : units)
        if (std::strstr(proj4, u.token)) return u.metres;
    return 1.0;  // proj's default linear unit
}

Oid spatial_ref_sys_oid() {
    Oid ext = get_extension_oid("postgis", true);
    if (!OidIsValid(ext))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("ogc_throttle: PostGIS is not installed"),
                        errhint("CREATE EXTENSION postgis;")));
    Oid rel = get_relname_relid("spatial_ref_sys", extension_schema(ext));
    if (!OidIsValid(rel))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("ogc_throttle: spatial_ref_sys not found")));
    return rel;
}

Lookup query_spatial_ref_sys(int32 srid) {
    const Oid rel = spatial_ref_sys_oid();
    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfo(&sql, "SELECT coalesce(proj4text, ''), coalesce(srtext, '') FROM %s.%s WHERE srid = $1",
                     quote_identifier(get_namespace_name(get_rel_namespace(rel))), quote_identifier(get_rel_name(rel)));
    Oid argtypes[1] = {INT4OID};
    Datum args[1] = {Int32GetDatum(srid)};
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ogc_throttle: SPI_connect failed");
    if (SPI_execute_with_args(sql.data, 1, argtypes, args, nullptr, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "ogc_throttle: could not read spatial_ref_sys");
    Lookup out{false, core::kMetres};
    if (SPI_processed > 0) {
        const char* proj4 = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        const char* srtext = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
        const bool geographic = std::strstr(proj4, "+proj=longlat") != nullptr ||
                                std::strstr(proj4, "+proj=latlong") != nullptr ||
                                std::strncmp(srtext, "GEOGCS", 6) == 0 || std::strncmp(srtext, "GEOGCRS", 7) == 0;
        out.found = true;
        out.srs = geographic ? core::kDegrees : core::Srs{core::Units::Linear, proj4_metres_per_unit(proj4)};
    }
    SPI_finish();
    return out;
}

// A sorted vector: a few SRIDs per backend, looked up on every priced call.
using Cache = boost::container::flat_map<int32, core::Srs>;

Cache& cache() {
    static Cache c;
    return c;
}

void forget_all(Datum, Oid) { cache().clear(); }

void register_invalidation() {
    static bool registered = false;
    if (registered) return;
    // Any relcache invalidation may be an edit of spatial_ref_sys; SRIDs are
    // cheap to read again, so the whole cache goes.
    CacheRegisterRelcacheCallback(forget_all, 0);
    registered = true;
}

void remember(int32 srid, core::Srs srs) {
    // Runs inside plan walks that pass through PostgreSQL's C code, where no
    // C++ exception may travel: a failed insert only means reading it again.
    try {
        cache().emplace(srid, srs);
    } catch (...) {
    }
}

}  // namespace

// Nothing here throws: errors are ereports, made with no C++ object alive.
core::Srs srs_for(int32 srid) {
    if (srid <= 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: SRID %d has no known units", srid),
                        errhint("Pass the SRID of the coordinates, for example 4326 or 3857.")));
    const Cache& c = cache();
    if (auto it = c.find(srid); it != c.end()) return it->second;
    register_invalidation();
    const Lookup l = query_spatial_ref_sys(srid);
    if (!l.found)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("ogc_throttle: SRID %d is not in spatial_ref_sys", srid),
                        errdetail("Without a spatial_ref_sys entry the units of the coordinates are unknown."),
                        errhint("Use an SRID listed in spatial_ref_sys, or add the missing one.")));
    remember(srid, l.srs);
    return l.srs;
}

core::Srs srs_for_box(int32 srid, double xmin, double ymin, double xmax, double ymax) {
    if (srid == 0) return core::guess_unknown_srs(xmin, ymin, xmax, ymax);
    return srs_for(srid);
}

}  // namespace ot::ext
