// PostgreSQL's headers, included the one way this extension includes them.
// postgres.h must come first in every translation unit of src/ext.
#pragma once
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/timestamp.h"
}
