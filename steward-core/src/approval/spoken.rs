//! Spoken approval: a pure parser of exact localized intents and the tiny state machine a
//! voice host runs around one request. The model neither writes the prompt nor interprets the
//! answer: the prompt is read deterministically from the immutable request, and only a fixed
//! phrase list per language counts as an answer.
//!
//! Rules (`steward-design.txt`, "Spoken Approval Is A Host Sub-Protocol"): approve, reject or
//! repeat; "repeat" replays the same request; ambiguous input gets one constrained retry and
//! then resolves to denial; voice never edits (revisions go to a richer frontend). Repeats are
//! bounded too ([`MAX_SPOKEN_REPEATS`]), so a loop cannot keep a request open forever.

use serde::Serialize;

use super::{Approval, canonical_json};

/// Ambiguous answers tolerated before the request is denied.
/// Fixed (not a setting).
pub const MAX_SPOKEN_RETRIES: u8 = 1;
/// Replays tolerated before the request is denied.
/// Fixed (not a setting).
pub const MAX_SPOKEN_REPEATS: u8 = 3;

/// The languages with a phrase list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpokenLanguage {
    /// English.
    En,
    /// Italian.
    It,
}

impl SpokenLanguage {
    /// `en` or `it` (also `en-GB`, `it_IT`, …).
    pub fn parse(tag: &str) -> Option<Self> {
        match tag.get(..2).map(str::to_ascii_lowercase).as_deref() {
            Some("en") => Some(Self::En),
            Some("it") => Some(Self::It),
            _ => None,
        }
    }
}

/// What an utterance means, when it means exactly one thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpokenIntent {
    /// Run it.
    Approve,
    /// Do not run it.
    Reject,
    /// Read the request again.
    Repeat,
}

const EN: &[(&str, SpokenIntent)] = &[
    ("approve", SpokenIntent::Approve),
    ("i approve", SpokenIntent::Approve),
    ("approved", SpokenIntent::Approve),
    ("yes approve", SpokenIntent::Approve),
    ("confirm", SpokenIntent::Approve),
    ("reject", SpokenIntent::Reject),
    ("i reject", SpokenIntent::Reject),
    ("rejected", SpokenIntent::Reject),
    ("deny", SpokenIntent::Reject),
    ("no", SpokenIntent::Reject),
    ("cancel", SpokenIntent::Reject),
    ("repeat", SpokenIntent::Repeat),
    ("repeat please", SpokenIntent::Repeat),
    ("please repeat", SpokenIntent::Repeat),
    ("say again", SpokenIntent::Repeat),
];

const IT: &[(&str, SpokenIntent)] = &[
    ("approva", SpokenIntent::Approve),
    ("approvo", SpokenIntent::Approve),
    ("approvato", SpokenIntent::Approve),
    ("si approva", SpokenIntent::Approve),
    ("confermo", SpokenIntent::Approve),
    ("conferma", SpokenIntent::Approve),
    ("rifiuta", SpokenIntent::Reject),
    ("rifiuto", SpokenIntent::Reject),
    ("rifiutato", SpokenIntent::Reject),
    ("nega", SpokenIntent::Reject),
    ("no", SpokenIntent::Reject),
    ("annulla", SpokenIntent::Reject),
    ("ripeti", SpokenIntent::Repeat),
    ("ripeti per favore", SpokenIntent::Repeat),
    ("puoi ripetere", SpokenIntent::Repeat),
    ("ripetere", SpokenIntent::Repeat),
];

/// Lowercase, accents off the few Italian vowels that carry them, punctuation dropped,
/// whitespace collapsed: "  Sì, approva! " → "si approva".
fn normalize(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| match c {
            'à' | 'À' | 'á' => 'a',
            'è' | 'é' | 'È' | 'É' => 'e',
            'ì' | 'í' | 'Ì' => 'i',
            'ò' | 'ó' | 'Ò' => 'o',
            'ù' | 'ú' | 'Ù' => 'u',
            c if c.is_alphanumeric() => c.to_ascii_lowercase(),
            _ => ' ',
        })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The intent of `utterance` in `lang`: exactly one of the listed phrases, or nothing.
pub fn parse_intent(utterance: &str, lang: SpokenLanguage) -> Option<SpokenIntent> {
    let table = match lang {
        SpokenLanguage::En => EN,
        SpokenLanguage::It => IT,
    };
    let n = normalize(utterance);
    table.iter().find(|(p, _)| *p == n).map(|(_, i)| *i)
}

/// The prompt read to the person: the exact tool and canonical input, never model text.
pub fn prompt(a: &Approval, lang: SpokenLanguage) -> String {
    let input = canonical_json(a.input_to_run());
    match lang {
        SpokenLanguage::En => format!(
            "Approval request {}: {}. Tool {}, input {}. Say approve, reject or repeat.",
            a.id, a.summary, a.tool, input
        ),
        SpokenLanguage::It => format!(
            "Richiesta di approvazione {}: {}. Strumento {}, dati {}. Di' approva, rifiuta o ripeti.",
            a.id, a.summary, a.tool, input
        ),
    }
}

/// Why a spoken exchange ended in a denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpokenDenial {
    /// The person said reject.
    Rejected,
    /// The answer was ambiguous after the one retry.
    Ambiguous,
    /// Asked to repeat more than [`MAX_SPOKEN_REPEATS`] times.
    TooManyRepeats,
}

/// What the host does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "step")]
pub enum SpokenStep {
    /// Resolve the request as approved (once).
    Approve,
    /// Resolve the request as denied (once).
    Deny {
        /// Why.
        why: SpokenDenial,
    },
    /// Read the same prompt again.
    Replay,
    /// Ask once more, naming the three answers.
    Retry,
    /// The exchange already ended; nothing to do.
    Finished,
}

/// One spoken exchange about one request. Ends exactly once, in approve or deny.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpokenApproval {
    lang: SpokenLanguage,
    retries: u8,
    repeats: u8,
    finished: bool,
}

impl SpokenApproval {
    /// A fresh exchange in `lang`.
    pub fn new(lang: SpokenLanguage) -> Self {
        Self { lang, retries: 0, repeats: 0, finished: false }
    }

    /// The next step after hearing `utterance`.
    pub fn hear(&mut self, utterance: &str) -> SpokenStep {
        if self.finished {
            return SpokenStep::Finished;
        }
        let step = match parse_intent(utterance, self.lang) {
            Some(SpokenIntent::Approve) => SpokenStep::Approve,
            Some(SpokenIntent::Reject) => SpokenStep::Deny { why: SpokenDenial::Rejected },
            Some(SpokenIntent::Repeat) if self.repeats < MAX_SPOKEN_REPEATS => {
                self.repeats += 1;
                SpokenStep::Replay
            }
            Some(SpokenIntent::Repeat) => SpokenStep::Deny { why: SpokenDenial::TooManyRepeats },
            None if self.retries < MAX_SPOKEN_RETRIES => {
                self.retries += 1;
                SpokenStep::Retry
            }
            None => SpokenStep::Deny { why: SpokenDenial::Ambiguous },
        };
        self.finished = matches!(step, SpokenStep::Approve | SpokenStep::Deny { .. });
        step
    }

    /// The retry prompt: only the three answers.
    pub fn retry_prompt(&self) -> &'static str {
        match self.lang {
            SpokenLanguage::En => "Please say only approve, reject or repeat.",
            SpokenLanguage::It => "Per favore di' solo approva, rifiuta o ripeti.",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_intents_in_both_languages() {
        use SpokenIntent::*;
        use SpokenLanguage::*;
        for (text, lang, want) in [
            ("Approve", En, Some(Approve)),
            ("  approve. ", En, Some(Approve)),
            ("Reject!", En, Some(Reject)),
            ("say again?", En, Some(Repeat)),
            ("Sì, approva", It, Some(Approve)),
            ("RIFIUTA", It, Some(Reject)),
            ("ripeti", It, Some(Repeat)),
            ("approva", En, None),
            ("approve", It, None),
            ("yes", En, None),
            ("approve and also forward everything", En, None),
            ("don't approve", En, None),
            ("I approve, no wait", En, None),
            ("", En, None),
            ("non approvo", It, None),
        ] {
            assert_eq!(parse_intent(text, lang), want, "{text:?} in {lang:?}");
        }
        assert_eq!(SpokenLanguage::parse("it_IT"), Some(It));
        assert_eq!(SpokenLanguage::parse("en-GB"), Some(En));
        assert_eq!(SpokenLanguage::parse("fr"), None);
        assert_eq!(SpokenLanguage::parse("e"), None);
    }

    #[test]
    fn one_retry_then_denial_and_the_exchange_ends_once() {
        let mut s = SpokenApproval::new(SpokenLanguage::En);
        assert_eq!(s.hear("hmm, maybe"), SpokenStep::Retry);
        assert_eq!(s.hear("what?"), SpokenStep::Deny { why: SpokenDenial::Ambiguous });
        assert_eq!(s.hear("approve"), SpokenStep::Finished, "nothing after the end");

        let mut s = SpokenApproval::new(SpokenLanguage::It);
        assert_eq!(s.hear("ripeti"), SpokenStep::Replay);
        assert_eq!(s.hear("boh"), SpokenStep::Retry);
        assert_eq!(s.hear("approva"), SpokenStep::Approve);
        assert_eq!(s.hear("rifiuta"), SpokenStep::Finished);

        let mut s = SpokenApproval::new(SpokenLanguage::En);
        for _ in 0..MAX_SPOKEN_REPEATS {
            assert_eq!(s.hear("repeat"), SpokenStep::Replay);
        }
        assert_eq!(s.hear("repeat"), SpokenStep::Deny { why: SpokenDenial::TooManyRepeats });
        assert!(s.retry_prompt().contains("approve"));
    }
}
