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
pub const MAX_RECIPIENTS: usize = 50;
/// Most attachments one mail may carry.
pub const MAX_ATTACHMENTS: usize = 20;
/// Most messages one call may touch.
pub const MAX_MESSAGES_PER_CALL: usize = 50;
/// Most attendees one event may invite.
pub const MAX_ATTENDEES: usize = 100;

/// Search the local mail mirror.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailSearchInput {
    /// Words, phrases or filters to search for.
    pub query: String,
    /// Results to return (1-50; 10 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Read one mirrored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailReadInput {
    /// The message id from a search result.
    pub message_id: i64,
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

/// Create a calendar event (invitations go out to attendees).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarCreateInput {
    /// The event's title.
    pub title: String,
    /// Start, RFC 3339 with an offset.
    pub start: String,
    /// End, RFC 3339 with an offset.
    pub end: String,
    /// Attendee addresses (each receives an invitation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_ATTENDEES))]
    pub attendees: Vec<String>,
    /// A description shown in the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where it happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// Delete a calendar event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarDeleteInput {
    /// The event's id.
    pub event_id: String,
}

/// Read a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesReadInput {
    /// The document's id.
    pub file_id: String,
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
            "Create an event; attendees receive invitations.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["calendar:write"]),
        ToolSpec::new::<CalendarDeleteInput>(
            "calendar.delete_event",
            "Delete a calendar event.",
            dest,
            Level::Confirm,
        )?
        .scopes(&["calendar:write"]),
        ToolSpec::new::<FilesReadInput>(
            "files.read",
            "Read a document.",
            Effect::Read,
            Level::Auto,
        )?,
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
