//! Writing vectors: tables per space, conversions, deletes and the embed-state rows.

use super::*;

/// Writes checked rows into the space of (`model`, `dimension`), creating it on first use (its
/// int8 scale from these rows).
pub(super) fn write_vectors(
    tx: &rusqlite::Transaction<'_>,
    model: &str,
    dimension: usize,
    rows: &[(i64, Vec<u8>, Vec<f32>)],
    deltas: &mut Deltas,
) -> Result<(), VectorError> {
    let dim = i64::try_from(dimension).unwrap_or(i64::MAX);
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    let scale = q_scale_for(max_abs(rows.iter().map(|r| r.2.as_slice())));
    tx.execute(
        "INSERT OR IGNORE INTO vector_spaces (model, dimension, created_at, q_scale)
         VALUES (?1, ?2, ?3, ?4)",
        params![model, dim, crate::time::now_secs(), f64::from(scale)],
    )
    .map_err(q("create vector space"))?;
    let (id, scale): (i64, Option<f64>) = tx
        .query_row(
            "SELECT id, q_scale FROM vector_spaces WHERE model = ?1 AND dimension = ?2",
            params![model, dim],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(q("vector space id"))?;
    #[allow(clippy::cast_possible_truncation)]
    let scale = scale.map_or(127.0, |s| s as f32);
    create_tables(tx, id, dimension)?;
    let mut ops = Vec::with_capacity(rows.len());
    for (mid, floats, unit) in rows {
        tx.execute(&format!("DELETE FROM vec_f_{id} WHERE rowid = ?1"), [mid])
            .map_err(q("replace vector"))?;
        tx.execute(
            &format!("INSERT INTO vec_f_{id} (rowid, embedding) VALUES (?1, ?2)"),
            params![mid, floats],
        )
        .map_err(q("insert vector"))?;
        let code = quantize(unit, scale);
        tx.execute(
            &format!("INSERT OR REPLACE INTO vec_q_{id} (id, q) VALUES (?1, ?2)"),
            params![mid, code],
        )
        .map_err(q("insert code"))?;
        ops.push(CodeOp::Put(*mid, code));
    }
    if let Some(d) = bump(tx, id, deltas)? {
        d.ops.extend(ops);
    }
    Ok(())
}

pub(super) fn create_tables(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    dimension: usize,
) -> Result<(), StoreError> {
    // Small float chunks: a re-rank reads single vectors, and SQLite reaches an offset
    // inside a blob by walking its overflow chain — through a 4 MB chunk (1,024 vectors
    // of 1,024-d, sqlite-vec's default) that cost ~300 µs per vector.
    tx.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS vec_f_{id}
             USING vec0(embedding float[{dimension}] distance_metric=cosine,
                        chunk_size={FLOAT_CHUNK});
         CREATE TABLE IF NOT EXISTS vec_q_{id} (id INTEGER PRIMARY KEY, q BLOB NOT NULL);"
    ))
    .map_err(|e| StoreError::query("create vector tables", e))
}

/// Gives a space written with sign-bit codes (before migration 3) its int8 codes, from the
/// floats.
pub(super) fn convert_space(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    dimension: usize,
) -> Result<(), StoreError> {
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    let rows: Vec<(i64, Vec<f32>)> = tx
        .prepare(&format!("SELECT rowid, embedding FROM vec_f_{id}"))
        .and_then(|mut s| {
            s.query_map([], |r| {
                let blob: Vec<u8> = r.get(1)?;
                let v = blob
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                Ok((r.get(0)?, v))
            })?
            .collect()
        })
        .map_err(q("read vectors to convert"))?;
    let scale = q_scale_for(max_abs(rows.iter().map(|r| r.1.as_slice())));
    create_tables(tx, id, dimension)?;
    for (mid, v) in &rows {
        tx.execute(
            &format!("INSERT OR REPLACE INTO vec_q_{id} (id, q) VALUES (?1, ?2)"),
            params![mid, quantize(v, scale)],
        )
        .map_err(q("convert code"))?;
    }
    tx.execute_batch(&format!("DROP TABLE IF EXISTS vec_b_{id};")).map_err(q("drop sign bits"))?;
    tx.execute(
        "UPDATE vector_spaces SET q_scale = ?2, generation = generation + 1 WHERE id = ?1",
        params![id, f64::from(scale)],
    )
    .map_err(q("convert space"))?;
    Ok(())
}

/// Deletes `ids` from every space in `spaces`.
pub(super) fn delete_vectors(
    tx: &rusqlite::Transaction<'_>,
    spaces: &[i64],
    ids: &[i64],
    deltas: &mut Deltas,
) -> Result<(), StoreError> {
    let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
    for space in spaces {
        for id in ids {
            tx.execute(&format!("DELETE FROM vec_f_{space} WHERE rowid = ?1"), [id])
                .map_err(q("remove vector"))?;
            tx.execute(&format!("DELETE FROM vec_q_{space} WHERE id = ?1"), [id])
                .map_err(q("remove code"))?;
        }
        if let Some(d) = bump(tx, *space, deltas)? {
            d.ops.extend(ids.iter().map(|id| CodeOp::Remove(*id)));
        }
    }
    Ok(())
}

/// The columns [`state_row`] reads.
pub(super) const STATE_COLUMNS: &str =
    "message_id, model, dimension, source_hash, embedded_at, attempts, last_error";

pub(super) fn state_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, EmbedState)> {
    Ok((
        r.get(0)?,
        EmbedState {
            model: r.get(1)?,
            dimension: r.get::<_, Option<i64>>(2)?.and_then(|d| usize::try_from(d).ok()),
            source_hash: hash_of(&r.get::<_, Vec<u8>>(3)?),
            embedded_at: r.get(4)?,
            attempts: r.get(5)?,
            last_error: r.get(6)?,
        },
    ))
}

pub(super) fn hash_of(blob: &[u8]) -> [u8; 32] {
    let mut h = [0u8; 32];
    if blob.len() == 32 {
        h.copy_from_slice(blob);
    }
    h
}
