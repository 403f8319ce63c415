/* ledger_sqlite_none.c - the file ledger of a library built without SQLite
 * (AH_WITH_SQLITE=OFF; ledger_sqlite.c and ledger_sqlite_writer.c are left out):
 * ah_ledger_open refuses, saying why, so a program asks for the memory ledger
 * (ah_ledger_new_memory) or Redis's instead. Nothing else changes. */
#ifdef AH_NO_SQLITE
#include "internal.h"
#include "ledger_internal.h"

ah_status ah_ledger_open(const char *path, ah_ledger **out, char *err, size_t errsize)
{
    (void)path;
    if (out)
        *out = NULL;
    if (err && errsize)
        ah__bufprintf(err, errsize,
                      "agenthost was built without SQLite (AH_WITH_SQLITE=OFF): no file "
                      "ledger; use the memory ledger or Redis's");
    return AH_ERR_INVALID;
}

void ah__ledger_sqlite_hold(ah_ledger *l, void (*fn)(void *ud), void *ud)
{
    (void)l, (void)fn, (void)ud;
}
#else
typedef int ah__ledger_sqlite_none_unused; /* built with SQLite: ledger_sqlite.c */
#endif
