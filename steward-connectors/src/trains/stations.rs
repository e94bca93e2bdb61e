//! Resolving a dictated station name ("Milano rogo redo") to one station, or to a short list
//! to ask about. The contract (`steward-design.txt`, "Dictated Station Resolution"):
//! the exact text first; with no candidates, each token of three or more characters and its
//! three-character prefix; candidates deduplicated by id; a unique exact match of a canonical
//! or short name wins, then a unique exact label; otherwise every candidate is scored
//! `max(0.55·Levenshtein + 0.35·padded-trigram Dice + 0.10·token overlap, 0.92·containment)`
//! and a sole candidate needs [`MIN_SOLE_SCORE`], several need [`MIN_MULTI_SCORE`] and a lead of
//! [`MIN_LEAD`]. Nothing but the current utterance enters: no history, no memory.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

/// A sole candidate is accepted at this score.
/// Fixed (not a setting).
pub const MIN_SOLE_SCORE: f64 = 0.68;
/// With several candidates, the best needs this score…
/// Fixed (not a setting).
pub const MIN_MULTI_SCORE: f64 = 0.86;
/// …and this lead over the runner-up.
/// Fixed (not a setting).
pub const MIN_LEAD: f64 = 0.08;
/// Candidates returned when the name is ambiguous.
/// Fixed (not a setting).
pub const AMBIGUOUS_CANDIDATES: usize = 8;
/// Fallback queries per utterance (tokens and their prefixes).
/// Fixed (not a setting).
pub const MAX_FALLBACK_QUERIES: usize = 12;

/// A station as a source lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Station {
    /// ViaggiaTreno id (`S01700`).
    pub id: String,
    /// The canonical (long) name.
    pub name: String,
    /// A short name, when the source has one.
    pub short_name: Option<String>,
    /// A generic label ("Milano"), when the source has one.
    pub label: Option<String>,
}

/// Where candidates come from: a prefix search like ViaggiaTreno's autocomplete.
pub trait StationSource {
    /// Stations whose name starts with `prefix` (case-insensitive).
    fn autocomplete(&self, prefix: &str) -> Result<Vec<Station>, String>;
}

/// The outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum StationResolution {
    /// One station, with its score (1.0 for an exact match).
    Resolved {
        /// The station.
        station: Station,
        /// Its score.
        score: f64,
    },
    /// Several plausible stations: ask which.
    AmbiguousStation {
        /// Up to [`AMBIGUOUS_CANDIDATES`], best first.
        candidates: Vec<(Station, f64)>,
    },
    /// Nothing like it.
    NotFound,
}

/// Lowercase, diacritics removed, punctuation to spaces, spaces collapsed.
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        let c = fold(c);
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with(' ') && !out.is_empty() {
            out.push(' ');
        }
    }
    out.trim_end().to_owned()
}

/// Latin letters with diacritics to their base letter (the ones Italian names use and more).
fn fold(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ä' | 'ã' | 'å' => 'a',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' => 'i',
        'ò' | 'ó' | 'ô' | 'ö' | 'õ' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        'ç' => 'c',
        'ñ' => 'n',
        '\'' | '’' => ' ',
        c => c,
    }
}

fn compact(s: &str) -> String {
    s.chars().filter(|c| *c != ' ').collect()
}

fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

fn trigrams(s: &str) -> BTreeMap<[char; 3], usize> {
    let padded: Vec<char> = format!("  {s}  ").chars().collect();
    let mut m = BTreeMap::new();
    for w in padded.windows(3) {
        *m.entry([w[0], w[1], w[2]]).or_insert(0) += 1;
    }
    m
}

/// The score of `candidate` for `query` (both normalized).
pub fn similarity(query: &str, candidate: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (query.chars().collect(), candidate.chars().collect());
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 0.0;
    }
    let lev = 1.0 - levenshtein(&a, &b) as f64 / longest as f64;
    let (ta, tb) = (trigrams(query), trigrams(candidate));
    let shared: usize = ta.iter().map(|(k, n)| (*n).min(tb.get(k).copied().unwrap_or(0))).sum();
    let total: usize = ta.values().sum::<usize>() + tb.values().sum::<usize>();
    let dice = if total == 0 { 0.0 } else { 2.0 * shared as f64 / total as f64 };
    let qt: Vec<&str> = query.split(' ').filter(|t| !t.is_empty()).collect();
    let ct: HashSet<&str> = candidate.split(' ').collect();
    let overlap = if qt.is_empty() {
        0.0
    } else {
        qt.iter().filter(|t| ct.contains(*t)).count() as f64 / qt.len() as f64
    };
    let blend = 0.55 * lev + 0.35 * dice + 0.10 * overlap;
    let (ca, cb) = (compact(query), compact(candidate));
    let containment = if !ca.is_empty() && !cb.is_empty() && (ca.contains(&cb) || cb.contains(&ca))
    {
        let (x, y) = (ca.chars().count(), cb.chars().count());
        x.min(y) as f64 / x.max(y) as f64
    } else {
        0.0
    };
    blend.max(0.92 * containment)
}

/// Resolves a dictated station name.
pub fn resolve_station(
    source: &dyn StationSource,
    dictated: &str,
) -> Result<StationResolution, String> {
    let query = normalize(dictated);
    if query.is_empty() {
        return Ok(StationResolution::NotFound);
    }
    let mut candidates = source.autocomplete(dictated.trim())?;
    if candidates.is_empty() {
        let mut asked = HashSet::new();
        for token in query.split(' ').filter(|t| t.chars().count() >= 3) {
            let prefix: String = token.chars().take(3).collect();
            for q in [token.to_owned(), prefix] {
                if asked.len() >= MAX_FALLBACK_QUERIES || !asked.insert(q.clone()) {
                    continue;
                }
                candidates.extend(source.autocomplete(&q)?);
            }
        }
    }
    let mut seen = HashSet::new();
    candidates.retain(|s| seen.insert(s.id.clone()));
    if candidates.is_empty() {
        return Ok(StationResolution::NotFound);
    }
    let exact = |f: &dyn Fn(&Station) -> Vec<String>| -> Vec<&Station> {
        candidates.iter().filter(|s| f(s).iter().any(|n| normalize(n) == query)).collect()
    };
    let canonical =
        exact(&|s| std::iter::once(s.name.clone()).chain(s.short_name.clone()).collect());
    if let [one] = canonical.as_slice() {
        return Ok(StationResolution::Resolved { station: (*one).clone(), score: 1.0 });
    }
    if canonical.is_empty() {
        let labels = exact(&|s| s.label.iter().cloned().collect());
        if let [one] = labels.as_slice() {
            return Ok(StationResolution::Resolved { station: (*one).clone(), score: 1.0 });
        }
    }
    let mut scored: Vec<(Station, f64)> = candidates
        .into_iter()
        .map(|s| {
            let score = std::iter::once(&s.name)
                .chain(s.short_name.iter())
                .chain(s.label.iter())
                .map(|n| similarity(&query, &normalize(n)))
                .fold(0.0, f64::max);
            (s, score)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.name.cmp(&b.0.name)));
    let best = scored[0].1;
    let accepted = if scored.len() == 1 {
        best >= MIN_SOLE_SCORE
    } else {
        best >= MIN_MULTI_SCORE && best - scored[1].1 >= MIN_LEAD
    };
    if accepted {
        let (station, score) = scored.swap_remove(0);
        return Ok(StationResolution::Resolved { station, score });
    }
    scored.truncate(AMBIGUOUS_CANDIDATES);
    Ok(StationResolution::AmbiguousStation { candidates: scored })
}

/// A station list searched like the autocomplete endpoint (name prefix, case- and
/// accent-insensitive): the offline source, and the benchmark's.
#[derive(Debug, Clone, Default)]
pub struct StationList {
    /// (normalized name, station), sorted by normalized name.
    stations: Vec<(String, Station)>,
}

impl StationList {
    /// From `NAME<TAB>ID` lines (a header line without an id is skipped), as in the corpus's
    /// `stazioni.tsv`, or `NAME|ID` lines as the autocomplete endpoint answers.
    pub fn parse(text: &str) -> Self {
        let mut stations: Vec<(String, Station)> = text
            .lines()
            .filter_map(|l| l.split_once('\t').or_else(|| l.split_once('|')))
            .filter(|(_, id)| {
                let id = id.trim();
                id.len() > 1 && id[1..].bytes().all(|b| b.is_ascii_digit())
            })
            .map(|(name, id)| {
                let s = Station {
                    id: id.trim().to_owned(),
                    name: name.trim().to_owned(),
                    short_name: None,
                    label: None,
                };
                (normalize(&s.name), s)
            })
            .collect();
        stations.sort_by(|a, b| a.0.cmp(&b.0));
        Self { stations }
    }

    /// Stations in the list.
    pub fn len(&self) -> usize {
        self.stations.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.stations.is_empty()
    }
}

impl StationSource for StationList {
    fn autocomplete(&self, prefix: &str) -> Result<Vec<Station>, String> {
        let p = normalize(prefix);
        if p.is_empty() {
            return Ok(Vec::new());
        }
        let start = self.stations.partition_point(|(n, _)| n.as_str() < p.as_str());
        Ok(self.stations[start..]
            .iter()
            .take_while(|(n, _)| n.starts_with(&p))
            .map(|(_, s)| s.clone())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> StationList {
        StationList::parse(
            "nome\tcodice\nMILANO CENTRALE\tS01700\nMILANO ROGOREDO\tS01820\nMILANO LAMBRATE\tS01701\n\
             MILANO PORTA GARIBALDI\tS01645\nMONZA\tS01322\nMONZA SOBBORGHI\tS01323\nROMA TERMINI\tS08409\n\
             FORLÌ\tS05117\n",
        )
    }

    fn resolved(r: &StationResolution) -> Option<&str> {
        match r {
            StationResolution::Resolved { station, .. } => Some(&station.id),
            _ => None,
        }
    }

    #[test]
    fn dictated_names_resolve_or_ask() {
        let l = list();
        assert_eq!(l.len(), 8, "the header line is skipped");
        // Exact, case and accents aside.
        assert_eq!(resolved(&resolve_station(&l, "milano centrale").unwrap()), Some("S01700"));
        assert_eq!(resolved(&resolve_station(&l, "Forli").unwrap()), Some("S05117"));
        // A transcription the prefix search cannot find: tokens and prefixes, then the score.
        assert_eq!(resolved(&resolve_station(&l, "Milano rogo redo").unwrap()), Some("S01820"));
        // A canonical exact match beats prefix siblings.
        assert_eq!(resolved(&resolve_station(&l, "Monza").unwrap()), Some("S01322"));
        // Too vague: several candidates to ask about, at most eight.
        match resolve_station(&l, "Milano").unwrap() {
            StationResolution::AmbiguousStation { candidates } => {
                assert_eq!(candidates.len(), 4);
                assert!(candidates.windows(2).all(|w| w[0].1 >= w[1].1));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(resolve_station(&l, "Zurigo").unwrap(), StationResolution::NotFound);
        assert_eq!(resolve_station(&l, " ?! ").unwrap(), StationResolution::NotFound);
    }

    #[test]
    fn scores_follow_the_formula() {
        assert!((similarity("roma termini", "roma termini") - 1.0).abs() < 1e-9);
        // Containment: compact "milanorogoredo" equals the candidate's compact form.
        assert!(similarity("milano rogo redo", "milano rogoredo") >= 0.92 - 1e-9);
        let far = similarity("roma termini", "milano centrale");
        assert!(far < 0.5, "{far}");
        assert_eq!(normalize("  Forlì-Cesena (FC) "), "forli cesena fc");
        assert_eq!(normalize("L'Aquila"), "l aquila");
    }
}
