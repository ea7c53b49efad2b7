#include "ext/boundary.hpp"

#include <cstdio>
#include <cstring>

namespace ot::ext {
namespace {
void copy(char* dst, size_t cap, const char* src) {
    if (src == nullptr) {
        dst[0] = '\0';
        return;
    }
    std::snprintf(dst, cap, "%s", src);
}
}  // namespace

ErrorSpec make_error(int sqlstate, const char* message, const char* detail, const char* hint) {
    ErrorSpec s;
    s.sqlstate = sqlstate;
    copy(s.message, sizeof s.message, message);
    copy(s.detail, sizeof s.detail, detail);
    copy(s.hint, sizeof s.hint, hint);
    return s;
}

void raise(const ErrorSpec& spec) {
    ereport(ERROR, (errcode(spec.sqlstate), errmsg_internal("%s", spec.message),
                    spec.detail[0] ? errdetail_internal("%s", spec.detail) : 0,
                    spec.hint[0] ? errhint("%s", spec.hint) : 0));
    pg_unreachable();
}

namespace detail {

ErrorSpec internal_error(const char* what) {
    return make_error(ERRCODE_INTERNAL_ERROR, "ogc_throttle: internal error", what, nullptr);
}

ErrorSpec out_of_memory() {
    return make_error(ERRCODE_OUT_OF_MEMORY, "ogc_throttle: out of memory");
}

}  // namespace detail
}  // namespace ot::ext
