#include "ext/settings.hpp"

#include "ext/pg.hpp"

#include <cstring>

#include "ext/bucket_table.hpp"
#include "ext/catalog.hpp"
#include "ext/density_shared.hpp"
#include "ext/samples.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/guc.h"
}

namespace ot::ext {

int setting_max_identities = 100000;
int setting_max_identity_stats = 10000;
bool setting_save = true;
bool setting_charge_connection = true;
bool setting_charge_autovacuum = true;
double setting_dirty_block_cost = 0.005;
double setting_wal_send_cost = 0.0005;
double setting_wal_decode_cost = 0.012;
double setting_wal_archive_cost = 0.001;
int setting_max_samples = 10000;
bool setting_calibration_samples = true;
bool setting_lazy_pricing = true;
int setting_lazy_sample_every = 16;

// Read inline through settings.hpp's accessors (every statement reads them).
namespace guc {
int mode = static_cast<int>(Mode::Off);
bool true_up = true;
int cutoff_grace = 1000;
char* identity = nullptr;
std::uint64_t identity_assignments = 0;
double capacity = 1000.0;
double rate = 50.0;
}  // namespace guc
using guc::capacity;
using guc::cutoff_grace;
using guc::identity;
using guc::identity_assignments;
using guc::mode;
using guc::rate;
using guc::true_up;

namespace {

int calibration = 0;  // 0 off, 1 apply
const struct config_enum_entry calibration_options[] = {
    {"off", 0, false},
    {"apply", 1, false},
    {nullptr, 0, false},
};
int max_delay_ms = 5000;

const struct config_enum_entry mode_options[] = {
    {"off", static_cast<int>(Mode::Off), false},
    {"log", static_cast<int>(Mode::Log), false},
    {"delay", static_cast<int>(Mode::Delay), false},
    {"reject", static_cast<int>(Mode::Reject), false},
    {nullptr, 0, false},
};

// Bumped whenever the identity setting is assigned (SET, RESET, a rollback
// that restores it): who pays may have changed.
void assign_identity(const char*, void*) { identity_assignments++; }

// The postmaster's values (the configuration file's, ALTER SYSTEM's, the command line's), kept as
// it assigns them at start and at each reload; a forked backend inherits them as they were at
// its fork and never assigns them. An autovacuum worker's own values are the bootstrap
// superuser's session values, that role's ALTER ROLE … SET included.
ServerSettings server_values{Mode::Off, {1000.0, 50.0}, true, 1000};
void assign_server_mode(int v, void*) {
    if (!IsUnderPostmaster) server_values.mode = static_cast<Mode>(v);
}
void assign_server_capacity(double v, void*) {
    if (!IsUnderPostmaster) server_values.budget.capacity = v;
}
void assign_server_rate(double v, void*) {
    if (!IsUnderPostmaster) server_values.budget.rate = v;
}
void assign_server_true_up(bool v, void*) {
    if (!IsUnderPostmaster) server_values.true_up = v;
}
void assign_server_grace(int v, void*) {
    if (!IsUnderPostmaster) server_values.cutoff_grace_ms = v;
}

// Anyone may set the identity to empty (their own role). Any other value is
// an identity of someone else's, which only roles trusted to spend for others
// may choose — also when it comes from ALTER ROLE/DATABASE SET, which a role
// can run on itself, or from the connection's options.
bool check_identity(char** newval, void**, GucSource source) {
    if (*newval == nullptr || (*newval)[0] == '\0') return true;
    if (std::strlen(*newval) > static_cast<size_t>(kIdentityMax)) {
        GUC_check_errdetail("An identity is at most %d bytes.", kIdentityMax);
        return false;
    }
    switch (source) {
        case PGC_S_DEFAULT:
        case PGC_S_DYNAMIC_DEFAULT:
        case PGC_S_ENV_VAR:
        case PGC_S_FILE:
        case PGC_S_ARGV:
        case PGC_S_GLOBAL:
        case PGC_S_OVERRIDE:
        case PGC_S_TEST:
            return true;  // set by the administrator, or only being validated
        default:
            break;
    }
    if (!IsTransactionState()) {
        GUC_check_errdetail("Privileges cannot be checked outside a transaction.");
        return false;
    }
    if (!may_spend_for_others()) {
        GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
        GUC_check_errdetail("Only roles allowed to execute throttle_spend(text, float8) may choose who pays.");
        GUC_check_errhint("An administrator can GRANT EXECUTE ON FUNCTION throttle_spend(text, float8) to a trusted pooler role.");
        return false;
    }
    return true;
}

double cost_max = 500.0;
double density = 10.0;
double tile_max_rows = 50000.0;

struct WeightGuc {
    core::CostClass cls;
    const char* fixed_name;  // nullptr: the class has no such term (the plan walk counts none)
    const char* row_name;
    const char* fixed_desc;
    const char* row_desc;
    double fixed;
    double per_row;
};

// Only the classes the database prices; map and coverage belong to the gate.
// The plan classes (scan … worker) are what the pricing hook's plan walk
// counts (doc/cost-model.md); calibration fits the same weights.
WeightGuc weight_gucs[] = {
    {core::CostClass::Bbox, "ogc_throttle.bbox_fixed_cost", "ogc_throttle.bbox_row_cost",
     "Fixed cost per request of this class.", "Cost per estimated row of this class.", 0, 0},
    {core::CostClass::Radius, "ogc_throttle.radius_fixed_cost", "ogc_throttle.radius_row_cost",
     "Fixed cost per request of this class.", "Cost per estimated row of this class.", 0, 0},
    {core::CostClass::Features, "ogc_throttle.features_fixed_cost", "ogc_throttle.features_row_cost",
     "Fixed cost per request of this class.", "Cost per estimated row of this class.", 0, 0},
    {core::CostClass::Tile, "ogc_throttle.tile_fixed_cost", "ogc_throttle.tile_row_cost",
     "Fixed cost per request of this class.", "Cost per estimated row of this class.", 0, 0},
    {core::CostClass::Scan, "ogc_throttle.scan_fixed_cost", "ogc_throttle.scan_row_cost",
     "Milliseconds per scan a plan starts.", "Milliseconds per row a scan reads.", 0, 0},
    {core::CostClass::Join, "ogc_throttle.join_fixed_cost", "ogc_throttle.join_row_cost",
     "Milliseconds per nested-loop probe (inner re-scan).",
     "Milliseconds per row through a join, sort, hash or aggregate.", 0, 0},
    {core::CostClass::Encode, nullptr, "ogc_throttle.encode_row_cost", nullptr,
     "Milliseconds per row encoded (MVT geometry, GeoJSON, text, reprojection).", 0, 0},
    {core::CostClass::Distance, nullptr, "ogc_throttle.distance_row_cost", nullptr,
     "Milliseconds per exact geography test of a row read (a geometry test counts a tenth).", 0, 0},
    {core::CostClass::Worker, "ogc_throttle.worker_fixed_cost", nullptr,
     "Milliseconds per parallel worker a statement launches.", nullptr, 0, 0},
    {core::CostClass::Function, nullptr, "ogc_throttle.function_row_cost", nullptr,
     "Milliseconds per row and unit of declared cost (pg_proc.procost) of a function no other class prices.", 0,
     0},
    // Its per-row weight is per plan node: the GUC says so in its name.
    {core::CostClass::Statement, "ogc_throttle.statement_fixed_cost", "ogc_throttle.statement_node_cost",
     "Milliseconds every priced statement costs however small (executor start-up and shut-down).",
     "Milliseconds per node of a priced statement's plan (each is initialised and ended once).", 0, 0},
    {core::CostClass::Page, nullptr, "ogc_throttle.page_cost", nullptr,
     "Milliseconds per heap page an index or bitmap scan fetches.", 0, 0},
    {core::CostClass::Output, nullptr, "ogc_throttle.output_row_cost", nullptr,
     "Milliseconds per row a statement returns (its columns' output functions and sending).", 0, 0},
};

void define_real(const char* name, const char* desc, double* var, double min, double max, GucContext ctx,
                 GucRealAssignHook assign = nullptr) {
    DefineCustomRealVariable(name, desc, nullptr, var, *var, min, max, ctx, 0, nullptr, assign, nullptr);
}

// current_cost_model's copy: every priced statement asks for it, and building it from ~30 settings
// and the fitted weights (a spinlock) each time was ~300 instructions a statement. Marked stale by
// the assign hook of each setting it is made of, which PostgreSQL also calls when SET LOCAL ends or
// a rollback restores a value.
bool model_stale = true;
core::CostModel model;
uint64 model_generation = 0;  // fitted_generation() when model was made
void assign_model_real(double, void*) { model_stale = true; }
void assign_model_enum(int, void*) { model_stale = true; }

}  // namespace

void define_settings() {
    // Sizes of shared tables exist only when preloading: defining a postmaster
    // setting later is a FATAL error in PostgreSQL.
    if (process_shared_preload_libraries_in_progress) {
        DefineCustomIntVariable("ogc_throttle.max_identities",
                                "Number of identities the shared bucket table holds.",
                                "Sized at server start; when full, full buckets are evicted first.",
                                &setting_max_identities, setting_max_identities, 100, 50000000, PGC_POSTMASTER, 0,
                                nullptr, nullptr, nullptr);
        DefineCustomIntVariable("ogc_throttle.max_identity_stats",
                                "Identities whose pricing-hook statistics are kept (0: none).",
                                "When full, the least recently active identity's statistics are forgotten.",
                                &setting_max_identity_stats, setting_max_identity_stats, 0, 10000000, PGC_POSTMASTER, 0,
                                nullptr, nullptr, nullptr);
        DefineCustomIntVariable("ogc_throttle.max_samples",
                                "Priced statements whose features and measured time are kept for calibration (0: none).",
                                "A shared ring: the oldest sample is overwritten first.", &setting_max_samples,
                                setting_max_samples, 0, 10000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
        DefineCustomIntVariable("ogc_throttle.density_shared_memory",
                                "Shared memory for density grids, one copy for every backend (0: each backend "
                                "reads and keeps its own).",
                                "Sized at server start (at least 128 kB); when full, the least recently used grid "
                                "no transaction is reading is evicted, and a grid that does not fit is read by "
                                "each backend itself.",
                                &setting_density_shared_kb, setting_density_shared_kb, 0, 16 * 1024 * 1024,
                                PGC_POSTMASTER, GUC_UNIT_KB, nullptr, nullptr, nullptr);
    }
    DefineCustomEnumVariable("ogc_throttle.calibration", "Whether weights fitted from measured times are used.",
                             "off: the weights set by the administrator; apply: weights refitted from the samples "
                             "(every tenth of the store, at least every 1000 statements) replace them for every "
                             "class the samples show.",
                             &calibration, calibration, calibration_options, PGC_SIGHUP, 0, nullptr, assign_model_enum,
                             nullptr);
    // Superuser-only and set per role: a throttled client could otherwise feed the fit statements
    // that take far longer than their features say (a pg_sleep beside a search) and raise every
    // other client's estimates with its own.
    DefineCustomBoolVariable("ogc_throttle.calibration_samples", "Whether this session's statements leave calibration samples.",
                             "off (ALTER ROLE ... SET, superuser): the role's statements are charged as always but "
                             "cannot steer the fitted weights.",
                             &setting_calibration_samples, setting_calibration_samples, PGC_SUSET, 0, nullptr, nullptr,
                             nullptr);
    DefineCustomBoolVariable("ogc_throttle.save", "Save bucket state across clean server shutdowns.", nullptr,
                             &setting_save, setting_save, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    // Budgets and prices are superuser-only: the role being throttled must not set its own.
    define_real("ogc_throttle.capacity", "Bucket capacity (burst) in milliseconds of server time.", &capacity, 0.001, 1e9, PGC_SUSET,
                assign_server_capacity);
    define_real("ogc_throttle.rate", "Bucket refill in milliseconds of server time per second (1000 = one core).", &rate, 0.01, 1e9, PGC_SUSET,
                assign_server_rate);
    define_real("ogc_throttle.cost_max", "Every estimate is clamped to this many milliseconds.", &cost_max, 0.001, 1e12,
                PGC_SUSET, assign_model_real);
    define_real("ogc_throttle.density", "Rows per square kilometre assumed where nothing better is known.", &density,
                0, 1e12, PGC_SUSET, assign_model_real);
    define_real("ogc_throttle.tile_max_rows", "Rows a tile query without LIMIT is assumed to return at most.",
                &tile_max_rows, 0, 1e12, PGC_SUSET, assign_model_real);

    const core::CostModel defaults = core::default_cost_model();
    for (WeightGuc& w : weight_gucs) {
        w.fixed = defaults.of(w.cls).fixed;
        w.per_row = defaults.of(w.cls).per_row;
        if (w.fixed_name != nullptr)
            define_real(w.fixed_name, w.fixed_desc, &w.fixed, 0, 1e12, PGC_SUSET, assign_model_real);
        if (w.row_name != nullptr)
            define_real(w.row_name, w.row_desc, &w.per_row, 0, 1e12, PGC_SUSET, assign_model_real);
    }

    DefineCustomEnumVariable("ogc_throttle.mode", "What the pricing hook does with priced statements.",
                             "off: nothing; log: price and log, charge nothing; delay: wait for tokens up to "
                             "ogc_throttle.max_delay; reject: refuse when short.",
                             &mode, mode, mode_options, PGC_SUSET, 0, nullptr, assign_server_mode, nullptr);
    DefineCustomIntVariable("ogc_throttle.max_delay", "Longest wait for tokens in delay mode.", nullptr, &max_delay_ms,
                            max_delay_ms, 0, 3600 * 1000, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
    DefineCustomBoolVariable("ogc_throttle.true_up", "Charge measured executor time instead of the estimate.",
                             "on: the estimate admits the statement and is settled against the milliseconds it "
                             "measurably used (the bucket may go into debt); off: the estimate is the charge.",
                             &true_up, true_up, PGC_SUSET, 0, nullptr, assign_server_true_up, nullptr);
    DefineCustomIntVariable("ogc_throttle.cutoff_grace",
                            "How far past its budget a statement may run before it is cancelled (-1: never).",
                            "In reject and delay modes a statement is cancelled with SQLSTATE 53T01 once it has "
                            "run longer than the tokens its bucket held when it started, plus this grace.",
                            &cutoff_grace, cutoff_grace, -1, 3600 * 1000, PGC_SUSET, GUC_UNIT_MS, nullptr,
                            assign_server_grace, nullptr);
    DefineCustomBoolVariable("ogc_throttle.lazy_pricing",
                             "Price a statement only when its bucket may not hold twice ogc_throttle.cost_max.",
                             "on: a statement admitted while its bucket holds twice cost_max or more (no estimate could "
                             "refuse or delay it) is not priced; cost_max is deposited while it runs and its "
                             "measured time charged, as always. One in ogc_throttle.lazy_sample_every is priced "
                             "anyway, for calibration.",
                             &setting_lazy_pricing, setting_lazy_pricing, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("ogc_throttle.lazy_sample_every",
                            "With lazy_pricing, price one in this many of the statements it could admit unpriced.",
                            "0: none. The priced ones leave the calibration samples and the estimates the "
                            "statistics show.",
                            &setting_lazy_sample_every, setting_lazy_sample_every, 0, 1000000, PGC_SUSET, 0, nullptr,
                            nullptr, nullptr);
    DefineCustomBoolVariable("ogc_throttle.charge_connection",
                             "Charge a new session the server CPU time its connection took to set up.",
                             "Fork, authentication (SCRAM's iterations), catalog caches and the role's settings: "
                             "a few milliseconds a connection, where a statement may cost a hundredth of that.",
                             &setting_charge_connection, setting_charge_connection, PGC_SUSET, 0, nullptr, nullptr,
                             nullptr);
    // (SIGHUP: a worker runs as the bootstrap superuser, whose own settings must not exempt every owner.)
    DefineCustomBoolVariable("ogc_throttle.charge_autovacuum",
                             "Charge a table's owner the time autovacuum spends on the table.",
                             "Each transaction in which an autovacuum worker holds the table's maintenance lock "
                             "(its VACUUM, ANALYZE, TOAST table, BRIN summarization), charged, never refused.",
                             &setting_charge_autovacuum, setting_charge_autovacuum, PGC_SIGHUP, 0, nullptr, nullptr,
                             nullptr);
    // (SIGHUP: what a page's write costs is the server's, as are autovacuum's workers, charged it too.)
    DefineCustomRealVariable("ogc_throttle.dirty_block_cost",
                             "Milliseconds charged per shared buffer a metered session or autovacuum leaves dirty.",
                             "The checkpointer or the background writer writes such a buffer later, in time no "
                             "session's meter sees; buffers the process wrote out itself are not charged. 0: none.",
                             &setting_dirty_block_cost, setting_dirty_block_cost, 0, 1000, PGC_SIGHUP, 0, nullptr,
                             nullptr, nullptr);
    // (SIGHUP: the standbys, subscribers and archiving are the server's.)
    DefineCustomRealVariable("ogc_throttle.wal_send_cost",
                             "Milliseconds charged per kB of WAL a metered session or autovacuum writes, for each "
                             "walsender streaming it.",
                             "Its reading and sending is in time no session's meter sees. 0: none.",
                             &setting_wal_send_cost, setting_wal_send_cost, 0, 1000, PGC_SIGHUP, 0, nullptr, nullptr,
                             nullptr);
    DefineCustomRealVariable("ogc_throttle.wal_decode_cost",
                             "Milliseconds charged per WAL record a metered session or autovacuum writes, for each "
                             "logical walsender of its database.",
                             "A logical walsender decodes every record of its database, published or not. 0: none.",
                             &setting_wal_decode_cost, setting_wal_decode_cost, 0, 1000, PGC_SIGHUP, 0, nullptr,
                             nullptr, nullptr);
    DefineCustomRealVariable("ogc_throttle.wal_archive_cost",
                             "Milliseconds charged per kB of WAL a metered session or autovacuum writes, when "
                             "archiving is on.",
                             "What archive_command spends on a segment, per kB (a cp: 0.8 µs; compression and "
                             "upload far more). 0: none.",
                             &setting_wal_archive_cost, setting_wal_archive_cost, 0, 1000, PGC_SIGHUP, 0, nullptr,
                             nullptr, nullptr);
    DefineCustomStringVariable("ogc_throttle.identity", "Who pays for this session's statements (default: the role).",
                               "Only roles trusted to spend for others may set it.", &identity, "", PGC_USERSET, 0,
                               check_identity, assign_identity, nullptr);

    MarkGUCPrefixReserved("ogc_throttle");
}


const ServerSettings& server_settings() { return server_values; }

bool mode_named(const char* value, Mode* out) {
    for (const config_enum_entry* e = mode_options; e->name != nullptr; e++)
        if (pg_strcasecmp(e->name, value) == 0) {
            *out = static_cast<Mode>(e->val);
            return true;
        }
    return false;
}

double current_cost_max() { return cost_max; }

std::int64_t max_delay_us() { return static_cast<int64>(max_delay_ms) * 1000; }

bool calibration_applies() { return calibration == 1; }

const core::CostModel& current_cost_model() {
    const bool calibrated = calibration_applies();
    if (!model_stale && (!calibrated || fitted_generation() == model_generation)) return model;
    // The generation before the weights: a fit stored in between is taken again next time.
    model_generation = fitted_generation();
    model = configured_cost_model();
    model_stale = false;
    if (!calibrated) return model;
    const FittedWeights f = fitted_load();
    if (!f.valid) return model;
    for (int c = 0; c < core::kCostClasses; c++)
        if (f.fitted_class[c]) model.weights[c] = f.weights[c];
    return model;
}

core::CostModel configured_cost_model() {
    core::CostModel m = core::default_cost_model();
    for (const WeightGuc& w : weight_gucs) {
        m.of(w.cls).fixed = w.fixed;
        m.of(w.cls).per_row = w.per_row;
    }
    m.density_per_km2 = density;
    m.tile_max_rows = tile_max_rows;
    m.cost_max = cost_max;
    return m;
}

}  // namespace ot::ext
