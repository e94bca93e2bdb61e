//! `chats.db`: chats, their messages, the tool calls with their decisions, turns and the event
//! feed a client resumes from.

use std::path::Path;

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{AgentError, EndReason, TurnEvent};
use crate::{
    Limits,
    llm::{Message, ToolCall as ModelCall},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

const SCHEMA: Schema = Schema {
    name: "chats",
    migrations: &[
        Migration {
            version: 1,
            name: "chats",
            sql: include_str!("../../migrations/chats/001_chats.sql"),
        },
        Migration {
            version: 2,
            name: "summaries",
            sql: include_str!("../../migrations/chats/002_summaries.sql"),
        },
        Migration {
            version: 3,
            name: "turn next run",
            sql: include_str!("../../migrations/chats/003_turn_next_run.sql"),
        },
        Migration {
            version: 4,
            name: "cost and summary epoch",
            sql: include_str!("../../migrations/chats/004_cost_and_summary_epoch.sql"),
        },
    ],
};

/// Most chats one page lists.
/// Fixed (not a setting).
pub const MAX_CHAT_PAGE: usize = 100;
/// Most messages one page of a chat holds.
/// Fixed (not a setting).
pub const MAX_MESSAGE_PAGE: usize = 200;
/// Most events one read returns.
/// Fixed (not a setting).
pub const MAX_EVENT_PAGE: usize = 500;
/// Most gated calls of a chat the context keeps track of (their results are never dropped).
/// Fixed (not a setting).
pub(crate) const MAX_GATED_LISTED: usize = 1_000;
/// Longest chat title, characters.
/// Fixed (not a setting).
pub const MAX_TITLE_CHARS: usize = 200;

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

/// A chat as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChatSummary {
    /// Its id.
    pub id: String,
    /// Its title (empty until one is set).
    pub title: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ChatMessage {
    /// Its id (the page cursor).
    pub id: i64,
    /// The turn that wrote it.
    pub run_id: Option<String>,
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text.
    pub content: Option<String>,
    /// An assistant message's tool calls: `[{id, name, arguments}]`.
    #[schemars(with = "Option<Vec<serde_json::Value>>")]
    pub tool_calls: Vec<ModelCall>,
    /// A tool message's call.
    pub tool_call_id: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
}

/// A proposed tool call and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolCallRecord {
    /// The provider's id.
    pub call_id: String,
    /// The turn.
    pub run_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments as the model wrote them.
    pub input: String,
    /// `ran`, `failed`, `denied`, `invalid`, `refused`, `awaiting_approval`, `declined`,
    /// `revision_requested`, `expired`, `interrupted`, `cancelled`.
    pub status: String,
    /// The approval, when the call was gated.
    pub approval_id: Option<i64>,
    /// What the model was told.
    pub result: Option<String>,
}

/// A turn as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TurnRecord {
    /// Its id.
    pub run_id: String,
    /// The chat.
    pub chat_id: String,
    /// `running`, `ended` or `interrupted`.
    pub status: String,
    /// Why it ended.
    pub end_reason: Option<EndReason>,
    /// Model calls made.
    pub model_calls: i64,
    /// Tool calls proposed.
    pub tool_calls: i64,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// The error, when it ended with one.
    pub error: Option<String>,
    /// Unix seconds.
    pub started_at: i64,
    /// Unix seconds.
    pub ended_at: Option<i64>,
    /// The run that took the messages this one ended without applying (recorded with its end).
    pub next_run: Option<String>,
    /// What its model calls cost, millionths of a USD.
    pub cost_micros: i64,
}

/// One event of the feed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EventRecord {
    /// Its position (resume after it).
    pub seq: i64,
    /// The turn.
    pub run_id: String,
    /// The chat.
    pub chat_id: String,
    /// Unix seconds.
    pub at: i64,
    /// The event.
    pub event: TurnEvent,
}

pub(crate) struct ChatStore {
    db: Database,
}

fn message(r: &Row<'_>) -> rusqlite::Result<ChatMessage> {
    let calls: Option<String> = r.get(4)?;
    let tool_calls = match calls {
        Some(t) => serde_json::from_str(&t).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, Box::new(e))
        })?,
        None => Vec::new(),
    };
    Ok(ChatMessage {
        id: r.get(0)?,
        run_id: r.get(1)?,
        role: r.get(2)?,
        content: r.get(3)?,
        tool_calls,
        tool_call_id: r.get(5)?,
        created_at: r.get(6)?,
    })
}

fn turn(r: &Row<'_>) -> rusqlite::Result<TurnRecord> {
    let reason: Option<String> = r.get(3)?;
    Ok(TurnRecord {
        run_id: r.get(0)?,
        chat_id: r.get(1)?,
        status: r.get(2)?,
        end_reason: reason.and_then(|s| EndReason::parse(&s)),
        model_calls: r.get(4)?,
        tool_calls: r.get(5)?,
        input_tokens: r.get(6)?,
        output_tokens: r.get(7)?,
        error: r.get(8)?,
        started_at: r.get(9)?,
        ended_at: r.get(10)?,
        next_run: r.get(11)?,
        cost_micros: r.get(12)?,
    })
}

const TURN_COLS: &str = "run_id, chat_id, status, end_reason, model_calls, tool_calls, \
                         input_tokens, output_tokens, error, started_at, ended_at, next_run, cost_micros";

impl ChatStore {
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, AgentError> {
        let path = home.join("chats.db");
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))?;
        crate::store::restrict_file(&path);
        Ok(Self { db })
    }

    pub(crate) fn create_chat(&self, id: &str, now: i64) -> Result<ChatSummary, AgentError> {
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO chats (id, created_at, updated_at) VALUES (?1, ?2, ?2)",
                params![id, now],
            )
            .map_err(q("create chat"))
        })?;
        self.chat(id)
    }

    pub(crate) fn chat(&self, id: &str) -> Result<ChatSummary, AgentError> {
        self.db
            .read(|c| {
                c.query_row(
                    "SELECT id, title, created_at, updated_at FROM chats \
                     WHERE id = ?1 AND deleted_at IS NULL",
                    [id],
                    |r| {
                        Ok(ChatSummary {
                            id: r.get(0)?,
                            title: r.get(1)?,
                            created_at: r.get(2)?,
                            updated_at: r.get(3)?,
                        })
                    },
                )
                .optional()
                .map_err(q("read chat"))
            })?
            .ok_or_else(|| AgentError::ChatNotFound(id.to_owned()))
    }

    pub(crate) fn list_chats(
        &self,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<ChatSummary>, AgentError> {
        if limit == 0 || limit > MAX_CHAT_PAGE {
            return Err(AgentError::Invalid(format!("limit must be 1..={MAX_CHAT_PAGE}")));
        }
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT id, title, created_at, updated_at FROM chats WHERE deleted_at IS NULL \
                     ORDER BY updated_at DESC, id LIMIT ?1 OFFSET ?2",
                )
                .map_err(q("list chats"))?;
            let rows = st
                .query_map(params![limit as i64, offset as i64], |r| {
                    Ok(ChatSummary {
                        id: r.get(0)?,
                        title: r.get(1)?,
                        created_at: r.get(2)?,
                        updated_at: r.get(3)?,
                    })
                })
                .map_err(q("list chats"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("list chats"))
        })?)
    }

    pub(crate) fn rename(
        &self,
        id: &str,
        title: &str,
        now: i64,
    ) -> Result<ChatSummary, AgentError> {
        let title = title.trim();
        if title.chars().count() > MAX_TITLE_CHARS {
            return Err(AgentError::Invalid(format!(
                "a title has at most {MAX_TITLE_CHARS} characters"
            )));
        }
        self.chat(id)?;
        self.db.write(|tx| {
            tx.execute(
                "UPDATE chats SET title = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, title, now],
            )
            .map_err(q("rename chat"))
        })?;
        self.chat(id)
    }

    /// Gives an untitled chat `title` (a title a person set is kept).
    pub(crate) fn title_if_untitled(&self, id: &str, title: &str) -> Result<(), AgentError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE chats SET title = ?2 WHERE id = ?1 AND title = '' AND deleted_at IS NULL",
                params![id, title],
            )
            .map_err(q("title chat"))
        })?;
        Ok(())
    }

    /// Tombstones a chat and purges its content (messages, calls, events); turns keep their
    /// counters for usage, without text.
    pub(crate) fn delete(&self, id: &str, now: i64) -> Result<(), AgentError> {
        self.chat(id)?;
        self.db.write(|tx| {
            tx.execute(
                "UPDATE chats SET deleted_at = ?2, title = '' WHERE id = ?1",
                params![id, now],
            )
            .map_err(q("delete chat"))?;
            for sql in [
                "DELETE FROM messages WHERE chat_id = ?1",
                "DELETE FROM tool_calls WHERE chat_id = ?1",
                "DELETE FROM events WHERE chat_id = ?1",
                "DELETE FROM summaries WHERE chat_id = ?1",
                "UPDATE turns SET error = NULL WHERE chat_id = ?1",
            ] {
                tx.execute(sql, [id]).map_err(q("purge chat"))?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    pub(crate) fn add_message(
        &self,
        chat: &str,
        run: Option<&str>,
        m: &Message,
        now: i64,
    ) -> Result<i64, AgentError> {
        let calls = if m.tool_calls.is_empty() {
            None
        } else {
            Some(
                serde_json::to_string(&m.tool_calls)
                    .map_err(|e| AgentError::Invalid(e.to_string()))?,
            )
        };
        Ok(self.db.write(|tx| {
            tx.execute(
                "INSERT INTO messages (chat_id, run_id, role, content, tool_calls, tool_call_id, \
                 created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![chat, run, m.role, m.content, calls, m.tool_call_id, now],
            )
            .map_err(q("add message"))?;
            tx.execute("UPDATE chats SET updated_at = ?2 WHERE id = ?1", params![chat, now])
                .map_err(q("touch chat"))?;
            Ok::<_, StoreError>(tx.last_insert_rowid())
        })?)
    }

    /// The summary standing for the chat's oldest messages: the last message id it covers
    /// and its text.
    pub(crate) fn summary(&self, chat: &str) -> Result<Option<(i64, String)>, AgentError> {
        Ok(self.db.read(|c| {
            c.query_row("SELECT upto, text FROM summaries WHERE chat_id = ?1", [chat], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(q("read summary"))
        })?)
    }

    /// Records that `text` (by `model`) now stands for every message up to `upto`.
    /// The chat's summary epoch: read it before the messages a summary is written from.
    pub(crate) fn summary_epoch(&self, chat: &str) -> Result<i64, AgentError> {
        Ok(self
            .db
            .read(|c| {
                c.query_row("SELECT summary_epoch FROM chats WHERE id = ?1", [chat], |r| r.get(0))
                    .optional()
                    .map_err(q("summary epoch"))
            })?
            .unwrap_or(0))
    }

    /// Stores a summary written from the messages as they were at `epoch`; `false` (nothing
    /// stored) when a decision changed one of them since.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn set_summary(
        &self,
        chat: &str,
        upto: i64,
        text: &str,
        model: &str,
        epoch: i64,
        now: i64,
    ) -> Result<bool, AgentError> {
        let n = self.db.write(|tx| {
            tx.execute(
                "INSERT INTO summaries (chat_id, upto, text, model, created_at) \
                 SELECT ?1, ?2, ?3, ?4, ?5 WHERE (SELECT summary_epoch FROM chats WHERE id = ?1) = ?6 \
                 ON CONFLICT (chat_id) DO UPDATE SET \
                 upto = excluded.upto, text = excluded.text, model = excluded.model, \
                 created_at = excluded.created_at WHERE excluded.upto > summaries.upto",
                params![chat, upto, text, model, now, epoch],
            )
            .map_err(q("store summary"))
        })?;
        Ok(n > 0)
    }

    /// The tool message answering `call_id` gets `content` (a pending call's final result).
    pub(crate) fn set_tool_message(
        &self,
        chat: &str,
        call_id: &str,
        content: &str,
    ) -> Result<(), AgentError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE messages SET content = ?3 WHERE chat_id = ?1 AND role = 'tool' \
                 AND tool_call_id = ?2",
                params![chat, call_id, content],
            )
            .map_err(q("update tool message"))?;
            // A summary written while the call waited stands for the old text: it now ends
            // before the call (its text stays, as what came before), so the next context
            // carries the call with its outcome and summarizes it again from there. Summaries
            // being written from the older text are not stored (the epoch moves on).
            tx.execute(
                "UPDATE summaries SET upto = coalesce((SELECT max(id) FROM messages \
                 WHERE chat_id = ?1 AND role = 'assistant' AND id < (SELECT min(id) FROM messages \
                 WHERE chat_id = ?1 AND role = 'tool' AND tool_call_id = ?2)) - 1, 0) \
                 WHERE chat_id = ?1 AND upto >= (SELECT min(id) FROM messages \
                 WHERE chat_id = ?1 AND role = 'tool' AND tool_call_id = ?2)",
                params![chat, call_id],
            )
            .map_err(q("move a stale summary back"))?;
            tx.execute("UPDATE chats SET summary_epoch = summary_epoch + 1 WHERE id = ?1", [chat])
                .map_err(q("bump the summary epoch"))
        })?;
        Ok(())
    }

    /// Every message of a chat, in order (the model's history; bounded by the caller's
    /// compaction, and by `limit`).
    pub(crate) fn messages(
        &self,
        chat: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ChatMessage>, AgentError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT id, run_id, role, content, tool_calls, tool_call_id, created_at \
                     FROM messages WHERE chat_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
                )
                .map_err(q("read messages"))?;
            let rows = st
                .query_map(params![chat, after, limit as i64], message)
                .map_err(q("read messages"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("read messages"))
        })?)
    }

    /// The text of the last assistant message run `run` wrote in `chat`.
    pub(crate) fn last_answer(&self, chat: &str, run: &str) -> Result<Option<String>, AgentError> {
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT content FROM messages WHERE chat_id = ?1 AND run_id = ?2 \
                 AND role = 'assistant' AND content IS NOT NULL ORDER BY id DESC LIMIT 1",
                params![chat, run],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(q("last answer"))
        })?)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_call(
        &self,
        chat: &str,
        run: &str,
        call_id: &str,
        tool: &str,
        input: &str,
        input_key: &str,
        now: i64,
    ) -> Result<(), AgentError> {
        self.db.write(|tx| {
            tx.execute(
                "INSERT OR IGNORE INTO tool_calls (chat_id, run_id, call_id, tool, input, \
                 input_key, status, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7)",
                params![chat, run, call_id, tool, input, input_key, now],
            )
            .map_err(q("record call"))
        })?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_call(
        &self,
        chat: &str,
        call_id: &str,
        status: &str,
        approval_id: Option<i64>,
        result: &str,
        detail: Option<&serde_json::Value>,
        now: i64,
    ) -> Result<(), AgentError> {
        let detail = detail.map(serde_json::Value::to_string);
        self.db.write(|tx| {
            tx.execute(
                "UPDATE tool_calls SET status = ?3, approval_id = coalesce(?4, approval_id), \
                 result = ?5, detail = coalesce(?6, detail), finished_at = ?7 \
                 WHERE chat_id = ?1 AND call_id = ?2",
                params![chat, call_id, status, approval_id, result, detail, now],
            )
            .map_err(q("finish call"))
        })?;
        Ok(())
    }

    /// How many calls of this chat with `input_key` ended in one of `statuses`.
    pub(crate) fn count_calls(
        &self,
        chat: &str,
        input_key: &str,
        run: Option<&str>,
        statuses: &[&str],
    ) -> Result<usize, AgentError> {
        let list = statuses.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(",");
        let sql = format!(
            "SELECT count(*) FROM tool_calls WHERE chat_id = ?1 AND input_key = ?2 \
             AND (?3 IS NULL OR run_id = ?3) AND status IN ({list})"
        );
        Ok(self.db.read(|c| {
            c.query_row(&sql, params![chat, input_key, run], |r| r.get::<_, i64>(0))
                .map_err(q("count calls"))
        })? as usize)
    }

    /// The call gated by `approval_id` while it still waits: (chat, call id, tool, run).
    pub(crate) fn awaiting(
        &self,
        approval_id: i64,
    ) -> Result<Option<(String, String, String, String)>, AgentError> {
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT chat_id, call_id, tool, run_id FROM tool_calls WHERE approval_id = ?1 \
                 AND status = 'awaiting_approval'",
                [approval_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(q("awaiting call"))
        })?)
    }

    /// The calls of `chat` a person was asked about (gated: waiting, or decided since), newest
    /// first, at most [`MAX_GATED_LISTED`]: (call id, tool, status).
    pub(crate) fn gated_calls(
        &self,
        chat: &str,
    ) -> Result<Vec<(String, String, String)>, AgentError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT call_id, tool, status FROM tool_calls WHERE chat_id = ?1 \
                     AND approval_id IS NOT NULL ORDER BY id DESC LIMIT ?2",
                )
                .map_err(q("gated calls"))?;
            let rows = st
                .query_map(params![chat, MAX_GATED_LISTED as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(q("gated calls"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("gated calls"))
        })?)
    }

    /// Every approval a call still waits for.
    pub(crate) fn awaiting_approvals(&self, chat: Option<&str>) -> Result<Vec<i64>, AgentError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT approval_id FROM tool_calls WHERE status = 'awaiting_approval' \
                     AND approval_id IS NOT NULL AND (?1 IS NULL OR chat_id = ?1) ORDER BY id",
                )
                .map_err(q("awaiting"))?;
            let rows = st.query_map([chat], |r| r.get(0)).map_err(q("awaiting"))?;
            rows.collect::<Result<Vec<i64>, _>>().map_err(q("awaiting"))
        })?)
    }

    pub(crate) fn calls(&self, chat: &str) -> Result<Vec<ToolCallRecord>, AgentError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT call_id, run_id, tool, input, status, approval_id, result \
                     FROM tool_calls WHERE chat_id = ?1 ORDER BY id",
                )
                .map_err(q("calls"))?;
            let rows = st
                .query_map([chat], |r| {
                    Ok(ToolCallRecord {
                        call_id: r.get(0)?,
                        run_id: r.get(1)?,
                        tool: r.get(2)?,
                        input: r.get(3)?,
                        status: r.get(4)?,
                        approval_id: r.get(5)?,
                        result: r.get(6)?,
                    })
                })
                .map_err(q("calls"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("calls"))
        })?)
    }

    pub(crate) fn start_turn(&self, run: &str, chat: &str, now: i64) -> Result<(), AgentError> {
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO turns (run_id, chat_id, status, started_at) VALUES (?1, ?2, 'running', ?3)",
                params![run, chat, now],
            )
            .map_err(q("start turn"))
        })?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn end_turn(
        &self,
        run: &str,
        reason: EndReason,
        model_calls: i64,
        tool_calls: i64,
        tokens: (i64, i64),
        cost_micros: i64,
        error: Option<&str>,
        next_run: Option<&str>,
        ended: (&str, &TurnEvent),
        now: i64,
    ) -> Result<(), AgentError> {
        let (chat, event) = ended;
        let json = serde_json::to_string(event).map_err(|e| AgentError::Invalid(e.to_string()))?;
        self.db.write(|tx| {
            // The end event in the same write: whoever sees the turn ended sees its event.
            tx.execute(
                "INSERT INTO events (run_id, chat_id, event, at) VALUES (?1, ?2, ?3, ?4)",
                params![run, chat, json, now],
            )
            .map_err(q("append end event"))?;
            tx.execute(
                "UPDATE turns SET status = 'ended', end_reason = ?2, model_calls = ?3, \
                 tool_calls = ?4, input_tokens = ?5, output_tokens = ?6, error = ?7, ended_at = ?8, \
                 next_run = ?9, cost_micros = ?10 WHERE run_id = ?1",
                params![
                    run,
                    reason.as_str(),
                    model_calls,
                    tool_calls,
                    tokens.0,
                    tokens.1,
                    error,
                    now,
                    next_run,
                    cost_micros
                ],
            )
            .map_err(q("end turn"))
        })?;
        Ok(())
    }

    /// Turns left `running` by a process that died: `interrupted`, and their unfinished calls
    /// with them. Returns the runs.
    pub(crate) fn interrupt_running(&self, now: i64) -> Result<Vec<(String, String)>, AgentError> {
        Ok(self.db.write(|tx| {
            let runs: Vec<(String, String)> = {
                let mut st = tx
                    .prepare("SELECT run_id, chat_id FROM turns WHERE status = 'running'")
                    .map_err(q("running turns"))?;
                let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(q("running turns"))?;
                rows.collect::<Result<Vec<_>, _>>().map_err(q("running turns"))?
            };
            tx.execute(
                "UPDATE turns SET status = 'interrupted', end_reason = 'error', \
                 error = 'the process stopped during the turn', ended_at = ?1 WHERE status = 'running'",
                [now],
            )
            .map_err(q("interrupt turns"))?;
            tx.execute(
                "UPDATE tool_calls SET status = 'interrupted', finished_at = ?1, \
                 result = 'interrupted: the process stopped before this call finished' \
                 WHERE status = 'running'",
                [now],
            )
            .map_err(q("interrupt calls"))?;
            Ok::<_, StoreError>(runs)
        })?)
    }

    pub(crate) fn turn(&self, run: &str) -> Result<TurnRecord, AgentError> {
        self.db
            .read(|c| {
                c.query_row(
                    &format!("SELECT {TURN_COLS} FROM turns WHERE run_id = ?1"),
                    [run],
                    turn,
                )
                .optional()
                .map_err(q("read turn"))
            })?
            .ok_or_else(|| AgentError::RunNotFound(run.to_owned()))
    }

    pub(crate) fn turns(&self, chat: &str, limit: usize) -> Result<Vec<TurnRecord>, AgentError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {TURN_COLS} FROM turns WHERE chat_id = ?1 ORDER BY started_at DESC, rowid DESC LIMIT ?2"
                ))
                .map_err(q("turns"))?;
            let rows = st.query_map(params![chat, limit as i64], turn).map_err(q("turns"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("turns"))
        })?)
    }

    pub(crate) fn append_event(
        &self,
        run: &str,
        chat: &str,
        event: &TurnEvent,
        now: i64,
    ) -> Result<i64, AgentError> {
        let json = serde_json::to_string(event).map_err(|e| AgentError::Invalid(e.to_string()))?;
        Ok(self.db.write_autocommit(|c| {
            c.execute(
                "INSERT INTO events (run_id, chat_id, event, at) VALUES (?1, ?2, ?3, ?4)",
                params![run, chat, json, now],
            )
            .map_err(q("append event"))?;
            Ok::<_, StoreError>(c.last_insert_rowid())
        })?)
    }

    /// The newest event's position (of `chat`, or of every chat); 0 when there is none.
    pub(crate) fn event_position(&self, chat: Option<&str>) -> Result<i64, AgentError> {
        Ok(self.db.read(|c| {
            c.query_row(
                "SELECT coalesce(max(seq), 0) FROM events WHERE (?1 IS NULL OR chat_id = ?1)",
                [chat],
                |r| r.get(0),
            )
            .map_err(q("event position"))
        })?)
    }

    pub(crate) fn events_after(
        &self,
        chat: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, AgentError> {
        if limit == 0 || limit > MAX_EVENT_PAGE {
            return Err(AgentError::Invalid(format!("limit must be 1..={MAX_EVENT_PAGE}")));
        }
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT seq, run_id, chat_id, at, event FROM events \
                     WHERE seq > ?1 AND (?2 IS NULL OR chat_id = ?2) ORDER BY seq LIMIT ?3",
                )
                .map_err(q("events"))?;
            let rows = st
                .query_map(params![after, chat, limit as i64], |r| {
                    let text: String = r.get(4)?;
                    let event = serde_json::from_str(&text).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            4,
                            rusqlite::types::Type::Text,
                            Box::new(e),
                        )
                    })?;
                    Ok(EventRecord {
                        seq: r.get(0)?,
                        run_id: r.get(1)?,
                        chat_id: r.get(2)?,
                        at: r.get(3)?,
                        event,
                    })
                })
                .map_err(q("events"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("events"))
        })?)
    }
}
