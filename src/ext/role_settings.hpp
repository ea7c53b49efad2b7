// The settings a role's sessions would start with in this database, as far as metering reads them:
// what autovacuum's charge to a table's owner (whose settings a worker never reads itself) and the
// check of who may own a table go by, and what throttle_role_settings() shows an operator.
#pragma once
#include "ext/pg.hpp"
#include "ext/settings.hpp"

namespace ot::ext {

// What neither the role nor the database sets is the server's.
struct RoleSettings {
    Mode mode;
    core::Budget budget;
    bool true_up;
    int cutoff_grace_ms;
    char identity[NAMEDATALEN * 2];  // empty: the role's name
};

// As a session of the role in this database would read them (reads the catalog).
RoleSettings role_settings(Oid role);

// Whether they charge anything: mode reject or delay, with true_up on.
inline bool settings_charge(const RoleSettings& s) {
    return s.mode != Mode::Off && s.mode != Mode::Log && s.true_up;
}

}  // namespace ot::ext
