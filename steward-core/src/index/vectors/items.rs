//! The two halves every item kind's vectors share (calendar events, memory notes): embedding
//! the items whose text is new or changed in batches, and the nearest items to a question that
//! stand out from the calibration probes.

use super::{EmbeddedItem, VectorStore};
use crate::index::{Embedder, calibration};

/// Embeds `todo` (`(id, text, source hash)`) in batches of `batch`, storing each batch's
/// vectors; stops between batches when `cancel` is set (`"cancelled"`) or at the first failing
/// request (its error). Returns how many were embedded and why it stopped early.
pub(crate) fn embed_in_batches(
    e: &dyn Embedder,
    vectors: &VectorStore,
    todo: &[(i64, String, [u8; 32])],
    batch: usize,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<(usize, Option<String>), super::VectorError> {
    let mut embedded = 0;
    for chunk in todo.chunks(batch.max(1)) {
        if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst)) {
            return Ok((embedded, Some("cancelled".to_owned())));
        }
        let texts: Vec<&str> = chunk.iter().map(|(_, t, _)| t.as_str()).collect();
        let got = match e.embed(&texts) {
            Ok(v) => v,
            Err(err) => return Ok((embedded, Some(err.to_string()))),
        };
        let items: Vec<EmbeddedItem> = chunk
            .iter()
            .zip(got)
            .filter(|(_, v)| !v.is_empty() && v.iter().all(|x| x.is_finite()))
            .map(|((id, _, h), vector)| EmbeddedItem { id: *id, source_hash: *h, vector })
            .collect();
        let Some(dim) = items.first().map(|i| i.vector.len()) else { continue };
        let items: Vec<EmbeddedItem> =
            items.into_iter().filter(|i| i.vector.len() == dim).collect();
        vectors.reset_incompatible(e.model(), dim)?;
        vectors.store_embedded(e.model(), dim, &items)?;
        embedded += items.len();
    }
    Ok((embedded, None))
}

/// The ids of the items nearest to `text`, nearest first, at most `candidates`: within the
/// embedder's distance ceiling and standing out from the calibration probes, so a topic the
/// items do not hold finds nothing. `what` names the items in an error.
pub(crate) fn near_standing_out(
    e: &dyn Embedder,
    vectors: &VectorStore,
    text: &str,
    candidates: usize,
    what: &str,
) -> Result<Vec<i64>, String> {
    let stored = vectors.dimensions(e.model()).map_err(|x| x.to_string())?;
    if stored.is_empty() {
        return Ok(Vec::new());
    }
    let v = e.embed_query(text).map_err(|x| x.to_string())?;
    if !stored.contains(&v.len()) {
        return Err(format!("no {what} vectors of dimension {}", v.len()));
    }
    let cutoff = e.max_distance();
    let ids: Vec<i64> = vectors
        .knn(e.model(), &v, candidates)
        .map_err(|x| x.to_string())?
        .into_iter()
        .filter(|n| n.distance <= cutoff)
        .map(|n| n.id)
        .collect();
    if ids.is_empty() {
        return Ok(ids);
    }
    let probes = calibration::probes_for(e, v.len()).ok_or("probe queries not embedded")?;
    let found = vectors.stored_vectors(e.model(), v.len(), &ids).map_err(|x| x.to_string())?;
    let candidates: Vec<(i64, &[f32])> = found.iter().map(|(id, f)| (*id, f.as_slice())).collect();
    Ok(calibration::standing_out(&v, &probes, &candidates))
}
