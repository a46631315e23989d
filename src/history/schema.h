// The history store's schema (PRAGMA user_version) and the ladder of migrations that brings any
// older store to the current one.
#pragma once

#include <functional>

#include "history/sqlite_db.h"

namespace gemlet::history {

// 1: conversations and messages. 2: system message, model and update time of a conversation; a
// message's place (seq) and role check; the search index; the meta table (encryption).
inline constexpr int kSchemaVersion = 2;

// Runs the migrations from `from` (0: an empty file) to kSchemaVersion in one transaction, and
// `before_commit` (if any) last in it: a crash or an error leaves the store as it was.
Status Migrate(Db& db, int from, const std::function<Status()>& before_commit = {});

}  // namespace gemlet::history
