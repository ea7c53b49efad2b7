#include "ext/catalog.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
}

namespace ot::ext {

Oid extension_schema(Oid ext) {
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
    SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, nullptr, 1, &key);
    HeapTuple tup = systable_getnext(scan);
    Oid schema = HeapTupleIsValid(tup) ? reinterpret_cast<Form_pg_extension>(GETSTRUCT(tup))->extnamespace : InvalidOid;
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return schema;
}

bool may_spend_for_others() {
    if (superuser()) return true;
    const Oid ext = get_extension_oid("ogc_throttle", true);
    if (!OidIsValid(ext)) return false;
    const Oid schema = extension_schema(ext);
    if (!OidIsValid(schema)) return false;
    // Looked up in the extension's own schema: a same-named function earlier in
    // the search_path must not grant anything.
    List* name = list_make2(makeString(get_namespace_name(schema)), makeString(pstrdup("throttle_spend")));
    Oid args[2] = {TEXTOID, FLOAT8OID};
    const Oid fn = LookupFuncName(name, 2, args, true);
    return OidIsValid(fn) && pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE) == ACLCHECK_OK;
}

}  // namespace ot::ext
