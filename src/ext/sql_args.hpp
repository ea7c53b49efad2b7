// Argument readers shared by the SQL functions: NULL is an error, never a pass.
#pragma once
#include "ext/bucket_table.hpp"

namespace ot::ext {

double arg_float8(FunctionCallInfo fcinfo, int n, const char* name);
int32 arg_int32(FunctionCallInfo fcinfo, int n, const char* name);
int64 arg_int64(FunctionCallInfo fcinfo, int n, const char* name);
IdentityKey arg_identity(FunctionCallInfo fcinfo, int n);
// The caller's own identity: ogc_throttle.identity when a trusted role set it,
// else the current role (not a SECURITY DEFINER owner).
IdentityKey own_identity();

}  // namespace ot::ext
