#include "ext/sql_args.hpp"

#include "ext/settings.hpp"

#include <cstring>

extern "C" {
#include "miscadmin.h"
#include "utils/builtins.h"
}

namespace ot::ext {
namespace {
void require_not_null(FunctionCallInfo fcinfo, int n, const char* name) {
    if (PG_ARGISNULL(n))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("ogc_throttle: %s must not be NULL", name),
                        errdetail("A NULL argument is never read as zero or as a free pass."),
                        errhint("Pass a value, or COALESCE the expression that produced the NULL.")));
}
}  // namespace

double arg_float8(FunctionCallInfo fcinfo, int n, const char* name) {
    require_not_null(fcinfo, n, name);
    return PG_GETARG_FLOAT8(n);
}

int32 arg_int32(FunctionCallInfo fcinfo, int n, const char* name) {
    require_not_null(fcinfo, n, name);
    return PG_GETARG_INT32(n);
}

int64 arg_int64(FunctionCallInfo fcinfo, int n, const char* name) {
    require_not_null(fcinfo, n, name);
    return PG_GETARG_INT64(n);
}

IdentityKey arg_identity(FunctionCallInfo fcinfo, int n) {
    require_not_null(fcinfo, n, "identity");
    text* t = PG_GETARG_TEXT_PP(n);
    return make_identity_key(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

// The login role's name is looked up once per session authorization, not per
// statement (a role renamed meanwhile keeps paying under its old name until then).
Oid own_identity_role = InvalidOid;
IdentityKey own_identity_role_key;
std::uint64_t own_identity_role_serial = 0;

const IdentityKey* own_identity_last = nullptr;
std::uint64_t own_identity_serial = 0;

namespace {
std::uint64_t serials = 0;  // numbers every key written below
}  // namespace

const IdentityKey& own_identity_slow() {
    if (const char* id = identity_override()) {
        // Read again only when the setting was assigned since (SET, RESET, a
        // transaction's end undoing a SET LOCAL all assign it).
        static IdentityKey chosen;
        static std::uint64_t chosen_generation = 0;
        static bool chosen_valid = false;
        static std::uint64_t chosen_serial = 0;
        if (!chosen_valid || chosen_generation != identity_generation()) {
            chosen_valid = false;  // make_identity_key may raise an error
            chosen = make_identity_key(id, std::strlen(id));
            chosen_generation = identity_generation();
            chosen_valid = true;
            chosen_serial = ++serials;
        }
        own_identity_last = &chosen;
        own_identity_serial = chosen_serial;
        return chosen;
    }
    // The login role: SET ROLE to a group role does not open a second budget.
    const Oid role = GetSessionUserId();
    if (role != own_identity_role) {
        const char* name = GetUserNameFromId(role, false);
        own_identity_role_key = make_identity_key(name, std::strlen(name));
        own_identity_role = role;
        own_identity_role_serial = ++serials;
    }
    own_identity_last = &own_identity_role_key;
    own_identity_serial = own_identity_role_serial;
    return own_identity_role_key;
}

const IdentityKey* own_identity_if_known() {
    if (identity_override() != nullptr) return &own_identity();
    return GetSessionUserId() == own_identity_role ? &own_identity_role_key : nullptr;
}

}  // namespace ot::ext
