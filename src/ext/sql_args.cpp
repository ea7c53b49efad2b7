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

namespace {
// The login role's name is looked up once per session authorization, not per
// statement (a role renamed meanwhile keeps paying under its old name until then).
Oid cached_role = InvalidOid;
IdentityKey cached;
}  // namespace

const IdentityKey* own_identity_last = nullptr;
std::uint64_t own_identity_serial = 0;

namespace {
std::uint64_t serials = 0;  // numbers every key written below
std::uint64_t cached_serial = 0;
}  // namespace

const IdentityKey& own_identity() {
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
    if (role != cached_role) {
        const char* name = GetUserNameFromId(role, false);
        cached = make_identity_key(name, std::strlen(name));
        cached_role = role;
        cached_serial = ++serials;
    }
    own_identity_last = &cached;
    own_identity_serial = cached_serial;
    return cached;
}

const IdentityKey* own_identity_if_known() {
    if (identity_override() != nullptr) return &own_identity();
    return GetSessionUserId() == cached_role ? &cached : nullptr;
}

}  // namespace ot::ext
