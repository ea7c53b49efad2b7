// Small catalog lookups PostgreSQL 15 does not export.
#pragma once
#include "ext/pg.hpp"

namespace ot::ext {

// Schema of an installed extension, or InvalidOid.
Oid extension_schema(Oid extension);

// Whether the current user may spend on any identity: a superuser, or a role
// with EXECUTE on this extension's throttle_spend(text, float8).
bool may_spend_for_others();

}  // namespace ot::ext
