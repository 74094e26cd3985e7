//! The durable audit store: one SQLite file (WAL, `synchronous=FULL`) with
//! one row per finished choice — its transcript id (the final audit
//! digest), when it was stored, the model's SHA-256, the transcript text
//! and, when the server signs, the receipt's signature.
//!
//! The contract: [`Store::commit`] returns only after the rows are durable
//! (one transaction, one fsync of the WAL), and a failed commit stores none
//! of them; the server sends a choice's last byte only after its commit
//! returned Ok. The schema is versioned with SQLite's `user_version`;
//! [`Store::open`] migrates an older file step by step and refuses a newer
//! one. Verified by the unit tests below (round trip, retention, a v1 file
//! migrated to v2, a newer, a corrupt and a locked file each refused with
//! its own message) and by `cli/tests/audit_crash.rs` (SIGKILL mid-load,
//! `PRAGMA integrity_check`, every fully received answer stored).

#![forbid(unsafe_code)]

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 2;

/// How long a statement waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Each schema step: the statements that take version `i` to `i + 1`.
const MIGRATIONS: [&str; 2] = [
    // v1: the transcripts.
    "CREATE TABLE transcripts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        created INTEGER NOT NULL,
        model_sha256 TEXT NOT NULL,
        transcript TEXT NOT NULL
    );",
    // v2: signed receipts (NULL: served without --signing-key).
    "ALTER TABLE transcripts ADD COLUMN signature TEXT;",
];

/// Why the audit store failed, with the file it concerns.
#[derive(Debug)]
pub enum StoreError {
    /// Another process holds a lock on the file.
    Locked(PathBuf),
    /// The file is not an SQLite database (or is damaged).
    Corrupt(PathBuf, String),
    /// The file or its directory cannot be created or written.
    Unwritable(PathBuf, String),
    /// The file was written by a newer detllm.
    NewerSchema { path: PathBuf, version: i64 },
    /// Any other SQLite failure.
    Sqlite(PathBuf, String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Locked(p) => write!(
                f,
                "audit store {}: locked by another process (stop it, or give another --audit-db)",
                p.display()
            ),
            StoreError::Corrupt(p, e) => write!(
                f,
                "audit store {}: not a readable SQLite database ({e}); move it away or give another --audit-db",
                p.display()
            ),
            StoreError::Unwritable(p, e) => {
                write!(f, "audit store {}: cannot be written ({e})", p.display())
            }
            StoreError::NewerSchema { path, version } => write!(
                f,
                "audit store {}: schema version {version} is newer than this build's {SCHEMA_VERSION}",
                path.display()
            ),
            StoreError::Sqlite(p, e) => write!(f, "audit store {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for StoreError {}

/// One stored choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The transcript id: the final audit digest, hex.
    pub id: String,
    /// Seconds since the Unix epoch when it was committed.
    pub created: u64,
    /// The model file's SHA-256, hex.
    pub model_sha256: String,
    /// The transcript file's bytes (docs/TRANSCRIPT.md).
    pub transcript: String,
    /// The receipt's Ed25519 signature, hex, when signed.
    pub signature: Option<String>,
}

/// An open audit store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// How long [`Store::commit`] holds its transaction open before
    /// committing (zero but in the crash test: `writer`'s hook).
    pub commit_delay: Duration,
}

impl Store {
    /// Opens (creating it and its directory if needed) the store at `path`,
    /// in WAL mode with full fsync, migrated to [`SCHEMA_VERSION`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unwritable(path.to_path_buf(), e.to_string()))?;
        }
        let conn = Connection::open(path).map_err(|e| classify(path, &e))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            commit_delay: Duration::ZERO,
        };
        store.setup_retrying()?;
        Ok(store)
    }

    /// [`Store::setup`], again while SQLite answers "busy" at once and
    /// [`BUSY_TIMEOUT`] has not passed: two connections opening a new file
    /// together can each hold the lock the other waits for (one switching
    /// the file to WAL, one reading its header), and SQLite then fails one
    /// of them at once rather than deadlock. A lock held for longer is
    /// still [`StoreError::Locked`] after the timeout.
    fn setup_retrying(&mut self) -> Result<(), StoreError> {
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match self.setup() {
                Err(StoreError::Locked(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                done => return done,
            }
        }
    }

    /// Opens an existing store to read (no migration, no creation).
    pub fn open_read(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| classify(path, &e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| classify(path, &e))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            commit_delay: Duration::ZERO,
        };
        let v = store.version()?;
        if v != SCHEMA_VERSION {
            return Err(StoreError::Sqlite(
                path.to_path_buf(),
                format!(
                    "schema version {v}; open it once with `detllm serve --audit-db` (this build reads {SCHEMA_VERSION})"
                ),
            ));
        }
        Ok(store)
    }

    fn setup(&mut self) -> Result<(), StoreError> {
        let e = |err: rusqlite::Error| classify(&self.path, &err);
        self.conn.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Sqlite(
                self.path.clone(),
                format!("journal mode is {mode}, not WAL"),
            ));
        }
        self.conn
            .execute_batch("PRAGMA synchronous=FULL;")
            .map_err(e)?;
        self.migrate()
    }

    /// The file's `user_version`.
    pub fn version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(&self.path, &e))
    }

    /// Applies each missing schema step, each in its own transaction.
    fn migrate(&mut self) -> Result<(), StoreError> {
        for step in 0..SCHEMA_VERSION {
            self.migrate_step(step)?;
        }
        Ok(())
    }

    /// Takes the file from version `step` to `step + 1` unless it is past
    /// `step` already. The version is read inside the step's write
    /// transaction, so processes opening one new file at once (two servers
    /// on the default store) apply each step exactly once.
    fn migrate_step(&mut self, step: i64) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |err: rusqlite::Error| classify(&path, &err);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(e)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.path.clone(),
                version,
            });
        }
        if version > step {
            return Ok(()); // applied by an earlier open; the empty transaction rolls back
        }
        let sql = format!(
            "{} PRAGMA user_version = {};",
            MIGRATIONS[step as usize],
            step + 1
        );
        tx.execute_batch(&sql).map_err(e)?;
        tx.commit().map_err(e)
    }

    /// Stores `records` in one transaction (a record whose id is already
    /// stored is kept as it was), then drops the oldest beyond `keep`.
    /// Durable when it returns Ok; on Err none of them is stored.
    pub fn commit(&mut self, records: &[Record], keep: Option<u64>) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = move |err: rusqlite::Error| classify(&path, &err);
        let tx = self.conn.transaction().map_err(&e)?;
        {
            let mut ins = tx
                .prepare(
                    "INSERT OR IGNORE INTO transcripts (id, created, model_sha256, transcript, signature)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(&e)?;
            for r in records {
                ins.execute(params![
                    r.id,
                    r.created as i64,
                    r.model_sha256,
                    r.transcript,
                    r.signature
                ])
                .map_err(&e)?;
            }
        }
        if let Some(keep) = keep {
            tx.execute(
                // Row numbers can skip (an ignored insert), so count rows, not numbers.
                "DELETE FROM transcripts WHERE seq <= \
                 (SELECT seq FROM transcripts ORDER BY seq DESC LIMIT 1 OFFSET ?1)",
                params![keep.min(i64::MAX as u64) as i64],
            )
            .map_err(&e)?;
        }
        if !self.commit_delay.is_zero() {
            std::thread::sleep(self.commit_delay);
        }
        tx.commit().map_err(&e)
    }

    /// The record with transcript id `id`.
    pub fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        self.conn
            .query_row(
                "SELECT id, created, model_sha256, transcript, signature FROM transcripts WHERE id = ?1",
                params![id],
                row_record,
            )
            .optional()
            .map_err(|e| classify(&self.path, &e))
    }

    /// Every record, oldest first.
    pub fn all(&self) -> Result<Vec<Record>, StoreError> {
        let e = |err: rusqlite::Error| classify(&self.path, &err);
        let mut st = self
            .conn
            .prepare(
                "SELECT id, created, model_sha256, transcript, signature FROM transcripts ORDER BY seq",
            )
            .map_err(e)?;
        let rows = st.query_map([], row_record).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// `PRAGMA integrity_check`'s answer (`"ok"` for a sound file).
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| classify(&self.path, &e))
    }
}

fn row_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    Ok(Record {
        id: r.get(0)?,
        created: r.get::<_, i64>(1)?.max(0) as u64,
        model_sha256: r.get(2)?,
        transcript: r.get(3)?,
        signature: r.get(4)?,
    })
}

/// The typed error of an SQLite failure on `path`.
fn classify(path: &Path, e: &rusqlite::Error) -> StoreError {
    let p = path.to_path_buf();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked(p),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt(p, e.to_string())
        }
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::ReadOnly
            | ErrorCode::PermissionDenied
            | ErrorCode::DiskFull
            | ErrorCode::SystemIoFailure,
        ) => StoreError::Unwritable(p, e.to_string()),
        _ => StoreError::Sqlite(p, e.to_string()),
    }
}

/// The default store: `$XDG_STATE_HOME/detllm/audit.sqlite`, else
/// `~/.local/state/detllm/audit.sqlite`.
pub fn default_path() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|s| !s.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(state.join("detllm").join("audit.sqlite"))
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("detllm-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.join("audit.sqlite")
    }

    fn record(i: u32) -> Record {
        Record {
            id: format!("{i:064x}"),
            created: 1_700_000_000 + u64::from(i),
            model_sha256: "ab".repeat(32),
            transcript: format!("{{\"n\": {i}}}\n"),
            signature: i.is_multiple_of(2).then(|| "cd".repeat(64)),
        }
    }

    #[test]
    fn records_round_trip_across_reopen_and_retention_drops_the_oldest() {
        let path = temp("roundtrip");
        let mut s = Store::open(&path).expect("open");
        s.commit(&[record(1), record(2)], None).expect("commit");
        s.commit(&[record(2), record(3)], Some(2)).expect("commit");
        drop(s);
        let s = Store::open_read(&path).expect("reopen");
        assert_eq!(s.version().expect("version"), SCHEMA_VERSION);
        let all = s.all().expect("all");
        assert_eq!(all, vec![record(2), record(3)]);
        assert_eq!(s.get(&record(3).id).expect("get"), Some(record(3)));
        assert_eq!(s.get(&record(1).id).expect("get"), None);
        assert_eq!(s.integrity_check().expect("check"), "ok");
    }

    #[test]
    fn a_v1_store_migrates_to_v2_keeping_its_rows() {
        let path = temp("migrate");
        {
            let c = Connection::open(&path).expect("open");
            c.execute_batch(MIGRATIONS[0]).expect("v1 schema");
            c.execute_batch("PRAGMA user_version = 1;").expect("v1");
            c.execute(
                "INSERT INTO transcripts (id, created, model_sha256, transcript) VALUES ('aa', 5, 'bb', 't')",
                [],
            )
            .expect("a v1 row");
        }
        let mut s = Store::open(&path).expect("migrates");
        assert_eq!(s.version().expect("version"), 2);
        let old = s.get("aa").expect("get").expect("kept");
        assert_eq!((old.created, old.signature), (5, None));
        s.commit(&[record(4)], None).expect("a v2 row");
        assert_eq!(s.all().expect("all").len(), 2);
    }

    #[test]
    fn processes_opening_a_new_store_at_once_apply_each_step_once() {
        // Two servers started on one default store: each migration step must
        // run once, whoever takes the write lock first (before, the second
        // re-ran ALTER TABLE and failed with "duplicate column name").
        for round in 0..16 {
            let path = temp(&format!("concurrent-{round}"));
            let start = std::sync::Arc::new(std::sync::Barrier::new(4));
            let opens: Vec<_> = (0..4)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        Store::open(&path).map(|_| ()).map_err(|e| e.to_string())
                    })
                })
                .collect();
            for open in opens {
                open.join().expect("thread").expect("every open succeeds");
            }
            let s = Store::open_read(&path).expect("read");
            assert_eq!(s.version().expect("version"), SCHEMA_VERSION);
        }
    }

    #[test]
    fn newer_corrupt_and_locked_files_are_refused_with_their_own_error() {
        let newer = temp("newer");
        Connection::open(&newer)
            .expect("open")
            .execute_batch("PRAGMA user_version = 99;")
            .expect("v99");
        let e = Store::open(&newer).err().expect("refused");
        assert!(
            matches!(e, StoreError::NewerSchema { version: 99, .. }),
            "{e}"
        );

        let corrupt = temp("corrupt");
        std::fs::write(&corrupt, vec![0x5a; 8192]).expect("garbage");
        let e = Store::open(&corrupt).err().expect("refused");
        assert!(matches!(e, StoreError::Corrupt(..)), "{e}");
        assert!(e.to_string().contains("not a readable SQLite database"));

        let locked = temp("locked");
        drop(Store::open(&locked).expect("create"));
        let holder = Connection::open(&locked).expect("open");
        holder
            .execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;")
            .expect("lock");
        let mut s = Store::open(&locked);
        let e = match &mut s {
            Ok(s) => s.commit(&[record(1)], None).expect_err("refused"),
            Err(_) => s.err().expect("refused"),
        };
        assert!(matches!(e, StoreError::Locked(_)), "{e}");
    }
}
