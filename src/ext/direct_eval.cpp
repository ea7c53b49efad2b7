#include "ext/direct_eval.hpp"

extern "C" {
#include "nodes/nodeFuncs.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

// Deep enough for ST_Transform(ST_SetSRID(ST_MakePoint($1, $2), 4326), 3857).
constexpr int kMaxDepth = 6;
constexpr int kMaxArgs = 8;

// Backend-local, plain arrays: nothing here needs a destructor. The
// FmgrInfos live in their own context, so PostGIS's per-function caches
// (fn_extra) go with them when pg_proc changes.
struct FnCache {
    bool callback_registered;
    bool stale;
    MemoryContext cxt;
    int count;
    Oid fn[32];
    FmgrInfo info[32];
};
FnCache fns;

// Only marks: an invalidation can arrive inside a PostGIS function (its own
// catalogue lookups) that is using its fn_extra right then.
void invalidate(Datum, int, uint32) { fns.stale = true; }

FmgrInfo* function_info(Oid fn) {
    // Full: start over rather than grow (a handful of functions recur).
    if (fns.stale || fns.count == static_cast<int>(lengthof(fns.fn))) {
        fns.count = 0;
        fns.stale = false;
        if (fns.cxt != nullptr) MemoryContextReset(fns.cxt);
    }
    for (int i = 0; i < fns.count; i++)
        if (fns.fn[i] == fn) return &fns.info[i];
    if (!fns.callback_registered) {
        CacheRegisterSyscacheCallback(PROCOID, invalidate, 0);
        fns.callback_registered = true;
    }
    if (fns.cxt == nullptr)
        fns.cxt = AllocSetContextCreate(TopMemoryContext, "ogc_throttle functions", ALLOCSET_SMALL_SIZES);
    const int i = fns.count;
    fmgr_info_cxt(fn, &fns.info[i], fns.cxt);
    fns.fn[i] = fn;
    fns.count = i + 1;
    return &fns.info[i];
}

bool eval_node(Node* e, ParamListInfo params, Datum* out, bool* isnull, int depth);

// A call: every argument evaluated first, then the function through fmgr.
bool eval_call(Node* call, Oid fn, List* args, Oid collation, ParamListInfo params, Datum* out, bool* isnull,
               int depth) {
    const int nargs = list_length(args);
    if (nargs > kMaxArgs) return false;
    Datum values[kMaxArgs];
    bool nulls[kMaxArgs];
    bool any_null = false;
    int i = 0;
    ListCell* lc;
    foreach (lc, args) {
        if (!eval_node(static_cast<Node*>(lfirst(lc)), params, &values[i], &nulls[i], depth + 1)) return false;
        any_null |= nulls[i];
        i++;
    }
    FmgrInfo* flinfo = function_info(fn);
    if (flinfo->fn_retset) return false;
    if (flinfo->fn_strict && any_null) {
        *out = 0;
        *isnull = true;
        return true;
    }
    // What get_fn_expr_argtype() reads; the executor sets it once per call
    // site, this FmgrInfo serves every call site of the function.
    flinfo->fn_expr = call;
    LOCAL_FCINFO(fcinfo, kMaxArgs);
    InitFunctionCallInfoData(*fcinfo, flinfo, nargs, collation, nullptr, nullptr);
    for (i = 0; i < nargs; i++) {
        fcinfo->args[i].value = values[i];
        fcinfo->args[i].isnull = nulls[i];
    }
    *out = FunctionCallInvoke(fcinfo);
    *isnull = fcinfo->isnull;
    return true;
}

bool eval_node(Node* e, ParamListInfo params, Datum* out, bool* isnull, int depth) {
    if (e == nullptr || depth > kMaxDepth) return false;
    switch (nodeTag(e)) {
        case T_Const: {
            auto* c = reinterpret_cast<Const*>(e);
            *out = c->constvalue;
            *isnull = c->constisnull;
            return true;
        }
        case T_Param: return extern_param(reinterpret_cast<Param*>(e), params, out, isnull);
        case T_RelabelType:
            return eval_node(reinterpret_cast<Node*>(reinterpret_cast<RelabelType*>(e)->arg), params, out, isnull,
                             depth + 1);
        case T_FuncExpr: {
            auto* f = reinterpret_cast<FuncExpr*>(e);
            if (f->funcretset) return false;
            return eval_call(e, f->funcid, f->args, f->inputcollid, params, out, isnull, depth);
        }
        case T_OpExpr: {
            auto* o = reinterpret_cast<OpExpr*>(e);
            if (o->opretset) return false;
            set_opfuncid(o);
            return eval_call(e, o->opfuncid, o->args, o->inputcollid, params, out, isnull, depth);
        }
        default:
            return false;
    }
}

}  // namespace

bool direct_eval(Node* e, ParamListInfo params, Datum* out, bool* isnull) {
    return eval_node(e, params, out, isnull, 0);
}

}  // namespace ot::ext
