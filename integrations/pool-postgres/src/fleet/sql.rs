//! The SQL text of a fleet budget and the keys its advisory locks use.
//! Pure: every statement is built from integers only (keys, totals,
//! instance ids, pids), so nothing from a budget's name ever reaches the
//! SQL text, and the same inputs give the same text.

/// The query that claims a ticket. Parameters: `$1` the key (`int4`), `$2`
/// the total (`int4`), `$3` the first ticket to try (`int4`, in
/// `0..total`). Returns the ticket taken, or no row when all are held.
///
/// The tickets are tried in order from `$3`, wrapping around, and the scan
/// stops at the first lock taken (`LIMIT 1`), so at most one ticket is
/// held per connection.
#[doc(hidden)]
pub const CLAIM_SQL: &str = "SELECT t FROM \
    (SELECT (($3::int4 + n) % $2::int4)::int4 AS t FROM generate_series(0, $2::int4 - 1) AS n) AS tickets \
    WHERE pg_try_advisory_lock($1::int4, t) LIMIT 1";

/// The filter on `pg_locks` for this database's locks (advisory locks are
/// per database).
const THIS_DATABASE: &str =
    "l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";

/// 32-bit FNV-1a: stable across processes, builds and platforms.
pub(super) fn key_of(name: &str) -> i32 {
    fnv1a(name.bytes())
}

fn fnv1a(bytes: impl Iterator<Item = u8>) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    i32::from_ne_bytes(hash.to_ne_bytes())
}

/// The control key: FNV-1a of the name, `\0` and `fair-share`; flipped
/// if it equals the ticket key, so a budget's two spaces never meet.
pub(super) fn control_key_of(name: &str, key: i32) -> i32 {
    let control = fnv1a(name.bytes().chain(*b"\0fair-share"));
    if control == key {
        !control
    } else {
        control
    }
}

/// An `int4` key as `pg_locks` shows it (`classid`, `objid`: an oid).
pub(super) fn as_oid(key: i32) -> i64 {
    i64::from(u32::from_ne_bytes(key.to_ne_bytes()))
}

/// [`CLAIM_SQL`] with its three parameters written in as literals.
pub(super) fn claim_literal(key: i32, total: i32, start: i32) -> String {
    // In parentheses: `-2147483648::int4` would cast before negating,
    // and overflow.
    CLAIM_SQL
        .replace("$1", &format!("({key})"))
        .replace("$2", &format!("({total})"))
        .replace("$3", &format!("({start})"))
}

/// Who a borrowing claim defers to: the budget's control key, and the
/// claiming instance's control session (whose own wanting lock, were it
/// to hold one, is not another's).
#[derive(Debug, Clone, Copy)]
pub(super) struct Deference {
    pub(super) control_key: i32,
    pub(super) control_pid: i32,
}

/// The claim query under fair share, parameters written in: a borrowing
/// claim (`defer` given) takes no ticket while another instance holds its
/// wanting lock.
pub(super) fn claim(key: i32, total: i32, start: i32, defer: Option<Deference>) -> String {
    let tickets = format!(
        "SELECT t FROM (SELECT ((({start})::int4 + n) % ({total})::int4)::int4 AS t \
         FROM generate_series(0, ({total})::int4 - 1) AS n) AS tickets",
    );
    let lock = format!("pg_try_advisory_lock(({key})::int4, t)");
    let Some(defer) = defer else {
        return format!("{tickets} WHERE {lock} LIMIT 1");
    };
    // CASE fixes the order: the lock is tried only when nobody wants
    // (an AND could be evaluated lock first). The EXISTS is an
    // uncorrelated sub-select, evaluated once per query.
    format!(
        "{tickets} WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_locks l \
         WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted \
         AND l.classid::int8 = {control} AND l.objid::int8 >= 2147483648 \
         AND l.pid <> {pid} AND {here}) THEN false ELSE {lock} END LIMIT 1",
        control = as_oid(defer.control_key),
        pid = defer.control_pid,
        here = THIS_DATABASE,
    )
}

/// The control session's ticket: the one taken (`0..total`) or `-1`
/// when none is free, and the session's backend pid.
pub(super) fn join(key: i32, total: i32, start: i32) -> String {
    format!(
        "SELECT coalesce(({}), -1)::int8, pg_backend_pid()::int8",
        claim_literal(key, total, start)
    )
}

/// The member lock, on a session holding its ticket: `1` when taken.
pub(super) fn member(control_key: i32, id: i32) -> String {
    format!("SELECT pg_try_advisory_lock(({control_key})::int4, ({id})::int4)::int4::int8")
}

/// The channel on which an instance that cannot join says so.
pub(super) fn channel(control_key: i32) -> String {
    format!("pool_fleet_{}", as_oid(control_key))
}

/// Run by a session that found no ticket for the control session,
/// before it closes: tells the members that instance `id` wants in.
pub(super) fn knock(control_key: i32, id: i32) -> String {
    format!(
        "SELECT (pg_notify('{}', '{id}') IS NULL)::int4::int8",
        channel(control_key)
    )
}

/// Members, others wanting, and how many of `knocking` (ids that asked
/// to join lately) are members now.
pub(super) fn count(control_key: i32, knocking: &[i32]) -> String {
    let ids: Vec<String> = knocking.iter().map(|id| as_oid(*id).to_string()).collect();
    format!(
        "SELECT count(*) FILTER (WHERE l.objid::int8 < 2147483648)::int8, \
         count(*) FILTER (WHERE l.objid::int8 >= 2147483648 \
           AND l.pid <> pg_backend_pid())::int8, \
         count(*) FILTER (WHERE l.objid::int8 = ANY (ARRAY[{}]::int8[]))::int8 \
         FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 2 \
         AND l.granted AND l.classid::int8 = {} AND {THIS_DATABASE}",
        ids.join(", "),
        as_oid(control_key)
    )
}

/// Takes (`want`) or drops instance `id`'s wanting lock: `1` when done.
pub(super) fn want(control_key: i32, id: i32, want: bool) -> String {
    let f = if want {
        "pg_try_advisory_lock"
    } else {
        "pg_advisory_unlock"
    };
    format!(
        "SELECT {f}(({control_key})::int4, ({})::int4)::int4::int8",
        -id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_differ_by_name() {
        // FNV-1a of "a" is 0xe40c292c: fixed, whatever the platform.
        assert_eq!(key_of("a"), 0xe40c_292c_u32 as i32);
        assert_eq!(key_of(""), 0x811c_9dc5_u32 as i32);
        assert_ne!(key_of("orders"), key_of("billing"));
    }

    #[test]
    fn equal_keys_are_pulled_apart_and_oids_are_unsigned() {
        assert_eq!(
            control_key_of("x", control_key_of("x", 0)),
            !control_key_of("x", 0)
        );
        assert_eq!(as_oid(-1), 4_294_967_295);
        assert_eq!(as_oid(7), 7);
    }

    #[test]
    fn the_control_statements_name_the_control_key_and_the_id() {
        assert_eq!(channel(-1), "pool_fleet_4294967295");
        assert!(knock(-1, 9).contains("pg_notify('pool_fleet_4294967295', '9')"));
        assert!(member(5, 9).contains("pg_try_advisory_lock((5)::int4, (9)::int4)"));
        assert!(want(5, 9, true).contains("pg_try_advisory_lock((5)::int4, (-9)::int4)"));
        assert!(want(5, 9, false).contains("pg_advisory_unlock((5)::int4, (-9)::int4)"));
        let count = count(5, &[3, -1]);
        assert!(count.contains("ARRAY[3, 4294967295]::int8[]"), "{count}");
        assert!(
            count.contains("l.classid::int8 = 5 AND l.database"),
            "{count}"
        );
        let join = join(5, 3, 2);
        assert!(join.starts_with("SELECT coalesce((SELECT t FROM"), "{join}");
        assert!(!join.contains('$'), "{join}");
    }
}
