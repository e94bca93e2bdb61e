//! Editing one event of an iCalendar item in place, at the level of its content lines
//! (RFC 5545 §3.1): the lines Steward changes are replaced, every other line — properties it
//! does not know, alarms, other events, time zone definitions, other overrides — is kept as
//! the source wrote it. A person's or another app's data never goes through a parse and
//! re-serialization that could drop it.

use chrono::NaiveDateTime;

/// The lines of `text`, unfolded (a line that starts with a space or tab continues the one
/// before it).
pub(crate) fn unfold(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split('\n') {
        let l = raw.strip_suffix('\r').unwrap_or(raw);
        match (l.strip_prefix([' ', '\t']), out.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ if l.is_empty() => {}
            _ => out.push(l.to_owned()),
        }
    }
    out
}

/// `lines` folded at 75 octets, each ended by CRLF.
pub(crate) fn fold(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        super::write::line(&mut out, l);
    }
    out
}

/// Where a line's value starts: after the first `:` outside a quoted parameter value.
fn colon(line: &str) -> Option<usize> {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ':' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// A line's property name, uppercase.
pub(crate) fn name(line: &str) -> String {
    let end = line.find([';', ':']).unwrap_or(line.len());
    line[..end].to_ascii_uppercase()
}

/// A line's parameters (`;TZID=Europe/Rome`), as written.
fn params(line: &str) -> &str {
    let start = line.find([';', ':']).unwrap_or(line.len());
    let end = colon(line).unwrap_or(line.len());
    if start < end && line[start..].starts_with(';') { &line[start..end] } else { "" }
}

/// A line's value.
pub(crate) fn value(line: &str) -> &str {
    colon(line).map_or("", |i| &line[i + 1..])
}

/// One VEVENT of the item: the indexes of its `BEGIN` and `END` lines.
#[derive(Debug, Clone, Copy)]
struct Block {
    begin: usize,
    end: usize,
}

/// Every VEVENT directly inside a VCALENDAR.
fn blocks(lines: &[String]) -> Vec<Block> {
    let mut out = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    let mut begin = None;
    for (i, l) in lines.iter().enumerate() {
        match name(l).as_str() {
            "BEGIN" => {
                let what = value(l).trim().to_ascii_uppercase();
                if what == "VEVENT" && stack.len() == 1 && stack[0] == "VCALENDAR" {
                    begin = Some(i);
                }
                stack.push(what);
            }
            "END" => {
                let what = value(l).trim().to_ascii_uppercase();
                if what == "VEVENT"
                    && stack.len() == 2
                    && let Some(b) = begin.take()
                {
                    out.push(Block { begin: b, end: i });
                }
                stack.pop();
            }
            _ => {}
        }
    }
    out
}

/// The indexes of a block's own property lines (not those of an alarm inside it).
fn own(lines: &[String], b: Block) -> Vec<usize> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate().take(b.end).skip(b.begin + 1) {
        match name(l).as_str() {
            "BEGIN" => depth += 1,
            "END" => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(i),
            _ => {}
        }
    }
    out
}

fn prop<'a>(lines: &'a [String], b: Block, what: &str) -> Option<&'a str> {
    own(lines, b).into_iter().map(|i| lines[i].as_str()).find(|l| name(l) == what)
}

/// How the item writes a time, from its DTSTART line: a date, UTC, a zone's wall clock
/// (parameters as written, so the item's own VTIMEZONE still applies) or floating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Form {
    /// `;VALUE=DATE:20250401`.
    Date,
    /// `:20250401T090000Z`.
    Utc,
    /// `;TZID=…:20250401T090000`, the parameters as written.
    Zoned(String),
    /// `:20250401T090000`.
    Floating,
}

impl Form {
    fn of(line: &str) -> Self {
        let p = params(line);
        if value(line).trim().len() == 8
            || p.to_ascii_uppercase().contains("VALUE=DATE;")
            || p.to_ascii_uppercase().ends_with("VALUE=DATE")
        {
            Self::Date
        } else if value(line).trim().ends_with(['Z', 'z']) {
            Self::Utc
        } else if p.to_ascii_uppercase().contains("TZID=") {
            Self::Zoned(p.to_owned())
        } else {
            Self::Floating
        }
    }

    /// The line `NAME…:value` of the wall-clock time `wall` (a date: its day) in this form.
    pub(crate) fn line(&self, name: &str, wall: NaiveDateTime) -> String {
        match self {
            Self::Date => format!("{name};VALUE=DATE:{}", wall.format("%Y%m%d")),
            Self::Utc => format!("{name}:{}", wall.format("%Y%m%dT%H%M%SZ")),
            Self::Zoned(p) => format!("{name}{p}:{}", wall.format("%Y%m%dT%H%M%S")),
            Self::Floating => format!("{name}:{}", wall.format("%Y%m%dT%H%M%S")),
        }
    }
}

/// What one edit changes in the event it selects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Changes {
    /// SUMMARY.
    pub summary: Option<String>,
    /// LOCATION (empty: removed).
    pub location: Option<String>,
    /// DESCRIPTION (empty: removed).
    pub description: Option<String>,
    /// The new DTSTART and DTEND lines, whole.
    pub times: Option<(String, String)>,
    /// DTSTAMP (and LAST-MODIFIED where the item keeps one), `YYYYMMDDTHHMMSSZ`.
    pub stamp: String,
}

/// Why an item cannot be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct EditError(pub String);

/// The master's DTSTART form, so a new override's times are written like its own.
pub(crate) fn master_form(text: &str, uid: &str) -> Result<Form, EditError> {
    let lines = unfold(text);
    let b = find(&lines, uid, None)?;
    prop(&lines, b, "DTSTART")
        .map(Form::of)
        .ok_or_else(|| EditError("the event has no DTSTART".into()))
}

/// Why [`find`] found no override.
const NO_OVERRIDE: &str = "no such override";

/// The block of `uid` (the master, or the override whose RECURRENCE-ID value is `rid`).
fn find(lines: &[String], uid: &str, rid: Option<&str>) -> Result<Block, EditError> {
    let found: Vec<Block> = blocks(lines)
        .into_iter()
        .filter(|b| prop(lines, *b, "UID").is_some_and(|l| super::write::unescape(value(l)) == uid))
        .filter(|b| match (prop(lines, *b, "RECURRENCE-ID"), rid) {
            (None, None) => true,
            (Some(l), Some(r)) => {
                value(l).trim().trim_end_matches(['Z', 'z']) == r.trim_end_matches(['Z', 'z'])
            }
            _ => false,
        })
        .collect();
    match found.as_slice() {
        [b] => Ok(*b),
        [] if rid.is_none() => Err(EditError(format!("the item holds no event {uid:?}"))),
        [] => Err(EditError(NO_OVERRIDE.into())),
        _ => Err(EditError(format!("the item holds event {uid:?} more than once"))),
    }
}

/// Whether the override of `uid` at `rid` (RECURRENCE-ID value as written, `20250407T090000`)
/// is in `text`.
#[cfg(test)]
pub(crate) fn has_override(text: &str, uid: &str, rid: &str) -> bool {
    find(&unfold(text), uid, Some(rid)).is_ok()
}

/// Sets `what` in block `b` to `line` (`None`: removes it): the first such line is replaced,
/// any other goes; a new one goes before the block's END.
fn set(lines: &mut Vec<String>, b: &mut Block, what: &str, line: Option<String>) {
    let at: Vec<usize> = own(lines, *b).into_iter().filter(|i| name(&lines[*i]) == what).collect();
    let mut line = line;
    for (n, i) in at.iter().enumerate().rev() {
        if n == 0
            && let Some(l) = line.take()
        {
            lines[*i] = l;
            continue;
        }
        lines.remove(*i);
        b.end -= 1;
    }
    if let Some(l) = line {
        lines.insert(b.end, l);
        b.end += 1;
    }
}

/// One occurrence of a repeating event to change.
#[derive(Debug, Clone)]
pub(crate) struct Occurrence {
    /// Its RECURRENCE-ID value as the item writes it (`20250407T090000`, `…Z`, `20250407`).
    pub rid: String,
    /// The RECURRENCE-ID line of a new override (the master's form).
    pub line: String,
    /// Whether the store holds an override for it: then the item must too, and it is edited;
    /// otherwise one is made.
    pub exists: bool,
}

/// `text` with the event `uid` changed — the master, or one occurrence's override (made, when
/// there is none, from a copy of the master without its rules) — its SEQUENCE raised above
/// the master's and DTSTAMP set; with the SEQUENCE written.
pub(crate) fn edit(
    text: &str,
    uid: &str,
    occurrence: Option<&Occurrence>,
    changes: &Changes,
) -> Result<(String, i64), EditError> {
    let mut lines = unfold(text);
    let master = find(&lines, uid, None)?;
    let seq = |lines: &[String], b: Block| {
        prop(lines, b, "SEQUENCE").and_then(|l| value(l).trim().parse::<i64>().ok())
    };
    // Read before any line moves.
    let master_seq = seq(&lines, master);
    let mut b = match occurrence {
        None => master,
        Some(o) => match find(&lines, uid, Some(&o.rid)) {
            Ok(b) => b,
            Err(e) if o.exists || e.0 != NO_OVERRIDE => {
                // Never a second override of one occurrence, nor one beside an item the store
                // read otherwise.
                return Err(EditError(format!("the occurrence's override: {e}")));
            }
            Err(_) => {
                // A new override: the master's own lines but its rules and times.
                const NOT_COPIED: [&str; 9] = [
                    "RRULE",
                    "RDATE",
                    "EXDATE",
                    "EXRULE",
                    "RECURRENCE-ID",
                    "DTSTART",
                    "DTEND",
                    "DURATION",
                    "DTSTAMP",
                ];
                let mut block = vec!["BEGIN:VEVENT".to_owned()];
                block.extend(
                    own(&lines, master)
                        .into_iter()
                        .map(|i| lines[i].clone())
                        .filter(|l| !NOT_COPIED.contains(&name(l).as_str())),
                );
                block.push(o.line.clone());
                block.push("END:VEVENT".to_owned());
                let at = master.end + 1;
                let n = block.len();
                lines.splice(at..at, block);
                Block { begin: at, end: at + n - 1 }
            }
        },
    };
    if occurrence.is_none() && changes.times.is_some() {
        let repeats = ["RRULE", "RDATE"].iter().any(|p| prop(&lines, b, p).is_some());
        if repeats {
            return Err(EditError(
                "the event repeats: change one occurrence's times (occurrence)".into(),
            ));
        }
    }
    if let Some(s) = &changes.summary {
        set(&mut lines, &mut b, "SUMMARY", Some(format!("SUMMARY:{}", super::write::escape(s))));
    }
    for (what, v) in [("LOCATION", &changes.location), ("DESCRIPTION", &changes.description)] {
        if let Some(v) = v {
            let l = (!v.trim().is_empty()).then(|| format!("{what}:{}", super::write::escape(v)));
            set(&mut lines, &mut b, what, l);
        }
    }
    if let Some((start, end)) = &changes.times {
        set(&mut lines, &mut b, "DURATION", None);
        set(&mut lines, &mut b, "DTSTART", Some(start.clone()));
        set(&mut lines, &mut b, "DTEND", Some(end.clone()));
    }
    let next = seq(&lines, b).max(master_seq).unwrap_or(0).saturating_add(1);
    set(&mut lines, &mut b, "SEQUENCE", Some(format!("SEQUENCE:{next}")));
    set(&mut lines, &mut b, "DTSTAMP", Some(format!("DTSTAMP:{}", changes.stamp)));
    if prop(&lines, b, "LAST-MODIFIED").is_some() {
        set(&mut lines, &mut b, "LAST-MODIFIED", Some(format!("LAST-MODIFIED:{}", changes.stamp)));
    }
    Ok((fold(&lines), next))
}

/// An iTIP invitation (RFC 5546 `METHOD:REQUEST`) for one event of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invitation {
    /// The iCalendar object to send.
    pub text: String,
    /// Who is invited (the event's attendees but the organizer), lowercase.
    pub attendees: Vec<String>,
}

/// The address of an ORGANIZER or ATTENDEE line, lowercase (`mailto:` dropped).
fn mailto(line: &str) -> String {
    let v = value(line).trim();
    let v = match v.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("mailto:") => &v[7..],
        _ => v,
    };
    v.trim().to_lowercase()
}

/// The invitation to the event `uid` of `text` (its master and overrides, with the item's time
/// zone definitions), sent by `organizer`: refused when the event names another organizer
/// (only the organizer invites) or has nobody to invite. An event without an organizer gets
/// `organizer` in the invitation.
pub(crate) fn itip_request(
    text: &str,
    uid: &str,
    organizer: &str,
    stamp: &str,
) -> Result<Invitation, EditError> {
    let lines = unfold(text);
    let organizer = organizer.trim().to_lowercase();
    let master = find(&lines, uid, None)?;
    let ours: Vec<Block> = blocks(&lines)
        .into_iter()
        .filter(|b| {
            prop(&lines, *b, "UID").is_some_and(|l| super::write::unescape(value(l)) == uid)
        })
        .collect();
    let mut attendees: Vec<String> = Vec::new();
    for l in own(&lines, master).into_iter().map(|i| &lines[i]).filter(|l| name(l) == "ATTENDEE") {
        let a = mailto(l);
        if !a.is_empty() && a != organizer && !attendees.contains(&a) {
            attendees.push(a);
        }
    }
    if attendees.is_empty() {
        return Err(EditError("the event has no attendees to invite: add them first".into()));
    }
    let mut out: Vec<String> =
        ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Steward//Steward//EN", "METHOD:REQUEST"]
            .map(str::to_owned)
            .to_vec();
    // The item's own zone definitions, so its TZIDs resolve for the invitee.
    let mut depth = 0usize;
    let mut in_tz = false;
    for l in &lines {
        let n = name(l);
        let what = value(l).trim().to_ascii_uppercase();
        if n == "BEGIN" {
            depth += 1;
            in_tz |= depth == 2 && what == "VTIMEZONE";
        }
        if in_tz {
            out.push(l.clone());
        }
        if n == "END" {
            if depth == 2 && what == "VTIMEZONE" {
                in_tz = false;
            }
            depth = depth.saturating_sub(1);
        }
    }
    for b in ours {
        let mut block: Vec<String> = lines[b.begin..=b.end].to_vec();
        let mut bb = Block { begin: 0, end: block.len() - 1 };
        match prop(&block, bb, "ORGANIZER").map(mailto) {
            Some(o) if o != organizer => {
                return Err(EditError(format!(
                    "the event's organizer is {o}: only the organizer sends invitations"
                )));
            }
            Some(_) => {}
            None => {
                set(&mut block, &mut bb, "ORGANIZER", Some(format!("ORGANIZER:mailto:{organizer}")))
            }
        }
        set(&mut block, &mut bb, "DTSTAMP", Some(format!("DTSTAMP:{stamp}")));
        out.extend(block);
    }
    out.push("END:VCALENDAR".to_owned());
    Ok(Invitation { text: fold(&out), attendees })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEM: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Other//App//EN\r\n\
        BEGIN:VTIMEZONE\r\nTZID:W. Europe\r\nBEGIN:STANDARD\r\nDTSTART:16010101T030000\r\n\
        TZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n\
        BEGIN:VEVENT\r\nUID:s@x\r\nDTSTAMP:20250101T000000Z\r\n\
        DTSTART;TZID=\"W. Europe\":20250303T090000\r\nDURATION:PT30M\r\n\
        RRULE:FREQ=WEEKLY;COUNT=5\r\nSUMMARY:Stand-up\r\nX-APP-COLOR:teal\r\n\
        DESCRIPTION:a long description that is folded\r\n  over two lines\r\n\
        BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:ring\r\nTRIGGER:-PT5M\r\nEND:VALARM\r\n\
        END:VEVENT\r\nEND:VCALENDAR\r\n";

    fn stamp() -> Changes {
        Changes { stamp: "20260101T120000Z".into(), ..Changes::default() }
    }

    #[test]
    fn a_title_change_keeps_every_other_line_as_written() {
        let c = Changes { summary: Some("Stand-up, daily".into()), ..stamp() };
        let (out, _) = edit(ITEM, "s@x", None, &c).unwrap();
        let lines = unfold(&out);
        assert!(lines.contains(&"SUMMARY:Stand-up\\, daily".to_owned()), "{out}");
        assert!(lines.contains(&"SEQUENCE:1".to_owned()));
        assert!(lines.contains(&"DTSTAMP:20260101T120000Z".to_owned()));
        for kept in [
            "X-APP-COLOR:teal",
            "RRULE:FREQ=WEEKLY;COUNT=5",
            "DESCRIPTION:ring",
            "TZID:W. Europe",
            "DESCRIPTION:a long description that is folded over two lines",
        ] {
            assert!(lines.contains(&kept.to_owned()), "{kept} kept: {out}");
        }
        assert_eq!(lines.len(), unfold(ITEM).len() + 1, "one SEQUENCE line more: {out}");
        assert!(out.split("\r\n").all(|l| l.len() <= 75));
    }

    #[test]
    fn a_repeating_events_times_change_only_per_occurrence() {
        let form = master_form(ITEM, "s@x").unwrap();
        assert_eq!(form, Form::Zoned(";TZID=\"W. Europe\"".into()));
        let wall = |s| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M").unwrap();
        let times = (
            form.line("DTSTART", wall("2025-03-11T10:00")),
            form.line("DTEND", wall("2025-03-11T10:30")),
        );
        let c = Changes { times: Some(times), ..stamp() };
        let e = edit(ITEM, "s@x", None, &c).unwrap_err();
        assert!(e.0.contains("occurrence"), "{e}");
        let new = Occurrence {
            rid: "20250310T090000".into(),
            line: form.line("RECURRENCE-ID", wall("2025-03-10T09:00")),
            exists: false,
        };
        let (out, _) = edit(ITEM, "s@x", Some(&new), &c).unwrap();
        let lines = unfold(&out);
        assert!(has_override(&out, "s@x", "20250310T090000"));
        let blocks = blocks(&lines);
        assert_eq!(blocks.len(), 2, "{out}");
        let o = blocks[1];
        assert_eq!(prop(&lines, o, "RRULE"), None, "the override does not repeat");
        assert_eq!(prop(&lines, o, "DTSTART"), Some("DTSTART;TZID=\"W. Europe\":20250311T100000"));
        assert_eq!(prop(&lines, o, "X-APP-COLOR"), Some("X-APP-COLOR:teal"));
        assert_eq!(prop(&lines, blocks[0], "DURATION"), Some("DURATION:PT30M"), "master kept");
        // The same occurrence again edits the override, not a second one.
        let c2 = Changes { summary: Some("Moved stand-up".into()), ..stamp() };
        let known = Occurrence { exists: true, ..new };
        let (again, n) = edit(&out, "s@x", Some(&known), &c2).unwrap();
        assert_eq!(n, 2);
        assert_eq!(blocks_of(&again), 2);
        assert!(unfold(&again).contains(&"SEQUENCE:2".to_owned()), "{again}");
        // An override the store knows but the item writes otherwise is not made twice.
        let elsewhere = Occurrence { rid: "20250310T080000Z".into(), ..known.clone() };
        assert!(edit(&out, "s@x", Some(&elsewhere), &c2).is_err());
        // An override written before its master still ends above the master's SEQUENCE.
        let seven =
            out.replace("RRULE:FREQ=WEEKLY;COUNT=5", "RRULE:FREQ=WEEKLY;COUNT=5\r\nSEQUENCE:7");
        let lines = unfold(&seven);
        let bs = super::blocks(&lines);
        let mut swapped = lines[..bs[0].begin].to_vec();
        swapped.extend_from_slice(&lines[bs[1].begin..=bs[1].end]);
        swapped.extend_from_slice(&lines[bs[0].begin..=bs[0].end]);
        swapped.push("END:VCALENDAR".into());
        let (out, _) = edit(&fold(&swapped), "s@x", Some(&known), &c2).unwrap();
        assert!(unfold(&out).contains(&"SEQUENCE:8".to_owned()), "{out}");
    }

    fn blocks_of(text: &str) -> usize {
        blocks(&unfold(text)).len()
    }

    #[test]
    fn an_invitation_carries_the_event_its_zones_and_the_organizer_and_never_anothers() {
        let with = ITEM.replace(
            "SUMMARY:Stand-up\r\n",
            "SUMMARY:Stand-up\r\nATTENDEE;RSVP=TRUE:mailto:Anna@Example.it\r\n\
             ATTENDEE:MAILTO:ada@example.org\r\n",
        );
        let inv = itip_request(&with, "s@x", "Ada@example.org", "20260101T120000Z").unwrap();
        assert_eq!(inv.attendees, ["anna@example.it"], "the organizer is not invited");
        let lines = unfold(&inv.text);
        for l in [
            "METHOD:REQUEST",
            "TZID:W. Europe",
            "ORGANIZER:mailto:ada@example.org",
            "DTSTAMP:20260101T120000Z",
            "RRULE:FREQ=WEEKLY;COUNT=5",
            "TRIGGER:-PT5M",
        ] {
            assert!(lines.contains(&l.to_owned()), "{l}: {}", inv.text);
        }
        assert_eq!(blocks(&lines).len(), 1);
        // Another's event, or one with nobody to invite, is refused.
        let theirs = with
            .replace("SUMMARY:Stand-up\r\n", "SUMMARY:Stand-up\r\nORGANIZER:mailto:bob@x.org\r\n");
        assert!(
            itip_request(&theirs, "s@x", "ada@example.org", "x")
                .unwrap_err()
                .0
                .contains("bob@x.org")
        );
        assert!(
            itip_request(ITEM, "s@x", "ada@example.org", "x")
                .unwrap_err()
                .0
                .contains("no attendees")
        );
    }

    #[test]
    fn an_item_without_the_event_or_with_it_twice_is_refused() {
        assert!(edit(ITEM, "other@x", None, &stamp()).is_err());
        let twice =
            ITEM.replace("END:VCALENDAR\r\n", "") + &ITEM[ITEM.find("BEGIN:VEVENT").unwrap()..];
        // A summary whose 7th byte is inside a character is no address (and no panic).
        let wide =
            ITEM.replace("SUMMARY:Stand-up", "SUMMARY:会議の準備\r\nATTENDEE:会議の準備@例え.jp");
        assert!(itip_request(&wide, "s@x", "a@b.c", "x").is_ok());
        assert!(edit(&twice, "s@x", None, &stamp()).unwrap_err().0.contains("more than once"));
    }
}
