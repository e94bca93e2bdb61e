//! The tools Steward itself offers an agent, with their effects and default levels. Connectors
//! execute them (later issues); the policy decides over them now, so the catalog is the single
//! place where "sending a mail is destructive" is written down.
//!
//! The input types are the wire contract: every field is described, unknown keys are refused
//! and every list is bounded, because a schema is a prompt the model must be able to fill.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Effect, Level, PolicyChange, PolicyError, ToolRegistry, ToolSpec};

/// Most recipients one mail may name (To, Cc and Bcc each).
/// Fixed (not a setting).
pub const MAX_RECIPIENTS: usize = 50;
/// Most attachments one mail may carry.
/// Fixed (not a setting).
pub const MAX_ATTACHMENTS: usize = 20;
/// Most messages one call may touch.
/// Fixed (not a setting).
pub const MAX_MESSAGES_PER_CALL: usize = 50;
/// Most attendees one event may invite.
/// Fixed (not a setting).
pub const MAX_ATTENDEES: usize = 100;

/// Search the local mail mirror.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailSearchInput {
    /// Words or phrases to search for (empty: the newest mail matching the filters).
    pub query: String,
    /// Results to return (1-12; 10 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 12))]
    pub limit: Option<u32>,
    /// Only mail whose sender's name or address contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Only mail dated on or after this day (YYYY-MM-DD or RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Only mail dated before this day (YYYY-MM-DD or RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Only mail with (true) or without (false) attachments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_attachments: Option<bool>,
    /// The `cursor` of a previous result, to continue where it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// List the person's calendar occurrences in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarAgendaInput {
    /// From (YYYY-MM-DD, midnight in the person's zone, or RFC 3339).
    pub from: String,
    /// To, not included (at most 366 days after `from`).
    pub to: String,
}

/// Find the person's free time in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarFreeBusyInput {
    /// From (YYYY-MM-DD, midnight in the person's zone, or RFC 3339).
    pub from: String,
    /// To, not included (at most 366 days after `from`).
    pub to: String,
    /// The shortest free slot wanted, minutes (5-1440; 30 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 1440))]
    pub min_minutes: Option<u32>,
}

/// Search the person's calendars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarSearchInput {
    /// Words to find in the summary, location, description or attendees (every one must
    /// match; empty: every event of the window).
    pub query: String,
    /// From (YYYY-MM-DD or RFC 3339; 30 days ago when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// To, not included (90 days ahead when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Only events with this attendee or organizer (an address or part of a name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attendee: Option<String>,
    /// Events to return (1-20; 10 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

/// Search the person's address books.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactsSearchInput {
    /// A name, nickname, organization, address or phone digits to look for.
    pub query: String,
    /// People to return (1-20; 10 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

/// Find the one address a description of a person means, or the candidates to ask about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactsResolveInput {
    /// Who: a name, a nickname, a name with an organization ("Anna from Polimi"), or an
    /// address.
    pub text: String,
}

/// Read one mirrored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailReadInput {
    /// The message id from a search result.
    pub message_id: i64,
    /// The `cursor` of a previous read of this message, to continue its body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Read the messages of one thread, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailThreadInput {
    /// The thread id from a search result or a read.
    pub thread_id: i64,
    /// The `cursor` of a previous result, to continue with older messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Read the text of one attachment of a mirrored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailAttachmentTextInput {
    /// The message id.
    pub message_id: i64,
    /// The attachment's position, as a read lists it.
    pub position: i64,
    /// The `cursor` of a previous result, to continue the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Schedule a new mail to be sent later from the person's account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailSendLaterInput {
    /// Recipient addresses.
    #[schemars(length(max = MAX_RECIPIENTS))]
    pub to: Vec<String>,
    /// Carbon-copy addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_RECIPIENTS))]
    pub cc: Vec<String>,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub body: String,
    /// The Message-ID of the message this answers, when it is a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// When to send: RFC 3339 with an offset, or YYYY-MM-DD (midnight UTC).
    pub send_at: String,
}

impl From<MailSendLaterInput> for MailSendInput {
    fn from(i: MailSendLaterInput) -> Self {
        Self {
            to: i.to,
            cc: i.cc,
            bcc: Vec::new(),
            subject: i.subject,
            body: i.body,
            attachments: Vec::new(),
            in_reply_to: i.in_reply_to,
            send_at: Some(i.send_at),
        }
    }
}

/// List the person's watches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchesListInput {
    /// Only this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::watch::WatchStatus>,
    /// The `cursor` of a previous result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// List the write journal's operations (sent mail and other writes), newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpsListInput {
    /// Only this state (scheduled, started, backend_returned, confirmed, failed, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The `cursor` of a previous result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// Show one journaled operation with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpsShowInput {
    /// The operation's id.
    pub id: i64,
}

/// Summarize model usage and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageSummaryInput {
    /// Since when: 7d, 24h, 90m, all, YYYY-MM-DD or RFC 3339 (7d when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// Send a new mail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailSendInput {
    /// Recipient addresses.
    #[schemars(length(max = MAX_RECIPIENTS))]
    pub to: Vec<String>,
    /// Carbon-copy addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_RECIPIENTS))]
    pub cc: Vec<String>,
    /// Blind-copy addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_RECIPIENTS))]
    pub bcc: Vec<String>,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub body: String,
    /// Attachments: file paths, or mirrored attachments as `attachment:<message id>:<position>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_ATTACHMENTS))]
    pub attachments: Vec<String>,
    /// The Message-ID of the message this answers, when it is a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// When to send (RFC 3339 or YYYY-MM-DD); now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_at: Option<String>,
}

/// Reply to a mirrored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailReplyInput {
    /// The message being answered.
    pub message_id: i64,
    /// The plain-text body.
    pub body: String,
    /// Reply to every participant, not only the sender.
    #[serde(default)]
    pub reply_all: bool,
}

/// Delete mirrored messages (moves them out of the person's mailbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailDeleteInput {
    /// The messages to delete.
    #[schemars(length(max = MAX_MESSAGES_PER_CALL))]
    pub message_ids: Vec<i64>,
}

/// Create a calendar event (attendees are listed; calendar.invite sends the invitations).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarCreateInput {
    /// The event's title.
    pub title: String,
    /// Start, RFC 3339 with an offset.
    pub start: String,
    /// End, RFC 3339 with an offset.
    pub end: String,
    /// Attendee addresses (listed in the event; calendar.invite mails them the invitation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_ATTENDEES))]
    pub attendees: Vec<String>,
    /// A description shown in the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where it happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The calendar (`account/collection`, as the agenda names it); absent: the first
    /// writable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
}

/// Delete a calendar event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarDeleteInput {
    /// The event's id.
    pub event_id: String,
}

/// Change a calendar event: its title, times, location or description. Times of a repeating
/// event change one occurrence at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarUpdateInput {
    /// The event's id.
    pub event_id: String,
    /// One occurrence of a repeating event: its `recurrence_id` as the agenda shows it
    /// (`2025-04-07T09:00:00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrence: Option<String>,
    /// A new title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A new start: RFC 3339 with an offset, or `YYYY-MM-DD` for a whole day. Given alone, the
    /// event keeps its length (a move).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// A new end (a day: exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// A new location (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// A new description (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Send an event's attendees its invitation (iTIP REQUEST) by mail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarInviteInput {
    /// The event's id.
    pub event_id: String,
    /// Whom to invite, among the event's attendees; absent: every attendee. Steward fills it
    /// in before the person approves, and the mail goes to exactly these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_ATTENDEES))]
    pub attendees: Vec<String>,
}

/// Find files under the folders the person shares, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesFindInput {
    /// Words the file name holds (case ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A glob on the path below its folder (`*`, `?`, `**`); without `/`, on the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// The extension (`pdf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// Modified on or after (YYYY-MM-DD or RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_after: Option<String>,
    /// Modified before (YYYY-MM-DD or RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_before: Option<String>,
    /// At least this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<u64>,
    /// At most this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    /// Only under this shared folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Where the last page stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Files to return (1-200; 50 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// Run a read-only command (no shell): ls, stat, wc, head, tail, grep, rg, file, git
/// status|log|diff|show, on files in the shared folders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellRunInput {
    /// The command and its arguments, one per item (`["grep", "-n", "notice", "lease.txt"]`);
    /// never a shell line: no pipes, redirections or `$(…)`.
    #[schemars(length(min = 1, max = 64))]
    pub argv: Vec<String>,
    /// The folder to run in (inside a shared folder; the first one when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Run any command (no shell), after the person approves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellExecInput {
    /// The command and its arguments, one per item; never a shell line.
    #[schemars(length(min = 1, max = 64))]
    pub argv: Vec<String>,
    /// The folder to run in (inside a shared folder; the first one when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Filled by Steward, not the model: the program the name resolves to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Filled by Steward, not the model: the program's SHA-256, which the approval binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_sha256: Option<String>,
}

/// Search the person's memory: the notes they accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchInput {
    /// Words to look for.
    pub query: String,
    /// Only these kinds of note.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 6))]
    pub kinds: Vec<crate::memory::MemoryKind>,
    /// Only notes about this subject (`person:anna@example.org`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Answer from what was true and known at this time (RFC 3339); default now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
    /// Notes to return (1-20; 10 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

/// Read one note of the person's memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadInput {
    /// The note's id (`m` and 12 letters or digits).
    pub id: String,
}

/// A mail that says the fact, and its words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryMailEvidence {
    /// The message id from a mail search or read.
    pub message_id: i64,
    /// The words of the mail that say it, exactly as written (at most 500 characters).
    pub quote: String,
}

/// A fact for the person's memory, with where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryFactInput {
    /// The fact, in a sentence or a few.
    pub text: String,
    /// What it is about.
    pub kind: crate::memory::MemoryKind,
    /// Whom or what it is about: `<type>:<value>` (`person:anna@example.org`, `project:roof`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Since when it is true (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<chrono::DateTime<chrono::Utc>>,
    /// Until when it is true (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<chrono::DateTime<chrono::Utc>>,
    /// How sure you are, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: Option<f32>,
    /// Mails that say it, each with its words (checked against the mail).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub mail: Vec<MemoryMailEvidence>,
    /// Ids of accepted notes this fact replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub supersedes: Vec<String>,
    /// How careful a model must be with it (normal when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<crate::memory::Sensitivity>,
}

/// Save an attachment of a mirrored message into a shared folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesSaveAttachmentInput {
    /// The message id.
    pub message_id: i64,
    /// The attachment's position, as a read lists it.
    pub position: i64,
    /// The folder to save into, inside a shared folder (the first shared folder when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// A plain file name (the attachment's own, cleaned, when absent); never a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Filled by Steward, not the model: the bytes' SHA-256, which the approval binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Filled by Steward, not the model: the size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// Search the passages of every document in the shared folders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocsSearchAllInput {
    /// The words to look for.
    pub query: String,
    /// Passages to return (1-50; 10 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
}

/// What a document is: type, pages, size, title, fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocsInfoInput {
    /// The document's path (absolute, or relative to a shared folder).
    pub path: String,
}

/// Read a document in windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocsReadInput {
    /// The document's path (absolute, or relative to a shared folder).
    pub path: String,
    /// Where the last window stopped (from its answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The page (slide, sheet) to start at, from 1; not with a cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub page: Option<u32>,
    /// Characters to read (200-12000; 6000 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 200, max = 12000))]
    pub chars: Option<u32>,
}

/// Search inside one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocsSearchInput {
    /// The document's path (absolute, or relative to a shared folder).
    pub path: String,
    /// The words to look for.
    pub query: String,
    /// Passages to return (1-10; 5 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub limit: Option<u32>,
}

/// Delete a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesDeleteInput {
    /// The document's id.
    pub file_id: String,
}

/// Share a document with someone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesShareInput {
    /// The document's id.
    pub file_id: String,
    /// The address to share with.
    pub email: String,
    /// `r` to read, `rw` to edit.
    pub permission: String,
}

/// The built-in tools: name, description, input type, effect, default level.
pub fn builtin() -> Result<ToolRegistry, PolicyError> {
    let dest = Effect::Destructive;
    let specs = [
        ToolSpec::new::<MailSearchInput>(
            "mail.search",
            "Search the person's mirrored mail.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MailReadInput>(
            "mail.read",
            "Read one mirrored message.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MailThreadInput>(
            "mail.thread",
            "Read the messages of one mail thread, newest first.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MailAttachmentTextInput>(
            "mail.attachment_text",
            "Read the text of one attachment of a mirrored message.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MailSendLaterInput>(
            "mail.send_later",
            "Schedule a new mail from the person's account for a later time.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["mail:send"]),
        ToolSpec::new::<WatchesListInput>(
            "watches.list",
            "List the person's watches (what Steward keeps an eye on).",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<crate::watch::WatchDefinition>(
            "watches.propose",
            "Propose a watch. One without granted actions starts at once; one whose rules \
             grant future actions waits for the person's approval.",
            Effect::Write { reversible: true },
            Level::Logged,
        )?,
        ToolSpec::new::<OpsListInput>(
            "ops.list",
            "List the write journal's operations, newest first.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<OpsShowInput>(
            "ops.show",
            "Show one journaled operation with its confirmation evidence.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<UsageSummaryInput>(
            "usage.summary",
            "Summarize model requests, tokens and cost.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<CalendarAgendaInput>(
            "calendar.agenda",
            "List the person's calendar occurrences between two times, in order.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<CalendarFreeBusyInput>(
            "calendar.free_busy",
            "Find the person's free slots in their working hours between two times.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<CalendarSearchInput>(
            "calendar.search",
            "Search the person's calendars for events.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<ContactsSearchInput>(
            "contacts.search",
            "Search the person's address books.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<ContactsResolveInput>(
            "contacts.resolve_recipient",
            "Find the address a description of a person means. When the answer is ambiguous or \
             not found, ask the person; never pick a candidate yourself.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MailSendInput>(
            "mail.send",
            "Send a new mail from the person's account.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["mail:send"]),
        ToolSpec::new::<MailReplyInput>(
            "mail.reply",
            "Reply to a mirrored message.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["mail:send"]),
        ToolSpec::new::<MailDeleteInput>(
            "mail.delete",
            "Delete messages from the person's mailbox.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["mail:delete"]),
        ToolSpec::new::<CalendarCreateInput>(
            "calendar.create_event",
            "Create an event; attendees are listed in it (calendar.invite mails them the \
             invitation, with its own approval).",
            dest,
            Level::Confirm,
        )?
        .scopes(&["calendar:write"]),
        ToolSpec::new::<CalendarUpdateInput>(
            "calendar.update_event",
            "Change an event's title, times, location or description (one occurrence of a \
             repeating event at a time for times).",
            dest,
            Level::Confirm,
        )?
        .scopes(&["calendar:write"]),
        ToolSpec::new::<CalendarInviteInput>(
            "calendar.invite",
            "Mail an event's attendees its invitation (iTIP), which their calendar app can \
             accept or decline; only for the person's own events.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["mail:send"]),
        ToolSpec::new::<CalendarDeleteInput>(
            "calendar.delete_event",
            "Delete a calendar event.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["calendar:write"]),
        ToolSpec::new::<FilesFindInput>(
            "files.find",
            "Find files in the folders the person shares: by name words, glob, extension, \
             modification dates and size; newest first, with a cursor for more.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<ShellRunInput>(
            "shell.run",
            "Run a read-only command on files in the shared folders, without a shell: ls, stat, \
             wc, head, tail, grep, rg, file, git status|log|diff|show, each with its usual \
             read-only flags; globs are expanded by Steward. Anything else needs shell.exec.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<ShellExecInput>(
            "shell.exec",
            "Run any other command, without a shell, in a shared folder: the person sees the exact \
             arguments, folder and program first and approves it.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["shell:exec"]),
        ToolSpec::new::<DocsSearchAllInput>(
            "docs.search_all",
            "Find passages holding the given words across every document in the shared folders \
             (as last indexed), best first, each with its path, page and a cursor for docs.read.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<DocsInfoInput>(
            "docs.info",
            "What a document in the shared folders is: its type, pages (slides, sheets), size, \
             title and fingerprint, and whether it has text.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<DocsReadInput>(
            "docs.read",
            "Read a document (PDF, Word, PowerPoint, Excel, OpenDocument, HTML, Markdown, RTF, \
             text, saved mail) in windows of text with page markers; pass the cursor of the \
             answer to read on.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<DocsSearchInput>(
            "docs.search",
            "Find the passages of one document that hold the given words, best first, each with \
             its page and a cursor to read from there.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MemorySearchInput>(
            "memory.search",
            "Search the person's memory (notes they accepted), each with where it came from; \
             as_of answers from what was true and known then.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MemoryReadInput>(
            "memory.read",
            "Read one note of the person's memory with its provenance and history.",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<MemoryFactInput>(
            "memory.propose",
            "Propose a durable fact for the person's memory. It waits in their review inbox; \
             nothing is remembered until they accept it, and a fact they rejected is not \
             proposed again.",
            Effect::Write { reversible: true },
            Level::Logged,
        )?,
        ToolSpec::new::<MemoryFactInput>(
            "memory.write",
            "Write a fact straight into the person's memory (they approve it first).",
            Effect::Write { reversible: true },
            Level::Confirm,
        )?
        .scopes(&["memory:write"]),
        ToolSpec::new::<FilesSaveAttachmentInput>(
            "files.save_attachment",
            "Save an attachment of a mirrored message into a shared folder. The person sees the \
             folder, the name and the bytes' hash first and approves; a file is never \
             overwritten (the same bytes are not saved twice, other bytes under the name get a \
             numbered name).",
            Effect::Write { reversible: true },
            Level::Confirm,
        )?
        .scopes(&["files:write"]),
        ToolSpec::new::<FilesDeleteInput>(
            "files.delete",
            "Delete a document.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["files:write"]),
        ToolSpec::new::<FilesShareInput>(
            "files.share",
            "Share a document with another person.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["files:share"]),
        ToolSpec::new::<PolicyChange>(
            "policy.set",
            "Change the tool policy (a level, a rule, a denied namespace or an allowed read).",
            Effect::Write { reversible: true },
            Level::Confirm,
        )?
        .scopes(&["policy:write"]),
    ];
    let mut registry = ToolRegistry::new();
    for spec in specs {
        registry.register(spec)?;
    }
    Ok(registry)
}
