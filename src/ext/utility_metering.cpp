#include "ext/execution.hpp"
#include "ext/hot.hpp"
#include "ext/density_grid.hpp"
#include "ext/hook.hpp"
#include "ext/metering.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/portal.h"
}

// Utility statements that do work of their own, outside the executor or
// around it, are metered as a statement is: refused while the bucket is in
// debt, timed, charged, cut off at their deadline. Without this, building and
// dropping an index on a temporary table, or a DO block's loop, is server time
// nobody pays for. The statements they run inside (CREATE TABLE AS's query,
// a DO block's SQL) are nested: their estimates join its deposit and its
// clock covers them. Transaction control, SET and the like are never refused:
// a session in debt must still be able to end its transaction and name its payer
// (COMMIT/ROLLBACK PREPARED are charged for their flush, commit_metering.cpp).
//
// Every other utility statement is refused while the bucket is in debt, as a
// statement's planning is, though only its message's meter times it: PREPARE
// analyses its query (a literal's input function, 56 ms for 200 000 points of
// WKT), CREATE VIEW too, CREATE EXTENSION runs a script, and each ran in debt
// at will (20 PREPAREs: 1 130 ms of CPU for a role 100 ms in debt).
namespace ot::ext {
namespace {

ProcessUtility_hook_type prev_utility = nullptr;
// prev_utility or PostgreSQL's own: the usual statement's tail call takes one pointer, without a test.
ProcessUtility_hook_type utility_next = standard_ProcessUtility;

// A cursor WITH HOLD was run to its end at COMMIT (metered then); from there
// on its FETCHes and MOVEs read the stored rows, never the executor: a SCROLL
// one could be re-read, rows sent and all, as often as asked for nothing. A
// cursor still in its transaction is metered by its executor passes.
bool reads_held_rows(const FetchStmt* f) {
    if (f->portalname == nullptr || f->portalname[0] == '\0') return false;
    const Portal portal = GetPortalByName(f->portalname);
    return PortalIsValid(portal) && portal->holdStore != nullptr && portal->queryDesc == nullptr;
}

// EXECUTE evaluates its parameters before anything is metered (neither
// planned nor priced): a function there ran for as long as it liked, before
// any admission. Only plain literals leave it to the statement's own meters.
bool evaluates_functions(const ExecuteStmt* x) {
    const ListCell* lc;
    foreach (lc, x->params)
        if (!IsA(lfirst(lc), A_Const)) return true;
    return false;
}

bool does_work(const Node* n) {
    switch (nodeTag(n)) {
        case T_IndexStmt:
        case T_ReindexStmt:
        case T_ClusterStmt:
        case T_VacuumStmt:  // and ANALYZE
        case T_RefreshMatViewStmt:
        case T_CreateTableAsStmt:  // and SELECT INTO
        case T_CopyStmt:
        case T_AlterTableStmt:  // may rewrite the table
        case T_CreateStatsStmt:
        case T_DoStmt:  // PL/pgSQL's simple expressions never reach the executor hooks
        case T_CallStmt: return true;
        case T_FetchStmt: return reads_held_rows(reinterpret_cast<const FetchStmt*>(n));
        case T_ExecuteStmt: return evaluates_functions(reinterpret_cast<const ExecuteStmt*>(n));
        // Fires the deferred triggers now, foreign-key checks included: built-in
        // code around their passes that nothing else would time.
        case T_ConstraintsSetStmt: return !reinterpret_cast<const ConstraintsSetStmt*>(n)->deferred;
        default: return false;
    }
}

struct UtilityCall {
    PlannedStmt* pstmt;
    const char* query;
    bool read_only_tree;
    ProcessUtilityContext context;
    ParamListInfo params;
    QueryEnvironment* env;
    DestReceiver* dest;
    QueryCompletion* qc;
};

inline void forward(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                    ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    if (prev_utility)
        prev_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    if (unlikely(IsA(pstmt->utilityStmt, VacuumStmt))) density_after_utility(pstmt);
}

void call_utility(void* arg) {
    const auto* c = static_cast<const UtilityCall*>(arg);
    forward(c->pstmt, c->query, c->read_only_tree, c->context, c->params, c->env, c->dest, c->qc);
}

// The statement's kind first: most utility statements do no work of their own.
bool metered_here(const PlannedStmt* pstmt) {
    return does_work(pstmt->utilityStmt) && metering_idle() && current_mode() != Mode::Off && true_up_enabled() &&
           !IsParallelWorker() && shared_memory_ready();
}

// What a session in debt may still do: end its transaction, name its payer or change its settings (SET,
// ALTER ROLE … SET), let go of what it holds (DEALLOCATE, CLOSE, DISCARD, UNLISTEN; DROP and TRUNCATE,
// which also end the upkeep autovacuum charges an owner for), and the statements metered elsewhere, whose
// meters refuse them while in debt: an EXECUTE's statement, a FETCH's pass, EXPLAIN's and DECLARE's planning.
inline bool never_refused(NodeTag tag) {
    switch (tag) {
        case T_DropStmt:
        case T_DropOwnedStmt:
        case T_TruncateStmt:
        case T_TransactionStmt:
        case T_VariableSetStmt:
        case T_AlterRoleSetStmt:
        case T_AlterDatabaseSetStmt:
        case T_VariableShowStmt:
        case T_ConstraintsSetStmt:
        case T_DeallocateStmt:
        case T_ClosePortalStmt:
        case T_DiscardStmt:
        case T_ListenStmt:
        case T_UnlistenStmt:
        case T_CheckPointStmt:
        case T_LoadStmt:
        case T_ExecuteStmt:
        case T_FetchStmt:
        case T_ExplainStmt:
        case T_DeclareCursorStmt: return true;
        default: return false;
    }
}

// Refuses (reject) or waits out (delay) a debt before a statement no meter times itself.
__attribute__((noinline)) void admit_unmetered_slow() {
    if (!metering_idle() || current_mode() == Mode::Off || !true_up_enabled() || IsParallelWorker() ||
        !IsTransactionState() || !shared_memory_ready())
        return;
    const IdentityKey& id = own_identity();
    (void)admit_unless_in_debt(id, usable_budget(), identity_serial(id), current_mode());
}

inline void admit_unmetered(const Node* stmt) {
    if (unlikely(!never_refused(nodeTag(stmt)))) admit_unmetered_slow();
}

bool finishes_prepared(const Node* n) {
    if (!IsA(n, TransactionStmt)) return false;
    const TransactionStmtKind k = reinterpret_cast<const TransactionStmt*>(n)->kind;
    return k == TRANS_STMT_COMMIT_PREPARED || k == TRANS_STMT_ROLLBACK_PREPARED;
}

// Statements whose lock conflicts with a vacuum's (ShareUpdateExclusiveLock): waiting for it, they cancel an
// autovacuum worker, whose abort reads the waiter's payer from shared memory (autovacuum_metering.cpp). A
// session's payer is published there at its commits that write; a DROP TABLE as its first statement had none.
// (It is read again at the charge when the table is gone by then: the commit that dropped it published it.)
inline bool may_cancel_autovacuum(NodeTag tag) {
    switch (tag) {
        case T_DropStmt:
        case T_DropOwnedStmt:
        case T_ReassignOwnedStmt:
        case T_CommentStmt:
        case T_SecLabelStmt:
        case T_CreatePolicyStmt:
        case T_AlterPolicyStmt:
        case T_CreatePublicationStmt:
        case T_AlterPublicationStmt:
        case T_AlterDomainStmt:
        case T_AlterTableMoveAllStmt:
        case T_TruncateStmt:
        case T_LockStmt:
        case T_RenameStmt:
        case T_CreateTrigStmt:
        case T_RuleStmt:
        case T_AlterObjectSchemaStmt:
        case T_AlterTableStmt:
        case T_IndexStmt:
        case T_ReindexStmt:
        case T_ClusterStmt:
        case T_VacuumStmt:
        case T_RefreshMatViewStmt:
        case T_CreateStatsStmt: return true;
        default: return false;
    }
}

// The kinds of statement this hook may do something for: does_work()'s,
// TransactionStmt (COMMIT/ROLLBACK PREPARED), LISTEN (the session then pays
// for its reading of the notification queue), NOTIFY (its commit may write the
// queue: notify_queued, execution.hpp), and those that give a table an
// owner (check_upkeep_owner), and those that may cancel an autovacuum worker.
// Every other kind (SET, BEGIN, ...) goes straight on by a tail call, with no
// frame of ours.
inline bool may_meter(NodeTag tag) {
    switch (tag) {
        case T_IndexStmt:
        case T_ReindexStmt:
        case T_ClusterStmt:
        case T_VacuumStmt:
        case T_RefreshMatViewStmt:
        case T_CreateTableAsStmt:
        case T_CopyStmt:
        case T_AlterTableStmt:
        case T_CreateStatsStmt:
        case T_DoStmt:
        case T_CallStmt:
        case T_FetchStmt:
        case T_ExecuteStmt:
        case T_ConstraintsSetStmt:
        case T_ListenStmt:
        case T_NotifyStmt:
        case T_CreateStmt:
        case T_ExplainStmt:
        case T_ReassignOwnedStmt:
        case T_TransactionStmt: return true;
        default: return may_cancel_autovacuum(tag);
    }
}

void on_utility_slow(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                     ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc);

OT_HOT void on_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                       ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    const Node* stmt = pstmt->utilityStmt;
    // (An EXECUTE of literals, the usual one, goes on here as well: its statement is metered.)
    if (likely(!may_meter(nodeTag(stmt)) ||
               (IsA(stmt, ExecuteStmt) && !evaluates_functions(reinterpret_cast<const ExecuteStmt*>(stmt))))) {
        admit_unmetered(stmt);
        return utility_next(pstmt, query, read_only_tree, context, params, env, dest, qc);
    }
    on_utility_slow(pstmt, query, read_only_tree, context, params, env, dest, qc);
}

__attribute__((noinline)) void on_utility_slow(PlannedStmt* pstmt, const char* query, bool read_only_tree,
                                               ProcessUtilityContext context, ParamListInfo params,
                                               QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    if (IsA(pstmt->utilityStmt, ListenStmt)) note_listening();
    if (IsA(pstmt->utilityStmt, NotifyStmt)) notify_queued = true;
    check_upkeep_owner(pstmt->utilityStmt);
    // (also whom a parallel index build's or VACUUM's workers charge, should its error stop them)
    if (may_cancel_autovacuum(nodeTag(pstmt->utilityStmt)) && current_mode() != Mode::Off && !IsParallelWorker() &&
        IsTransactionState() && shared_memory_ready()) {
        (void)own_identity();  // (the payer published is the one known: a first statement's is not yet)
        publish_payer();
    }
    const bool finishes = finishes_prepared(pstmt->utilityStmt);
    if (!finishes && !metered_here(pstmt)) {
        admit_unmetered(pstmt->utilityStmt);
        return forward(pstmt, query, read_only_tree, context, params, env, dest, qc);
    }
    UtilityCall c{pstmt, query, read_only_tree, context, params, env, dest, qc};
    if (finishes) return meter_finish_prepared(call_utility, &c);
    const IdentityKey id = own_identity();
    const core::Budget b = usable_budget();
    const Mode mode = current_mode();
    // Nothing to estimate: admitted unless the bucket is in debt.
    const double tokens_left = admit_further_pass(id, b, mode);
    Execution* e = open_execution(nullptr, id, b, mode, 0.0, 0.0, tokens_left, nullptr, 0);
    meter_pass(e, call_utility, &c);
    close_execution(e, true);
}

}  // namespace

void install_utility_metering() {
    prev_utility = ProcessUtility_hook;
    if (prev_utility) utility_next = prev_utility;
    ProcessUtility_hook = on_utility;
}

}  // namespace ot::ext
