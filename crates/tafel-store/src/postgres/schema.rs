//! The database schema, brought to [`SCHEMA_VERSION`] on start by the first node
//! to get there ([`super::migrate`]), and the SQL every operation runs. Only what
//! PostgreSQL, CockroachDB and YugabyteDB all accept (docs/scale-out.md checks each
//! statement): plain tables, `bytea`, `ON CONFLICT`, `= ANY`, `UNNEST`,
//! `LEFT JOIN LATERAL`, `ORDER BY … LIMIT`.
//!
//! Invariants:
//! - `tafel_tables` holds one row per table, keyed by account and the name's ASCII
//!   lowercase bytes (lookups ignore case); `name` keeps the bytes as created and
//!   orders the listing (bytea compares bytewise: ordinal order).
//! - A table's `id` is random and unique; its entities live under `(id, key)`.
//! - A deleted table keeps its row, marked `deleting`, until its entities are gone:
//!   every lookup skips it (the table is gone at once), its name stays taken (a
//!   create answers TableBeingDeleted, as Azure does) and its id cannot be drawn
//!   again, so a table re-created under the same name never sees old rows. No write
//!   reaches a marked table: writes hold its row FOR SHARE, which the mark waits for.
//! - Entity keys are `EntityKey` bytes, whose memcmp order is Azure's order, which
//!   is exactly bytea's order.

/// The statements that bring a database to each schema version, in order: entry
/// `i` makes version `i + 1`. Each is idempotent (`IF NOT EXISTS`), so one cut
/// short by a crash is simply run again ([`super::migrate`]).
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the tables.
    "
CREATE TABLE IF NOT EXISTS tafel_tables (
    account TEXT NOT NULL,
    lname BYTEA NOT NULL,
    name BYTEA NOT NULL,
    id BIGINT NOT NULL UNIQUE,
    acl BYTEA NOT NULL,
    PRIMARY KEY (account, lname)
);
CREATE UNIQUE INDEX IF NOT EXISTS tafel_tables_by_name ON tafel_tables (account, name);
CREATE TABLE IF NOT EXISTS tafel_entities (
    table_id BIGINT NOT NULL,
    key BYTEA NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (table_id, key)
);
CREATE TABLE IF NOT EXISTS tafel_service_properties (
    account TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
",
    // 2: tables being deleted keep their row (and name) until their entities are gone.
    "ALTER TABLE tafel_tables ADD COLUMN IF NOT EXISTS deleting BOOLEAN NOT NULL DEFAULT false;",
    // 3: the change feed (`feed.rs`): each account's last position, and its changes.
    "
CREATE TABLE IF NOT EXISTS tafel_feed_heads (
    account TEXT PRIMARY KEY,
    head BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS tafel_changes (
    account TEXT NOT NULL,
    position BIGINT NOT NULL,
    txn BIGINT NOT NULL,
    time_ns BIGINT NOT NULL,
    op SMALLINT NOT NULL,
    tbl BYTEA NOT NULL,
    ltbl BYTEA NOT NULL,
    key BYTEA,
    value BYTEA,
    PRIMARY KEY (account, position)
);
",
    // 4: each table's counters (`counts.rs`): rows of changes, summed on read and
    // folded together by the reaper; the tables already there counted once.
    "
CREATE TABLE IF NOT EXISTS tafel_table_counts (
    table_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    entities BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    PRIMARY KEY (table_id, id)
);
INSERT INTO tafel_table_counts (table_id, id, entities, bytes)
    SELECT table_id, 0, count(*), sum(octet_length(key) + octet_length(value)) FROM tafel_entities
    GROUP BY table_id
    ON CONFLICT (table_id, id) DO NOTHING;
",
    // 5: deleted tables kept restorable (`deleted.rs`): their rows moved here; their
    // entities and counters stay under their ids.
    "
CREATE TABLE IF NOT EXISTS tafel_deleted_tables (
    account TEXT NOT NULL,
    id BIGINT PRIMARY KEY,
    name BYTEA NOT NULL,
    acl BYTEA NOT NULL,
    deleted_ns BIGINT NOT NULL,
    until_ns BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS tafel_deleted_tables_by_account ON tafel_deleted_tables (account, deleted_ns);
",
    // 6: operator records (`records.rs`): purge jobs and the like, seen by every
    // node; `owner` and `lease_until` (ms, the database's clock) say which node
    // works one, until it stops renewing.
    "
CREATE TABLE IF NOT EXISTS tafel_records (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    value BYTEA NOT NULL,
    owner TEXT,
    lease_until BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, id)
);
",
    // 7: secondary indexes (`index.rs`): each table's indexed properties in its
    // row (every write reads them from the row it locks), their definitions and
    // their entries, keyed so that a value range then key order is one range scan.
    "
ALTER TABLE tafel_tables ADD COLUMN IF NOT EXISTS indexes TEXT[] NOT NULL DEFAULT '{}';
CREATE TABLE IF NOT EXISTS tafel_indexes (
    table_id BIGINT NOT NULL,
    property TEXT NOT NULL,
    ready BOOLEAN NOT NULL,
    build_after BYTEA,
    done BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (table_id, property)
);
CREATE TABLE IF NOT EXISTS tafel_index_entries (
    table_id BIGINT NOT NULL,
    property TEXT NOT NULL,
    value BYTEA NOT NULL,
    key BYTEA NOT NULL,
    PRIMARY KEY (table_id, property, value, key)
);
",
];

/// The schema version this node knows: it migrates older databases to it and
/// refuses newer ones.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(crate) const GET_TABLE: &str =
    "SELECT name, acl FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting";
pub(crate) const COUNT_TABLES: &str = "SELECT count(*) FROM tafel_tables WHERE account = $1 AND NOT deleting";
pub(crate) const CREATE_TABLE: &str =
    "INSERT INTO tafel_tables (account, lname, name, id, acl) VALUES ($1, $2, $3, $4, '')
     ON CONFLICT (account, lname) DO NOTHING";
/// A create that inserted nothing: whether the name's table is being deleted.
pub(crate) const TABLE_DELETING: &str = "SELECT deleting FROM tafel_tables WHERE account = $1 AND lname = $2";
/// Deleting a table marks it (one short statement, whatever its size); its
/// entities go in chunks ([`super::reaper`]), then its row and its name.
pub(crate) const MARK_DELETING: &str =
    "UPDATE tafel_tables SET deleting = true WHERE account = $1 AND lname = $2 AND NOT deleting RETURNING id";
/// Tables waiting for their entities to go, for the reaper.
pub(crate) const DELETING_TABLES: &str = "SELECT id FROM tafel_tables WHERE deleting LIMIT 64";
/// One bounded chunk of a deleted table's entities after key `$2` (a short
/// transaction of its own): how many went, and the last. Each chunk starts where
/// the one before ended, never again from the table's first key, where the index
/// holds the dead entries of every chunk deleted before until a vacuum.
pub(crate) const DELETE_CHUNK: &str = "WITH gone AS (DELETE FROM tafel_entities WHERE table_id = $1 AND key IN
         (SELECT key FROM tafel_entities WHERE table_id = $1 AND key > $2 ORDER BY key LIMIT $3)
         RETURNING key)
     SELECT (SELECT count(*) FROM gone), (SELECT key FROM gone ORDER BY key DESC LIMIT 1)";
/// The same, for the table a delete just marked, found by its name.
pub(crate) const DELETE_CHUNK_NAMED: &str = "DELETE FROM tafel_entities WHERE table_id =
     (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND deleting) AND key IN
     (SELECT key FROM tafel_entities WHERE table_id =
         (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND deleting)
      ORDER BY key LIMIT $3)";
/// A deleted table's row, once no entity of it is left: its name is free again.
/// Its index entries gone too (`index.rs`), so no id outlives its entries.
pub(crate) const DROP_EMPTY: &str = "DELETE FROM tafel_tables WHERE id = $1 AND deleting
     AND NOT EXISTS (SELECT 1 FROM tafel_entities WHERE table_id = $1)
     AND NOT EXISTS (SELECT 1 FROM tafel_index_entries WHERE table_id = $1)";
pub(crate) const DROP_EMPTY_NAMED: &str = "DELETE FROM tafel_tables WHERE account = $1 AND lname = $2 AND deleting
     AND NOT EXISTS (SELECT 1 FROM tafel_entities WHERE table_id = tafel_tables.id)
     AND NOT EXISTS (SELECT 1 FROM tafel_index_entries WHERE table_id = tafel_tables.id)";
pub(crate) const SET_ACL: &str = "UPDATE tafel_tables SET acl = $3 WHERE account = $1 AND lname = $2 AND NOT deleting";
pub(crate) const LIST_TABLES: &str = "SELECT name, acl FROM tafel_tables
     WHERE account = $1 AND name >= $2 AND NOT deleting ORDER BY name LIMIT $3";

/// The table's id and one entity, in one statement (one snapshot, one round
/// trip): no row means no table; a NULL value means no entity.
pub(crate) const GET_ENTITY: &str = "SELECT e.value FROM tafel_tables t
     LEFT JOIN tafel_entities e ON e.table_id = t.id AND e.key = $3
     WHERE t.account = $1 AND t.lname = $2 AND NOT t.deleting";
/// A write's reads, sent together: the table row, locked FOR SHARE so a table
/// delete waits for the write (and a write behind a delete fails); and the current
/// rows of the keys, locked FOR UPDATE so concurrent writers of a key queue up.
/// Its indexed properties too (`index.rs`): read from the row it locks, so an
/// index created meanwhile is either waited for or seen.
pub(crate) const LOCK_TABLE: &str =
    "SELECT id, indexes FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting FOR SHARE";
/// Rows are locked in key order, so writes of overlapping key sets cannot deadlock.
pub(crate) const READ_FOR_WRITE: &str = "SELECT key, value FROM tafel_entities
     WHERE table_id = (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2) AND key = ANY($3)
     ORDER BY key FOR UPDATE";
/// Puts of keys the write saw absent: a row that appeared since is a unique
/// violation, which fails the transaction (its COMMIT, sent with it, rolls back)
/// and runs the write again.
pub(crate) const INSERT_ENTITIES: &str = "INSERT INTO tafel_entities (table_id, key, value)
     SELECT $1, u.k, u.v FROM UNNEST($2::BYTEA[], $3::BYTEA[]) AS u(k, v)";
/// An insert of keys expected absent, without reading them first (`write.rs`), a
/// transaction of its own: the table's row found and locked FOR SHARE in the same
/// statement (as `LOCK_TABLE` does for other writes), once, in a sub-select (a
/// locking clause on the whole SELECT would lock it again for every row); no
/// table, no rows. In key order, as rows are locked everywhere else: two inserts
/// of overlapping keys wait for each other instead of deadlocking.
/// It also records its rows in the table's counters (a change row of id `$5`,
/// `counts.rs`), in the same statement: one round trip still.
/// It writes the index entries `$7..$9` (property, value, key) made for the
/// table's indexed properties as the node last saw them (`$6`), and writes
/// anything only if the locked row lists exactly those (`index.rs`). It answers
/// the row's list: no row, no table; a list other than `$6`, nothing written.
pub(crate) const INSERT_NEW_ENTITIES: &str = "WITH t AS
         (SELECT id, indexes FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting FOR SHARE),
     ok AS (SELECT id FROM t WHERE indexes = $6::TEXT[]),
     ins AS (INSERT INTO tafel_entities (table_id, key, value)
         SELECT ok.id, u.k, u.v FROM ok, UNNEST($3::BYTEA[], $4::BYTEA[]) AS u(k, v)
         ORDER BY u.k
         RETURNING table_id, octet_length(key) + octet_length(value) AS b),
     ix AS (INSERT INTO tafel_index_entries (table_id, property, value, key)
         SELECT ok.id, x.p, x.v, x.k FROM ok, UNNEST($7::TEXT[], $8::BYTEA[], $9::BYTEA[]) AS x(p, v, k)),
     c AS (INSERT INTO tafel_table_counts (table_id, id, entities, bytes)
         SELECT table_id, $5, count(*), sum(b) FROM ins GROUP BY table_id)
     SELECT indexes FROM t";
/// Records a write's change to its table's counters, a row of its own (`counts.rs`).
pub(crate) const ADD_COUNTS: &str =
    "INSERT INTO tafel_table_counts (table_id, id, entities, bytes) VALUES ($1, $2, $3, $4)";
/// Tables whose counters have more than 32 change rows: the reaper folds them.
pub(crate) const COUNTS_TO_FOLD: &str = "SELECT table_id FROM tafel_table_counts
     GROUP BY table_id HAVING count(*) > 32 LIMIT 64";
/// Folds a table's change rows into one (`$2` its id), in one statement: a write
/// committed meanwhile is a row the DELETE did not see, kept.
pub(crate) const FOLD_COUNTS: &str = "WITH gone AS
         (DELETE FROM tafel_table_counts WHERE table_id = $1 RETURNING entities, bytes)
     INSERT INTO tafel_table_counts (table_id, id, entities, bytes)
         SELECT $1, $2, CAST(COALESCE(sum(entities), 0) AS BIGINT), CAST(COALESCE(sum(bytes), 0) AS BIGINT) FROM gone";
/// A dropped table's counters (a fold that raced its delete may leave a row of zeros).
pub(crate) const DROP_COUNTS: &str = "DELETE FROM tafel_table_counts WHERE table_id = $1";
/// A table's counters, its change rows summed: no row means no table.
pub(crate) const TABLE_COUNTS: &str = "SELECT CAST(COALESCE(sum(c.entities), 0) AS BIGINT),
         CAST(COALESCE(sum(c.bytes), 0) AS BIGINT), t.id
     FROM tafel_tables t LEFT JOIN tafel_table_counts c ON c.table_id = t.id
     WHERE t.account = $1 AND t.lname = $2 AND NOT t.deleting GROUP BY t.id";
/// A table's partitions, counted by skipping from each to the next: one index
/// seek per partition. A key is `pk 0x00 rk` (`key.rs`), so `pk 0x01` is the
/// first key past a partition.
pub(crate) const TABLE_PARTITIONS: &str = "WITH RECURSIVE p(next) AS (
         (SELECT substring(key FROM 1 FOR position('\\x00'::bytea IN key) - 1) || '\\x01'::bytea
              FROM tafel_entities WHERE table_id = $1 ORDER BY key LIMIT 1)
         UNION ALL
         SELECT (SELECT substring(e.key FROM 1 FOR position('\\x00'::bytea IN e.key) - 1) || '\\x01'::bytea
                     FROM tafel_entities e WHERE e.table_id = $1 AND e.key >= p.next ORDER BY e.key LIMIT 1)
              FROM p WHERE p.next IS NOT NULL)
     SELECT count(next) FROM p";
/// Every table's counters.
pub(crate) const ALL_TABLE_COUNTS: &str = "SELECT t.account, t.name, CAST(COALESCE(sum(c.entities), 0) AS BIGINT),
         CAST(COALESCE(sum(c.bytes), 0) AS BIGINT)
     FROM tafel_tables t LEFT JOIN tafel_table_counts c ON c.table_id = t.id
     WHERE NOT t.deleting GROUP BY t.id, t.account, t.name";
/// A deleted table's counters (after its mark: no write reaches it any more).
pub(crate) const DROP_COUNTS_NAMED: &str = "DELETE FROM tafel_table_counts WHERE table_id IN
     (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND deleting)";

/// Puts of keys the write saw (and locked).
pub(crate) const PUT_ENTITIES: &str = "INSERT INTO tafel_entities (table_id, key, value)
     SELECT $1, u.k, u.v FROM UNNEST($2::BYTEA[], $3::BYTEA[]) AS u(k, v)
     ON CONFLICT (table_id, key) DO UPDATE SET value = excluded.value";
pub(crate) const DELETE_ENTITIES: &str = "DELETE FROM tafel_entities WHERE table_id = $1 AND key = ANY($2)";

/// One chunk of a scan with the table's lookup, in one statement: no row means no
/// table; a row with a NULL key, a table with nothing in the range.
pub(crate) const SCAN_FROM: &str = "SELECT e.key, e.value FROM tafel_tables t
     LEFT JOIN LATERAL (SELECT key, value FROM tafel_entities
         WHERE table_id = t.id AND key >= $3 ORDER BY key LIMIT $4) e ON true
     WHERE t.account = $1 AND t.lname = $2 AND NOT t.deleting ORDER BY e.key";
pub(crate) const SCAN_BETWEEN: &str = "SELECT e.key, e.value FROM tafel_tables t
     LEFT JOIN LATERAL (SELECT key, value FROM tafel_entities
         WHERE table_id = t.id AND key >= $3 AND key < $5 ORDER BY key LIMIT $4) e ON true
     WHERE t.account = $1 AND t.lname = $2 AND NOT t.deleting ORDER BY e.key";

/// A backup's reads (`snapshot.rs`): everything, in order.
pub(crate) const ALL_PROPS: &str = "SELECT account, value FROM tafel_service_properties ORDER BY account";
pub(crate) const ALL_TABLES: &str =
    "SELECT account, name, acl, id FROM tafel_tables WHERE NOT deleting ORDER BY account, name";
pub(crate) const ROWS_FIRST: &str = "SELECT key, value FROM tafel_entities WHERE table_id = $1 ORDER BY key LIMIT $2";
pub(crate) const ROWS_AFTER: &str =
    "SELECT key, value FROM tafel_entities WHERE table_id = $1 AND key > $2 ORDER BY key LIMIT $3";

pub(crate) const DELETE_PROPS: &str = "DELETE FROM tafel_service_properties WHERE account = $1";
pub(crate) const GET_PROPS: &str = "SELECT value FROM tafel_service_properties WHERE account = $1";
pub(crate) const SET_PROPS: &str = "INSERT INTO tafel_service_properties (account, value) VALUES ($1, $2)
     ON CONFLICT (account) DO UPDATE SET value = excluded.value";
