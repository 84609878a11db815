//! [`KvStore::copy_to`]: every row of one store into another, checked.
//!
//! The source is read page by page (keys after the last one seen, in key
//! order) inside one read-only transaction, so the copy is a consistent
//! snapshot even while others write. The target is written inside one
//! transaction, in multi-row upserts of bounded size; each batch is read
//! back in that transaction and compared, text for text, with what was sent,
//! and the number of rows copied is compared with the source's count in the
//! same snapshot. Any difference rolls the target back: it is left as it
//! was, or holds the whole copy.

use super::backend::Row;
use super::sql::PAGE_ROWS;
use super::{KvError, KvStore};

/// Bytes of keys and values sent in one upsert at most (MariaDB's default
/// `max_allowed_packet` is 16 MiB); a single larger row goes alone.
const BATCH_BYTES: usize = 4 << 20;

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CopyReport {
    /// Rows copied (and read back identical).
    pub rows: u64,
    /// Upsert statements sent.
    pub batches: u64,
    /// Bytes of keys and values copied.
    pub bytes: u64,
}

impl KvStore {
    /// Copies every key and value of this store into `target`, replacing
    /// the target's values for the same keys and keeping its other keys.
    ///
    /// # Errors
    ///
    /// [`KvError::CopyMismatch`] when what the target holds after writing
    /// differs from the source; [`KvError::Pool`] or [`KvError::Query`] from
    /// either side. On any error the target is unchanged.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the target unchanged: its transaction
    /// is rolled back when the connection returns to the pool.
    pub async fn copy_to(&self, target: &KvStore) -> Result<CopyReport, KvError> {
        let mut source_conn = self.backend.get().await?;
        let mut target_conn = target.backend.get().await?;
        let mut source = source_conn.begin(self.sql.begin_snapshot).await?;
        let mut dest = target_conn.begin(target.sql.begin_write).await?;

        let expected = source.exec().fetch_count(&self.sql.count).await?;
        let expected = u64::try_from(expected).unwrap_or_default();
        let mut report = CopyReport::default();
        let mut last_key: Option<String> = None;
        let mut finished = false;
        // Each page but the last is full, so this many pages is enough.
        let max_pages = expected / PAGE_ROWS as u64 + 1;
        for _ in 0..=max_pages {
            let page = match &last_key {
                None => source.exec().fetch_rows(&self.sql.first_page, &[]).await?,
                Some(key) => {
                    source
                        .exec()
                        .fetch_rows(&self.sql.next_page, &[key])
                        .await?
                }
            };
            for batch in batches(&page) {
                // Not checked by its count: backends count an upsert's
                // changed rows differently. The read-back below checks.
                dest.exec()
                    .upsert_rows(
                        &target.sql.upsert_many_head,
                        target.sql.upsert_many_tail,
                        batch,
                    )
                    .await?;
                let back = dest
                    .exec()
                    .fetch_rows_in(&target.sql.select_in_head, batch)
                    .await?;
                verify(batch, back)?;
                report.batches += 1;
                report.bytes += batch.iter().map(row_bytes).sum::<usize>() as u64;
            }
            report.rows += page.len() as u64;
            if page.len() < PAGE_ROWS {
                finished = true;
                break;
            }
            last_key = page.last().map(|(key, _)| key.clone());
        }
        if !finished || report.rows != expected {
            return Err(KvError::CopyMismatch {
                key: None,
                detail: format!(
                    "the source counted {expected} rows but {} were read",
                    report.rows
                ),
            });
        }
        // Done reading: end the snapshot before committing, so a SQLite
        // file copied into itself is not left waiting on its own reader.
        source.rollback().await?;
        dest.commit().await?;
        target.cache.clear();
        Ok(report)
    }
}

fn row_bytes((key, value): &Row) -> usize {
    key.len() + value.len()
}

/// Splits a page into runs of rows of at most [`BATCH_BYTES`] (at least one
/// row each).
fn batches(page: &[Row]) -> impl Iterator<Item = &[Row]> {
    let mut rest = page;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut take = 0;
        while take < rest.len() && (take == 0 || bytes + row_bytes(&rest[take]) <= BATCH_BYTES) {
            bytes += row_bytes(&rest[take]);
            take += 1;
        }
        let (batch, tail) = rest.split_at(take);
        rest = tail;
        Some(batch)
    })
}

/// The target must hold exactly the rows just sent.
fn verify(sent: &[Row], mut back: Vec<Row>) -> Result<(), KvError> {
    if back.len() != sent.len() {
        return Err(KvError::CopyMismatch {
            key: None,
            detail: format!(
                "wrote {} rows in a batch but read back {}",
                sent.len(),
                back.len()
            ),
        });
    }
    back.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut sent: Vec<&Row> = sent.iter().collect();
    sent.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (want, got) in sent.into_iter().zip(&back) {
        if want.0 != got.0 {
            return Err(KvError::CopyMismatch {
                key: Some(want.0.clone()),
                detail: "key missing in the target".to_owned(),
            });
        }
        if want.1 != got.1 {
            return Err(KvError::CopyMismatch {
                key: Some(want.0.clone()),
                detail: format!(
                    "value differs ({} bytes sent, {} read back)",
                    want.1.len(),
                    got.1.len()
                ),
            });
        }
    }
    Ok(())
}
