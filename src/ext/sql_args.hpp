// Argument readers shared by the SQL functions (NULL is an error, never a
// pass), and the row shape they share.
#pragma once
#include "ext/hot.hpp"
#include <cstdint>

#include "ext/bucket_table.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "access/htup.h"
#include "access/tupdesc.h"
#include "miscadmin.h"
}

namespace ot::ext {

double arg_float8(FunctionCallInfo fcinfo, int n, const char* name);
int32 arg_int32(FunctionCallInfo fcinfo, int n, const char* name);
int64 arg_int64(FunctionCallInfo fcinfo, int n, const char* name);
IdentityKey arg_identity(FunctionCallInfo fcinfo, int n);
// The login role's key, its role and serial (own_identity()'s cache, read inline).
extern OT_LOCAL Oid own_identity_role;
extern OT_LOCAL IdentityKey own_identity_role_key;
extern OT_LOCAL std::uint64_t own_identity_role_serial;
const IdentityKey& own_identity_slow();
// The key own_identity() last returned, and the number of what was last written
// there: two keys with the same nonzero serial are the same identity, known
// without comparing their 64 bytes (an admission and a settlement each did).
extern OT_LOCAL const IdentityKey* own_identity_last;
extern OT_LOCAL std::uint64_t own_identity_serial;
// The caller's own identity: ogc_throttle.identity when a trusted role set it,
// else the session's login role (not a role taken with SET ROLE, nor a
// SECURITY DEFINER owner). A backend-local key, valid until the next call:
// every statement asks, so it is not copied on the way, and the usual answer
// (no ogc_throttle.identity, the login role's key already looked up) is
// inline; the rest is own_identity_slow()'s.
inline const IdentityKey& own_identity() {
    if (likely(identity_override() == nullptr) && likely(GetSessionUserId() == own_identity_role)) {
        own_identity_last = &own_identity_role_key;
        own_identity_serial = own_identity_role_serial;
        return own_identity_role_key;
    }
    return own_identity_slow();
}
// k's serial if k is own_identity()'s key, else 0 (unknown: compare).
inline std::uint64_t identity_serial(const IdentityKey& k) {
    return &k == own_identity_last ? own_identity_serial : 0;
}
// The same without a catalog lookup (outside a transaction): null when the
// login role's name has not been looked up yet.
const IdentityKey* own_identity_if_known();

// One row of the buckets shape (throttle_peek, throttle_buckets).
HeapTuple bucket_row(TupleDesc desc, const BucketView& v);

}  // namespace ot::ext
