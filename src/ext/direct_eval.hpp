// Evaluating a pricing argument without the executor, for the shapes that
// make up nearly all of them: constants, $n parameters, binary-compatible
// relabels, and non-volatile function or operator calls over those
// (ST_Expand(point, r) in a derived index condition, ST_SetSRID(
// ST_MakePoint($1, $2), 4326) in a generic plan). The functions are called
// through fmgr with FmgrInfo cached per backend: building an ExprState and
// an ExprContext per argument (ExecInitExpr) cost more instructions than
// pricing the rest of the statement.
#pragma once
#include "ext/pg.hpp"

extern "C" {
#include "nodes/params.h"
#include "nodes/primnodes.h"
}

namespace ot::ext {

// Whether `e` is of those shapes (the caller has checked it is Var-free and
// non-volatile); if so, its value is in *out / *isnull, allocated in the
// current memory context. False: use the executor. Errors raised by the
// called functions propagate as they would at execution.
bool direct_eval(Node* e, ParamListInfo params, Datum* out, bool* isnull);

// A $n parameter's value, read from a plain parameter array (false: a paramFetch hook's, as
// PL/pgSQL's, or another kind of parameter: the executor's business).
inline bool extern_param(const Param* p, ParamListInfo params, Datum* out, bool* isnull) {
    if (p->paramkind != PARAM_EXTERN || params == nullptr || params->paramFetch != nullptr) return false;
    if (p->paramid < 1 || p->paramid > params->numParams) return false;
    const ParamExternData* prm = &params->params[p->paramid - 1];
    if (prm->ptype != p->paramtype) return false;
    *out = prm->value;
    *isnull = prm->isnull;
    return true;
}

}  // namespace ot::ext
