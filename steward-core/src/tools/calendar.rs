//! The calendar tools: `calendar.agenda`, `calendar.free_busy` and `calendar.search` over
//! `calendar.db`, times in the person's zone. Event text is data (invitations are written by
//! others).

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, fitting};
use crate::{
    calendar::{
        AgendaItem, DEFAULT_SLOT_MINUTES, instant_in,
        store::{EventQuery, event_id},
        write::{CalendarTarget, CalendarWrite, EventUpdate, NewEvent},
    },
    journal::Operation,
    policy::catalog::{
        CalendarAgendaInput, CalendarCreateInput, CalendarDeleteInput, CalendarFreeBusyInput,
        CalendarInviteInput, CalendarSearchInput, CalendarUpdateInput,
    },
};

/// Events `calendar.search` returns when the input does not say.
/// Fixed (not a setting).
pub const CALENDAR_DEFAULT_LIMIT: u32 = 10;

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "calendar.agenda",
            Arc::new(Typed::new(
                |i: &CalendarAgendaInput| format!("Agenda {} to {}", i.from, i.to),
                agenda,
            )),
        ),
        (
            "calendar.free_busy",
            Arc::new(Typed::new(
                |i: &CalendarFreeBusyInput| format!("Free time {} to {}", i.from, i.to),
                free_busy,
            )),
        ),
        (
            "calendar.search",
            Arc::new(Typed::new(
                |i: &CalendarSearchInput| format!("Search calendars for {:?}", i.query),
                search,
            )),
        ),
    ]
}

fn when(i: &AgendaItem) -> String {
    if i.all_day {
        let last = (i.end - chrono::Duration::seconds(1)).date_naive();
        let first = i.start.date_naive();
        if last > first {
            format!("{} to {} (all day)", first.format("%a %Y-%m-%d"), last.format("%a %Y-%m-%d"))
        } else {
            format!("{} (all day)", first.format("%a %Y-%m-%d"))
        }
    } else {
        format!("{}–{}", i.start.format("%a %Y-%m-%d %H:%M"), i.end.format("%H:%M %:z"))
    }
}

fn line(calendar: &str, i: &AgendaItem) -> String {
    let at = i.location.as_deref().map_or_else(String::new, |l| format!(" @ {l}"));
    let mut flags = Vec::new();
    if i.status.as_deref() == Some("tentative") {
        flags.push("tentative");
    }
    if i.transparent {
        flags.push("free");
    }
    let flags = if flags.is_empty() { String::new() } else { format!(" ({})", flags.join(", ")) };
    format!("- {} {}{at}{flags} [{calendar}]", when(i), i.summary)
}

fn window(
    run: &ToolRun<'_>,
    from: &str,
    to: &str,
) -> Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>), ExecError> {
    let zone = run.steward.calendar_settings().zone;
    Ok((instant_in(from, zone)?, instant_in(to, zone)?))
}

fn agenda(run: &ToolRun<'_>, i: CalendarAgendaInput) -> Result<ToolOutput, ExecError> {
    let (from, to) = window(run, &i.from, &i.to)?;
    let items = run.steward.agenda(from, to)?;
    let header = format!("Agenda {} to {} ({} occurrences):", i.from, i.to, items.len());
    if items.is_empty() {
        return Ok(ToolOutput {
            text: format!("{header}\nNothing."),
            data: json!({ "ids": [] }),
            ..ToolOutput::default()
        });
    }
    let lines: Vec<String> = items.iter().map(|o| line(&o.calendar, &o.item)).collect();
    let keep = fitting(&lines, header.chars().count() + 60, run.budget_chars);
    let rest = if keep < lines.len() {
        format!("\n({} more: ask for a shorter window)", lines.len() - keep)
    } else {
        String::new()
    };
    let ids: Vec<String> =
        items[..keep].iter().map(|o| event_id(&o.calendar, &o.item.uid, "")).collect();
    Ok(ToolOutput {
        text: format!("{header}\n{}{rest}", lines[..keep].join("\n")),
        sources: ids.iter().map(|id| SourceRef::Event { id: id.clone() }).collect(),
        data: json!({ "ids": ids }),
        ..ToolOutput::default()
    })
}

fn free_busy(run: &ToolRun<'_>, i: CalendarFreeBusyInput) -> Result<ToolOutput, ExecError> {
    let min = i.min_minutes.map_or(DEFAULT_SLOT_MINUTES, i64::from);
    let (from, to) = window(run, &i.from, &i.to)?;
    let fb = run.steward.free_busy(from, to, min)?;
    let hours = run.steward.calendar_settings().hours;
    let header = format!(
        "Free slots of {min} minutes or more, {} to {} (working hours {}–{}):",
        i.from,
        i.to,
        hours.start.format("%H:%M"),
        hours.end.format("%H:%M")
    );
    let lines: Vec<String> = fb
        .free
        .iter()
        .map(|s| {
            format!(
                "- {}–{} ({} min)",
                s.start.format("%a %Y-%m-%d %H:%M"),
                s.end.format("%H:%M %:z"),
                s.minutes()
            )
        })
        .collect();
    let body = if lines.is_empty() {
        "None.".to_owned()
    } else {
        let keep = fitting(&lines, header.chars().count() + 60, run.budget_chars);
        lines[..keep].join("\n")
    };
    Ok(ToolOutput {
        text: format!("{header}\n{body}\nBusy: {} occurrence(s) in the window.", fb.busy.len()),
        // Times only: no event's own text (an invitation's summary is someone else's words).
        data: json!({
            "free": fb.free,
            "busy": fb.busy.iter().map(|b| json!({
                "start": b.span.start, "end": b.span.end, "all_day": b.all_day, "tentative": b.tentative,
            })).collect::<Vec<_>>(),
        }),
        // Only times and counts: no event text reaches the model here.
        ..ToolOutput::default()
    })
}

fn search(run: &ToolRun<'_>, i: CalendarSearchInput) -> Result<ToolOutput, ExecError> {
    let limit = i.limit.unwrap_or(CALENDAR_DEFAULT_LIMIT);
    if !(1..=20).contains(&limit) {
        return Err(ExecError::invalid(format!("limit {limit}: 1 to 20 events")));
    }
    let zone = run.steward.calendar_settings().zone;
    let at = |t: &Option<String>| t.as_deref().map(|t| instant_in(t, zone)).transpose();
    let q = EventQuery {
        text: Some(i.query.clone()).filter(|t| !t.trim().is_empty()),
        from: at(&i.from)?,
        to: at(&i.to)?,
        attendee: i.attendee.clone(),
        limit: limit as usize,
        ..EventQuery::default()
    };
    let hits = run.steward.search_events(&q)?;
    if hits.is_empty() {
        return Ok(ToolOutput {
            text: "No event matches.".to_owned(),
            data: json!({ "ids": [] }),
            ..ToolOutput::default()
        });
    }
    let header = format!("Events ({}):", hits.len());
    let lines: Vec<String> = hits
        .iter()
        .map(|h| {
            let more = if h.more_occurrences > 0 {
                format!(" (+{} more in the window)", h.more_occurrences)
            } else {
                String::new()
            };
            format!("{}{more}", line(&h.calendar, &h.item))
        })
        .collect();
    let keep = fitting(&lines, header.chars().count(), run.budget_chars);
    Ok(ToolOutput {
        text: format!("{header}\n{}", lines[..keep].join("\n")),
        data: json!({ "ids": hits[..keep].iter().map(|h| &h.id).collect::<Vec<_>>() }),
        sources: hits[..keep].iter().map(|h| SourceRef::Event { id: h.id.clone() }).collect(),
        ..ToolOutput::default()
    })
}

/// The calendar write tools over `targets`; with outgoing mail (`mail`), events with attendees
/// name the person as organizer, and `calendar.invite` sends invitations.
pub(super) fn writers(
    targets: Vec<Arc<dyn CalendarTarget>>,
    mail: Option<(Arc<dyn crate::outbox::MailTransport>, crate::outbox::Sender)>,
) -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    let organizer = mail.as_ref().map(|(_, s)| s.from.clone());
    let w = Arc::new(Writer { targets, organizer });
    let invite = mail.map(|(transport, sender)| {
        let executor: Arc<dyn ToolExecutor> =
            Arc::new(Inviter { writer: Arc::clone(&w), transport, sender });
        ("calendar.invite", executor)
    });
    let (a, b, c) = (Arc::clone(&w), Arc::clone(&w), w);
    let mut tools: Vec<(&'static str, Arc<dyn ToolExecutor>)> = vec![
        (
            "calendar.create_event",
            Arc::new(Typed::new(
                |i: &CalendarCreateInput| {
                    format!("Create \"{}\" from {} to {}", i.title, i.start, i.end)
                },
                move |run, i: CalendarCreateInput| a.create(run, &i),
            )),
        ),
        (
            "calendar.update_event",
            Arc::new(
                Typed::new(
                    |i: &CalendarUpdateInput| format!("Change event {}", i.event_id),
                    move |run, i: CalendarUpdateInput| c.update(run, &i),
                )
                // The card says what changes: the event, the occurrence, from when to when.
                .describe(|steward, i| {
                    Some(steward.plan_event_update(&update_of(i)).ok()?.describe)
                })
                // A change that cannot be made is refused before anyone is asked.
                .check(|steward, i: CalendarUpdateInput| {
                    steward.plan_event_update(&update_of(&i)).map_err(|e| e.to_string())?;
                    Ok(i)
                }),
            ),
        ),
        (
            "calendar.delete_event",
            Arc::new(
                Typed::new(
                    |i: &CalendarDeleteInput| format!("Delete event {}", i.event_id),
                    move |run, i: CalendarDeleteInput| b.delete(run, &i),
                )
                // The card says what goes: the event's title, its calendar, every occurrence.
                .describe(|steward, i| {
                    let item = steward.calendar_store().ok()?.event_item(&i.event_id).ok()??;
                    Some(format!(
                        "Delete \"{}\" from {} (every occurrence, if it repeats)",
                        item.summary, item.calendar
                    ))
                })
                // An event that is not there, or shares its file, is refused before anyone is
                // asked to approve its deletion.
                .check(|steward, i: CalendarDeleteInput| {
                    steward.prepare_event_delete(&i.event_id).map_err(|e| e.to_string())?;
                    Ok(i)
                }),
            ),
        ),
    ];
    tools.extend(invite);
    tools
}

/// Writes events through the journal into the calendar sources that take writes.
struct Writer {
    targets: Vec<Arc<dyn CalendarTarget>>,
    /// The person's address, the organizer of events with attendees.
    organizer: Option<String>,
}

/// `calendar.invite`: the event's invitation, sent through the outbox as the person.
struct Inviter {
    writer: Arc<Writer>,
    transport: Arc<dyn crate::outbox::MailTransport>,
    sender: crate::outbox::Sender,
}

impl ToolExecutor for Inviter {
    fn preflight(
        &self,
        steward: &crate::Steward,
        input: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let mut i: CalendarInviteInput =
            serde_json::from_value(input.clone()).map_err(|e| e.to_string())?;
        // Another's event, or one with nobody to invite, is refused before anyone is asked;
        // the input names exactly whom the card shows, and the mail goes to them only.
        let (who, _) = steward
            .invitation_card(&i.event_id, &self.sender.from, &i.attendees)
            .map_err(|e| e.to_string())?;
        i.attendees = who;
        serde_json::to_value(i).map_err(|e| e.to_string())
    }

    fn summary(&self, steward: &crate::Steward, input: &serde_json::Value) -> String {
        let Ok(i) = serde_json::from_value::<CalendarInviteInput>(input.clone()) else {
            return "Send invitations (unreadable input)".to_owned();
        };
        steward.invitation_card(&i.event_id, &self.sender.from, &i.attendees).map_or_else(
            |e| format!("Send invitations to event {} ({e})", i.event_id),
            |(_, card)| card,
        )
    }

    fn run(&self, run: &ToolRun<'_>, input: &serde_json::Value) -> Result<ToolOutput, ExecError> {
        let i: CalendarInviteInput =
            serde_json::from_value(input.clone()).map_err(|e| ExecError::invalid(e.to_string()))?;
        let value = serde_json::to_value(&i).map_err(|e| ExecError::invalid(e.to_string()))?;
        let (key, approval_id) = super::write_key(run, &value);
        let journal = run.steward.journal()?;
        let op = match journal.find_by_key(&key)? {
            // The same approval run again: the invitation already journaled, never a second.
            Some(op) => op,
            None => {
                let item =
                    run.steward.calendar_store()?.event_item(&i.event_id)?.ok_or_else(|| {
                        ExecError::from(crate::calendar::write::CalendarWriteError::NoEvent(
                            i.event_id.clone(),
                        ))
                    })?;
                let (account, _) = item.calendar.split_once('/').unwrap_or_default();
                let target = self.writer.target(account)?;
                // The invitation is the event as its calendar holds it now.
                let (text, _) = run.steward.read_event_source(&item, target, run.now)?;
                let draft = run.steward.invitation_draft(
                    &i.event_id,
                    &text,
                    &self.sender,
                    &i.attendees,
                    run.now,
                )?;
                let mail = run.steward.prepare_mail(&draft, run.now)?;
                run.steward.send_mail(
                    &mail,
                    &key,
                    approval_id,
                    None,
                    self.transport.as_ref(),
                    run.now,
                )?
            }
        };
        let to = op.input["to"].as_array().map_or(0, Vec::len);
        Ok(super::journaled_output(
            &op,
            &format!(", an invitation to {to} attendee(s)"),
            "from the Sent mailbox",
            json!({}),
        ))
    }
}

impl Writer {
    fn target(&self, account: &str) -> Result<&dyn CalendarTarget, ExecError> {
        self.targets.iter().find(|t| t.account() == account).map(|t| t.as_ref()).ok_or_else(|| {
            ExecError::from(crate::calendar::write::CalendarWriteError::NotWritable(
                account.to_owned(),
            ))
        })
    }

    fn create(&self, run: &ToolRun<'_>, i: &CalendarCreateInput) -> Result<ToolOutput, ExecError> {
        let calendar = match &i.calendar {
            Some(c) => c.clone(),
            None => run
                .steward
                .calendar_store()?
                .calendars()?
                .into_iter()
                .map(|c| c.id)
                .find(|id| {
                    id.split_once('/')
                        .is_some_and(|(a, _)| self.targets.iter().any(|t| t.account() == a))
                })
                .ok_or_else(|| {
                    ExecError::from(crate::calendar::write::CalendarWriteError::NotWritable(
                        "any calendar".to_owned(),
                    ))
                })?,
        };
        let value = serde_json::to_value(i).map_err(|e| ExecError::invalid(e.to_string()))?;
        let (key, approval_id) = super::write_key(run, &value);
        if let Some(out) = journaled(run, &key)? {
            return Ok(out);
        }
        let e = NewEvent {
            title: i.title.clone(),
            start: i.start.clone(),
            end: i.end.clone(),
            location: i.location.clone(),
            description: i.description.clone(),
            attendees: i.attendees.clone(),
            organizer: self.organizer.clone(),
        };
        let w = run.steward.prepare_event_create(&e, &calendar, &key, run.now)?;
        let op =
            run.steward.write_calendar(&w, &key, approval_id, self.target(&w.account)?, run.now)?;
        Ok(written(&w, &op))
    }

    fn delete(&self, run: &ToolRun<'_>, i: &CalendarDeleteInput) -> Result<ToolOutput, ExecError> {
        let value = serde_json::to_value(i).map_err(|e| ExecError::invalid(e.to_string()))?;
        let (key, approval_id) = super::write_key(run, &value);
        if let Some(out) = journaled(run, &key)? {
            return Ok(out);
        }
        let w = run.steward.prepare_event_delete(&i.event_id)?;
        let target = self.target(&w.account)?;
        // Writes to the item still waiting are confirmed from it before it goes (an unread
        // source is no reason not to delete: the delete is conditional on its tag anyway).
        let _ = run.steward.settle_calendar_item(target, &w, run.now);
        let op = run.steward.write_calendar(&w, &key, approval_id, target, run.now)?;
        Ok(written(&w, &op))
    }

    fn update(&self, run: &ToolRun<'_>, i: &CalendarUpdateInput) -> Result<ToolOutput, ExecError> {
        let value = serde_json::to_value(i).map_err(|e| ExecError::invalid(e.to_string()))?;
        let (key, approval_id) = super::write_key(run, &value);
        if let Some(out) = journaled(run, &key)? {
            return Ok(out);
        }
        let plan = run.steward.plan_event_update(&update_of(i))?;
        let (account, _) = plan.item.calendar.split_once('/').unwrap_or_default();
        let target = self.target(account)?;
        // The edit is made on the item as its source holds it now, not on the store's copy.
        let w = run.steward.read_and_prepare_update(&plan, target, run.now)?;
        let op =
            run.steward.write_calendar(&w, &key, approval_id, self.target(&w.account)?, run.now)?;
        Ok(written(&w, &op))
    }
}

fn update_of(i: &CalendarUpdateInput) -> EventUpdate {
    EventUpdate {
        event_id: i.event_id.clone(),
        occurrence: i.occurrence.clone(),
        title: i.title.clone(),
        start: i.start.clone(),
        end: i.end.clone(),
        location: i.location.clone(),
        description: i.description.clone(),
    }
}

/// The write already journaled under `key` (the same approval run again): never a second one,
/// and never one prepared again (a new DTSTAMP, an event the store no longer has).
fn journaled(run: &ToolRun<'_>, key: &str) -> Result<Option<ToolOutput>, ExecError> {
    let Some(op) = run.steward.journal()?.find_by_key(key)? else { return Ok(None) };
    let w: CalendarWrite =
        serde_json::from_value(op.input.clone()).map_err(|e| ExecError::invalid(e.to_string()))?;
    Ok(Some(written(&w, &op)))
}

fn written(w: &CalendarWrite, op: &Operation) -> ToolOutput {
    let calendar = format!("{}/{}", w.account, w.collection);
    super::journaled_output(
        op,
        &format!(" \"{}\" in {calendar}", w.summary),
        "by reading the calendar back",
        json!({
            "calendar": calendar,
            "uid": w.uid,
            "event_id": event_id(&calendar, &w.uid, ""),
        }),
    )
}
