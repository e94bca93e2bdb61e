//! The jobs' bodies, and the production notification delivery and granted-action executor.

use std::{
    sync::{Arc, atomic::AtomicBool},
    time::Instant,
};

use serde_json::{Value, json};

use super::{JobName, Runner, lock};
use crate::{
    Steward, StewardError,
    mirror::SyncOptions,
    outbox::{MailTransport, Sender},
    policy::catalog::MailSendInput,
    time::now_secs,
    watch::{
        ActionExecutor, ActionResult, ActionStatus, Delivery, DeliveryError, MAX_DELIVERY_BATCH,
        PollBudget, QueuedEvent, WatchEventQuery,
    },
};

/// What a job body returns.
pub(super) struct Done {
    pub summary: String,
    pub detail: Value,
    pub next_in: Option<u64>,
    pub wake: Vec<JobName>,
    /// Part of the work failed (one source of several): the run counts as failed.
    pub partial_error: Option<(String, String)>,
}

impl Done {
    fn new(summary: String, detail: Value) -> Self {
        Self { summary, detail, next_in: None, wake: Vec::new(), partial_error: None }
    }
}

/// A job body's failure.
pub(super) struct Failure {
    pub code: String,
    pub message: String,
}

impl<E: StewardError> From<E> for Failure {
    fn from(e: E) -> Self {
        Self { code: e.code().to_owned(), message: e.to_string() }
    }
}

fn detail(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub(super) fn run(
    runner: &Runner,
    job: JobName,
    cancel: &AtomicBool,
    deadline: Instant,
) -> Result<Done, Failure> {
    let s = &runner.steward;
    let now = now_secs();
    match job {
        JobName::MailReconcile => reconcile(runner, cancel),
        JobName::PimSync => pim_sync(runner, cancel),
        JobName::FilesIndex => {
            // The walk, then the documents' passages (only new or changed documents are read).
            let report = s.index_shared_folders(Some(cancel), &mut |_| {})?;
            let r = &report.files;
            let mut parts = Vec::new();
            if r.added + r.changed + r.removed > 0 || !r.unreadable.is_empty() {
                parts.push(format!(
                    "{} files: {} new, {} changed, {} gone{}",
                    r.files,
                    r.added,
                    r.changed,
                    r.removed,
                    if r.unreadable.is_empty() {
                        String::new()
                    } else {
                        format!("; {} folder(s) unreadable", r.unreadable.len())
                    }
                ));
            }
            if let Some(d) = report.documents.as_ref().filter(|d| d.indexed + d.removed > 0) {
                parts.push(format!(
                    "{} documents: {} indexed, {} gone",
                    d.documents, d.indexed, d.removed
                ));
            }
            Ok(Done::new(parts.join("; "), detail(&report)))
        }
        JobName::MemoryReconcile => {
            let r = s.memory_reconcile()?;
            let summary = if r.read + r.removed + r.expired + r.embedded > 0 || r.problem_count > 0
            {
                format!(
                    "{} notes: {} read, {} changed outside Steward, {} dropped, {} proposals \
                     expired, {} embedded{}",
                    r.notes,
                    r.read,
                    r.outside_changes,
                    r.removed,
                    r.expired,
                    r.embedded,
                    if r.problem_count > 0 {
                        format!("; {} file(s) not indexed", r.problem_count)
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            };
            Ok(Done::new(summary, detail(&r)))
        }
        JobName::MemoryPromote => {
            let r = s.promote_mail(Some(cancel))?;
            let summary = match &r.unavailable {
                Some(why) => format!("the chat model is unavailable: {why}"),
                None if r.calls + r.filtered == 0 => String::new(),
                None => format!(
                    "{} threads read: {} proposals, {} filtered, {} with nothing durable, {} \
                     deferred, {} left",
                    r.calls, r.proposals, r.filtered, r.skipped, r.deferred, r.remaining
                ),
            };
            let mut done = Done::new(summary, detail(&r));
            if r.remaining > 0 && r.unavailable.is_none() {
                done.next_in = Some(60);
            }
            Ok(done)
        }
        JobName::MailEmbed => {
            let opts = crate::embed::EmbedOptions {
                max_items: runner.config.embed_pass_items,
                batch_size: None,
                cancel: Some(cancel),
            };
            let report = s.embed_mail(&opts, &mut |_| {})?;
            // The calendar's events too (few, and only new or changed ones cost a request).
            // A failure here is the events' own: the mail's drain stands.
            let events = if report.unavailable.is_none() {
                match s.embed_events(Some(cancel)) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::warn!(error = %e, "events not embedded");
                        Some(crate::calendar::vectors::EventEmbedReport {
                            error: Some(e.to_string()),
                            ..Default::default()
                        })
                    }
                }
            } else {
                None
            };
            let next = lock(&runner.embed_schedule).next_delay(&report);
            let mut detail = detail(&report);
            if let (Some(ev), Some(obj)) = (&events, detail.as_object_mut()) {
                obj.insert("events".to_owned(), json!(ev));
            }
            let mut done = Done::new(
                match (&report.unavailable, &events) {
                    (Some(why), _) => format!("the embedder is unavailable: {why}"),
                    (None, Some(ev)) if ev.embedded > 0 || ev.error.is_some() => format!(
                        "embedded {} messages and {} events, failed {}, {} remaining{}",
                        report.embedded,
                        ev.embedded,
                        report.failed,
                        report.remaining,
                        ev.error.as_deref().map_or_else(String::new, |e| format!("; events: {e}"))
                    ),
                    (None, _) if report.embedded == 0 && report.failed == 0 => String::new(),
                    (None, _) => format!(
                        "embedded {}, failed {}, {} remaining",
                        report.embedded, report.failed, report.remaining
                    ),
                },
                detail,
            );
            done.next_in = Some(next.as_secs());
            Ok(done)
        }
        JobName::WatchPoll => {
            let budget = PollBudget {
                deadline: Some(deadline),
                per_source: runner.config.watch_poll_per_source,
            };
            let report = s.watches()?.poll_within(now, &budget)?;
            let mut done = Done::new(
                if report.queued + report.failed + report.deferred + report.expired == 0 {
                    String::new()
                } else {
                    format!(
                        "checked {}, queued {}, failed {}, deferred {}, expired {}",
                        report.checked,
                        report.queued,
                        report.failed,
                        report.deferred,
                        report.expired
                    )
                },
                detail(&report),
            );
            done.next_in = Some(report.next_poll_secs);
            if report.queued > 0 || report.expired > 0 {
                done.wake.push(JobName::WatchDeliver);
            }
            Ok(done)
        }
        JobName::WatchDeliver => deliver(runner, now),
        JobName::SendDue => {
            let transport = runner.services.transport.as_ref().map_err(|why| Failure {
                code: "JOBS_UNAVAILABLE".to_owned(),
                message: why.clone(),
            })?;
            let report = s.send_due(transport.as_ref(), now)?;
            let mut done = Done::new(
                if report.claimed == 0 {
                    String::new()
                } else {
                    format!(
                        "sent {}: accepted {}, failed {}, outcome unknown {}",
                        report.claimed, report.backend_returned, report.failed, report.unknown
                    )
                },
                detail(&report),
            );
            if report.claimed > 0 {
                // The Sent copies confirm: mirror them soon.
                done.wake.push(JobName::MailReconcile);
            }
            Ok(done)
        }
        JobName::ConfirmWrites => {
            let mail = s.confirm_pass(now)?;
            let calendar = s.confirm_calendar_writes(&runner.services.calendar_targets, now)?;
            let mut parts = Vec::new();
            if mail.checked > 0 {
                parts.push(format!(
                    "mail: checked {}, confirmed {}, not yet seen {}, ambiguous {}, now needing review {}",
                    mail.checked, mail.confirmed, mail.pending, mail.ambiguous, mail.needs_review
                ));
            }
            if calendar.checked > 0 {
                parts.push(format!(
                    "calendar: checked {}, confirmed {}, not yet seen {}, now retry_exhausted {}",
                    calendar.checked, calendar.confirmed, calendar.pending, calendar.exhausted
                ));
            }
            Ok(Done::new(parts.join("; "), json!({ "mail": mail, "calendar": calendar })))
        }
        JobName::ApprovalExpiry => {
            let expired = s.approvals()?.expire_due(now)?;
            Ok(Done::new(
                if expired == 0 { String::new() } else { format!("expired {expired}") },
                json!({ "expired": expired }),
            ))
        }
    }
}

/// Mirrors every configured source in turn; one that fails does not stop the others.
fn reconcile(runner: &Runner, cancel: &AtomicBool) -> Result<Done, Failure> {
    let (mut added, mut updated, mut deleted, mut file_errors) = (0, 0, 0, 0);
    let mut changed = false;
    let mut runs = Vec::new();
    let mut first_error: Option<(String, String)> = None;
    for source in &runner.services.mail_sources {
        let opts = SyncOptions { account: source.account.clone(), cancel: Some(cancel) };
        match runner.steward.sync_mail(source.source.as_ref(), &opts, &mut |_| {}) {
            Ok(s) => {
                added += s.added;
                updated += s.updated;
                deleted += s.soft_deleted;
                file_errors += s.error_count;
                changed |= s.changed;
                runs.push(json!({ "source": source.name, "summary": s }));
            }
            Err(e) => {
                tracing::warn!(source = %source.name, code = e.code(), error = %e, "reconcile failed");
                runs.push(
                    json!({ "source": source.name, "error": e.code(), "message": e.to_string() }),
                );
                first_error
                    .get_or_insert_with(|| (e.code().to_owned(), format!("{}: {e}", source.name)));
            }
        }
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
    }
    let mut done = Done::new(
        if changed || file_errors > 0 {
            format!(
                "{} sources: added {added}, updated {updated}, deleted {deleted}, files failed {file_errors}",
                runner.services.mail_sources.len()
            )
        } else {
            String::new()
        },
        json!({ "sources": runs }),
    );
    if changed {
        done.wake.extend([JobName::ConfirmWrites, JobName::MailEmbed]);
    }
    done.partial_error = first_error;
    Ok(done)
}

/// Brings every configured calendar and address book into its store; a source that fails is
/// reported and the others still run.
fn pim_sync(runner: &Runner, cancel: &AtomicBool) -> Result<Done, Failure> {
    let (mut changed, mut errors) = (0, 0);
    let mut runs = Vec::new();
    let mut first_error: Option<(String, String)> = None;
    for source in &runner.services.pim_sources {
        match source.sync(&runner.steward) {
            Ok(s) => {
                changed += s.changed;
                errors += s.errors;
                runs.push(json!({ "source": source.name(), "summary": s }));
            }
            Err((code, message)) => {
                tracing::warn!(source = %source.name(), code = %code, error = %message, "sync failed");
                runs.push(json!({ "source": source.name(), "error": code, "message": message }));
                first_error.get_or_insert_with(|| (code, format!("{}: {message}", source.name())));
            }
        }
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
    }
    let mut done = Done::new(
        if changed > 0 || errors > 0 {
            format!(
                "{} sources: {changed} items changed, {errors} could not be read",
                runner.services.pim_sources.len()
            )
        } else {
            String::new()
        },
        json!({ "sources": runs }),
    );
    if changed > 0 && !runner.services.calendar_targets.is_empty() {
        // A calendar write shows in its source: confirm it soon.
        done.wake.push(JobName::ConfirmWrites);
    }
    if changed > 0 && runner.steward.has_embedder() {
        // New or changed events get their vectors.
        done.wake.push(JobName::MailEmbed);
    }
    done.partial_error = first_error;
    Ok(done)
}

/// Runs the granted actions of the pending events, then delivers them in order.
fn deliver(runner: &Runner, now: i64) -> Result<Done, Failure> {
    let watches = runner.steward.watches()?;
    let pending = watches.events(&WatchEventQuery {
        pending: true,
        limit: Some(MAX_DELIVERY_BATCH),
        ..WatchEventQuery::default()
    })?;
    let (mut ran, mut skipped) = (0, 0);
    if let Some(executor) = &runner.executor {
        for ev in &pending {
            match watches.run_granted(ev.id, executor, now) {
                Ok(r) => {
                    ran += r.ran.len();
                    skipped += r.skipped.len();
                }
                Err(e) => {
                    tracing::warn!(event = ev.id, code = e.code(), error = %e, "granted actions");
                }
            }
        }
    }
    let report = watches.deliver(runner.services.delivery.as_ref(), MAX_DELIVERY_BATCH, now)?;
    let mut done = Done::new(
        if report.delivered + report.failed + report.busy + ran == 0 {
            String::new()
        } else {
            format!(
                "delivered {}, failed {}, busy {}, given up {}; granted actions ran {ran}, skipped {skipped}",
                report.delivered, report.failed, report.busy, report.abandoned
            )
        },
        json!({ "delivery": report, "actions_ran": ran, "actions_skipped": skipped }),
    );
    if ran > 0 {
        done.wake.push(JobName::MailReconcile);
    }
    Ok(done)
}

/// Delivers watch notifications into the protocol feed (`/ws`, the launcher's stream, the
/// web client), never busy; by itself it sends the event's deterministic text (with a model
/// configured, [`crate::agent::notify::ComposedDelivery`] writes the text and sends through
/// this). A delivered event is a `watch_delivery` feed event carrying the text.
#[derive(Debug, Clone, Copy, Default)]
pub struct FeedDelivery;

impl Delivery for FeedDelivery {
    fn compose(&self, event: &QueuedEvent) -> Result<String, String> {
        Ok(event.event.fallback_text.clone())
    }

    fn send(&self, _event: &QueuedEvent, _text: &str) -> Result<(), DeliveryError> {
        Ok(())
    }
}

/// Runs granted actions through the write journal: `mail.send` is prepared from the person's
/// own account (never from the grant) and journaled under the claim's key, so the same claim
/// is never a second mail, then submitted once. Other capabilities fail explicitly until
/// their executors exist.
pub struct OutboxExecutor {
    steward: Arc<Steward>,
    transport: Arc<dyn MailTransport>,
    sender: Sender,
}

impl std::fmt::Debug for OutboxExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxExecutor").field("sender", &self.sender).finish_non_exhaustive()
    }
}

impl OutboxExecutor {
    /// An executor sending as `sender` through `transport`.
    pub fn new(steward: Arc<Steward>, transport: Arc<dyn MailTransport>, sender: Sender) -> Self {
        Self { steward, transport, sender }
    }

    fn send(&self, action_key: &str, arguments: &Value) -> Result<ActionResult, String> {
        let input: MailSendInput = serde_json::from_value(arguments.clone())
            .map_err(|e| format!("the granted arguments are not a mail: {e}"))?;
        let draft = crate::outbox::draft_of(input, &self.sender);
        let now = now_secs();
        let mail = self.steward.prepare_mail(&draft, now).map_err(|e| e.to_string())?;
        let key = format!("watch-action:{action_key}");
        let op = self
            .steward
            .send_mail(&mail, &key, None, None, self.transport.as_ref(), now)
            .map_err(|e| e.to_string())?;
        use crate::journal::OpState as S;
        Ok(match op.state {
            S::BackendReturned | S::Confirmed => ActionResult {
                status: ActionStatus::Succeeded,
                outcome: Some(format!("operation {}", op.id)),
                error: None,
            },
            S::Failed => ActionResult {
                status: ActionStatus::Failed,
                outcome: Some(format!("operation {}", op.id)),
                error: op.error,
            },
            _ => ActionResult {
                status: ActionStatus::Unknown,
                outcome: Some(format!("operation {}", op.id)),
                error: op.error,
            },
        })
    }
}

impl ActionExecutor for OutboxExecutor {
    fn execute(&self, tool: &str, arguments: &Value) -> ActionResult {
        // Only reached without a claim key (a caller outside the watch engine).
        self.execute_claimed(
            &format!("unkeyed:{}", crate::approval::input_sha256(arguments)),
            tool,
            arguments,
        )
    }

    fn execute_claimed(&self, action_key: &str, tool: &str, arguments: &Value) -> ActionResult {
        let ran = match tool {
            "mail.send" => self.send(action_key, arguments),
            other => Err(format!("no executor for {other} yet")),
        };
        ran.unwrap_or_else(|error| ActionResult {
            status: ActionStatus::Failed,
            outcome: None,
            error: Some(error),
        })
    }
}
