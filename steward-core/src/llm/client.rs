//! The OpenAI-compatible `/chat/completions` client: sequential fallback, a shared deadline,
//! SSE streaming that never switches providers mid-output (and re-emits a whole answer as a
//! synthetic stream when a target will not stream), tool calls, and the ledger.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::net::{error_message, transport_error};

use super::{
    AttemptRecord, ChatRequest, ChatResponse, LlmConfig, LlmConfigError, LlmError,
    MAX_ANSWER_BYTES, MAX_MESSAGES, MAX_SSE_LINE_BYTES, MAX_TOOL_CALL_ARGUMENTS_BYTES,
    MAX_TOOL_CALL_NAME_BYTES, MAX_TOOLS, RequestRecord, STREAM_NATIVE, STREAM_NONE,
    STREAM_SYNTHETIC, Target, TokenUsage, ToolCall, UsageLedger, cost_micros,
};

/// A piece of streamed output, as it reaches the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    /// Text.
    Text(String),
    /// A fragment of a tool call (`index` orders calls; `arguments` accumulate).
    ToolCall {
        /// Which call.
        index: usize,
        /// Its id, on its first fragment.
        id: Option<String>,
        /// Its tool name, on its first fragment.
        name: Option<String>,
        /// More of its JSON arguments.
        arguments: String,
    },
}

/// A chat client over the configured targets. Its calls block.
pub struct LlmClient {
    config: LlmConfig,
    http: reqwest::blocking::Client,
    ledger: Option<Arc<UsageLedger>>,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient").field("config", &self.config).finish_non_exhaustive()
    }
}

/// How one attempt failed.
struct AttemptError {
    status: Option<u16>,
    message: String,
    /// Characters (and tool-call fragments) already handed to the caller.
    delivered: usize,
    /// The stream went over this bound (what, bytes): the request ends, on no other target.
    over: Option<(&'static str, usize)>,
}

fn failed(status: Option<u16>, message: impl Into<String>) -> AttemptError {
    AttemptError { status, message: message.into(), delivered: 0, over: None }
}

/// What an attempt asked for and how long its headers took, for the ledger.
struct AttemptMeta {
    stream_mode: &'static str,
    headers_ms: Option<i64>,
}

/// Statuses with which a target refuses a streaming request it would answer whole: the stream
/// is asked for again, on the same target, without `stream` (and re-emitted to the caller).
const STREAM_REFUSED: [u16; 4] = [400, 415, 422, 501];

/// The conversation in the OpenAI wire format: an assistant's tool calls nest their name and
/// arguments under `function` with `"type": "function"` (servers that check, OpenAI's among
/// them, refuse the flat form).
fn wire_messages(messages: &[crate::llm::Message]) -> Value {
    messages
        .iter()
        .map(|m| {
            let mut v = json!({"role": m.role});
            if let Some(c) = &m.content {
                v["content"] = c.as_str().into();
            } else if m.tool_calls.is_empty() {
                // An empty answer (a model that said nothing, a turn cancelled mid-stream):
                // servers refuse an assistant message with neither text nor calls.
                v["content"] = "".into();
            } else {
                v["content"] = Value::Null;
            }
            if !m.tool_calls.is_empty() {
                v["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
            }
            if let Some(id) = &m.tool_call_id {
                v["tool_call_id"] = id.as_str().into();
            }
            v
        })
        .collect()
}

/// Hands a whole answer to the caller as stream deltas (the text, then each tool call whole).
fn re_emit(r: &ChatResponse, sink: &mut (dyn FnMut(&StreamDelta) + '_)) {
    if !r.content.is_empty() {
        sink(&StreamDelta::Text(r.content.clone()));
    }
    for (index, c) in r.tool_calls.iter().enumerate() {
        sink(&StreamDelta::ToolCall {
            index,
            id: Some(c.id.clone()),
            name: Some(c.name.clone()),
            arguments: c.arguments.clone(),
        });
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl LlmClient {
    /// A client for `config`, recording into `ledger` when given.
    pub fn new(
        config: LlmConfig,
        ledger: Option<Arc<UsageLedger>>,
    ) -> Result<Self, LlmConfigError> {
        config.validate()?;
        crate::net::install_crypto_provider();
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| LlmConfigError(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self { config, http, ledger })
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// One answer, falling back across the capability's targets.
    pub fn complete(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.run(req, None)
    }

    /// A streamed answer: `on_delta` receives the output as it arrives. A target that fails
    /// before anything reached `on_delta` gives way to the next; once output was delivered, a
    /// failure is [`LlmError::Interrupted`] and nothing else is tried. A stream that goes over
    /// a bound (a tool call's name or arguments, the whole answer) is [`LlmError::TooLarge`],
    /// and nothing else is tried either.
    pub fn stream(
        &self,
        req: &ChatRequest,
        on_delta: &mut dyn FnMut(&StreamDelta),
    ) -> Result<ChatResponse, LlmError> {
        self.run(req, Some(on_delta))
    }

    fn run(
        &self,
        req: &ChatRequest,
        mut sink: Option<&mut dyn FnMut(&StreamDelta)>,
    ) -> Result<ChatResponse, LlmError> {
        if req.messages.is_empty() || req.messages.len() > MAX_MESSAGES {
            return Err(LlmError::Invalid(format!("1..={MAX_MESSAGES} messages")));
        }
        if req.tools.len() > MAX_TOOLS {
            return Err(LlmError::Invalid(format!("at most {MAX_TOOLS} tools")));
        }
        let cap = req.capability.as_str();
        let streamed = sink.is_some();
        let route = self.config.route(req.capability, !req.tools.is_empty());
        if route.is_empty() {
            return Err(LlmError::NotConfigured(cap));
        }
        let started = Instant::now();
        let at = crate::time::now_secs();
        let deadline = self.config.deadline;
        let mut attempts: Vec<AttemptRecord> = Vec::new();
        let mut last = String::new();
        let mut last_target: Option<(String, String)> = None;
        let mut outcome = "failed";
        'targets: for (name, target) in &route {
            // A streamed request asks the target for a native stream first; a target that
            // refuses to stream is asked once more for a whole answer, re-emitted as deltas.
            let mut native = streamed;
            loop {
                let remaining = deadline.saturating_sub(started.elapsed());
                if remaining.is_zero() {
                    outcome = "deadline";
                    break 'targets;
                }
                let t0 = Instant::now();
                last_target = Some((name.clone(), target.model.clone()));
                let mut meta = AttemptMeta { stream_mode: STREAM_NONE, headers_ms: None };
                let result =
                    self.attempt(target, req, remaining, sink.as_deref_mut(), native, &mut meta);
                let record = |status: Option<u16>, outcome: &'static str, error: Option<String>| {
                    AttemptRecord {
                        target: name.clone(),
                        model: target.model.clone(),
                        status,
                        outcome,
                        latency_ms: millis(t0.elapsed()),
                        error,
                        stream_mode: meta.stream_mode,
                        headers_ms: meta.headers_ms,
                    }
                };
                match result {
                    Ok(mut resp) => {
                        attempts.push(record(Some(200), "ok", None));
                        resp.target.clone_from(name);
                        resp.attempts = attempts.len();
                        resp.request_id = self.record(
                            req,
                            at,
                            started,
                            "ok",
                            Some((name, target)),
                            &resp.usage,
                            None,
                            &attempts,
                            streamed,
                        );
                        return Ok(resp);
                    }
                    Err(e) => {
                        attempts.push(record(e.status, "failed", Some(e.message.clone())));
                        if let Some((what, limit)) = e.over {
                            // Over a bound: ended here, whatever reached the caller.
                            let error = LlmError::TooLarge { target: name.clone(), what, limit };
                            self.record(
                                req,
                                at,
                                started,
                                if e.delivered > 0 { "interrupted" } else { "failed" },
                                Some((name, target)),
                                &TokenUsage::default(),
                                Some(&error.to_string()),
                                &attempts,
                                streamed,
                            );
                            return Err(error);
                        }
                        if e.delivered > 0 {
                            // Output reached the caller: never retried, never switched.
                            self.record(
                                req,
                                at,
                                started,
                                "interrupted",
                                Some((name, target)),
                                &TokenUsage::default(),
                                Some(&e.message),
                                &attempts,
                                true,
                            );
                            return Err(LlmError::Interrupted {
                                target: name.clone(),
                                delivered_chars: e.delivered,
                                reason: e.message,
                            });
                        }
                        last = format!("{name}: {}", e.message);
                        if started.elapsed() >= deadline {
                            outcome = "deadline";
                            break 'targets;
                        }
                        if native && e.status.is_some_and(|s| STREAM_REFUSED.contains(&s)) {
                            native = false;
                            continue;
                        }
                        continue 'targets;
                    }
                }
            }
        }
        let error = if outcome == "deadline" {
            LlmError::Deadline(deadline.as_secs())
        } else {
            LlmError::Unavailable { capability: cap, attempts: attempts.len(), last }
        };
        let answered = last_target.as_ref().and_then(|(n, _)| route.iter().find(|(r, _)| r == n));
        self.record(
            req,
            at,
            started,
            outcome,
            answered.map(|(n, t)| (n, t)),
            &TokenUsage::default(),
            Some(&error.to_string()),
            &attempts,
            streamed,
        );
        Err(error)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        req: &ChatRequest,
        at: i64,
        started: Instant,
        outcome: &'static str,
        target: Option<(&String, &Target)>,
        usage: &TokenUsage,
        error: Option<&str>,
        attempts: &[AttemptRecord],
        streamed: bool,
    ) -> Option<i64> {
        let ledger = self.ledger.as_ref()?;
        let model = target.map(|(_, t)| t.model.clone());
        let rates = model.as_ref().and_then(|m| self.config.rates.get(m));
        let record = RequestRecord {
            at,
            service: req.attribution.service.clone(),
            action: req.attribution.action.clone(),
            capability: req.capability.as_str().to_owned(),
            target: target.map(|(n, _)| n.clone()),
            model,
            outcome,
            streamed,
            usage: *usage,
            cost_micros: cost_micros(rates, usage),
            priced: rates.is_some(),
            latency_ms: millis(started.elapsed()),
            error: error.map(str::to_owned),
        };
        match ledger.record(&record, attempts) {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!(error = %e, "the usage ledger could not record a model request");
                None
            }
        }
    }

    /// One request to `target`. With a `sink`, a native stream when `native` (else a whole
    /// answer re-emitted to the sink); `meta` says which it was and when the headers came.
    fn attempt(
        &self,
        target: &Target,
        req: &ChatRequest,
        timeout: Duration,
        sink: Option<&mut (dyn FnMut(&StreamDelta) + '_)>,
        native: bool,
        meta: &mut AttemptMeta,
    ) -> Result<ChatResponse, AttemptError> {
        let mut body = json!({"model": target.model, "messages": wire_messages(&req.messages)});
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
        }
        if let Some(m) = req.max_tokens {
            body["max_tokens"] = m.into();
        }
        if let Some(t) = req.temperature {
            body["temperature"] = t.into();
        }
        if let Some((name, schema)) = &req.json_schema {
            body["response_format"] = json!({"type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": true}});
        }
        if sink.is_some() && native {
            body["stream"] = true.into();
            body["stream_options"] = json!({"include_usage": true});
        }
        meta.stream_mode = match (&sink, native) {
            (None, _) => STREAM_NONE,
            (Some(_), true) => STREAM_NATIVE,
            (Some(_), false) => STREAM_SYNTHETIC,
        };
        let base = target.base_url.trim_end_matches('/');
        let url = if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        };
        let a = &req.attribution;
        let mut http = self
            .http
            .post(url)
            .timeout(timeout)
            .header("x-usage-service", a.service.as_deref().unwrap_or(super::UNKNOWN))
            .header("x-usage-action", a.action.as_deref().unwrap_or(super::UNKNOWN))
            .json(&body);
        if let Some(key) = &target.api_key {
            http = http.bearer_auth(key);
        }
        let sent = Instant::now();
        let resp = http.send().map_err(|e| failed(None, transport_error(e)))?;
        meta.headers_ms = Some(millis(sent.elapsed()));
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let mut raw = Vec::new();
            let _ = resp.take(64 * 1024).read_to_end(&mut raw);
            return Err(failed(Some(status), format!("HTTP {status}: {}", error_message(&raw))));
        }
        // A server may ignore `stream` and answer whole: that answer is re-emitted.
        let json_answer = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
        match sink {
            Some(sink) if native && !json_answer => read_stream(resp, &target.model, sink),
            Some(sink) => {
                meta.stream_mode = STREAM_SYNTHETIC;
                let answer = read_answer(resp, status, &target.model)?;
                re_emit(&answer, sink);
                Ok(answer)
            }
            None => read_answer(resp, status, &target.model),
        }
    }
}

/// Reads and parses a whole (non-streamed) answer.
fn read_answer(
    resp: reqwest::blocking::Response,
    status: u16,
    model: &str,
) -> Result<ChatResponse, AttemptError> {
    let mut raw = Vec::new();
    resp.take(MAX_ANSWER_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(|e| failed(Some(status), format!("reading the answer: {e}")))?;
    if raw.len() as u64 > MAX_ANSWER_BYTES {
        return Err(failed(Some(status), "the answer is too large"));
    }
    let v: Value = serde_json::from_slice(&raw)
        .map_err(|e| failed(Some(status), format!("malformed answer: {e}")))?;
    parse_answer(&v, model).map_err(|m| failed(Some(status), m))
}

/// A non-streamed answer.
fn parse_answer(v: &Value, model: &str) -> Result<ChatResponse, String> {
    let choice = v["choices"].get(0).ok_or("the answer has no choices")?;
    let msg = &choice["message"];
    if !msg.is_object() {
        return Err("the answer's choice has no message".into());
    }
    let tool_calls = msg["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| ToolCall {
                    id: c["id"].as_str().unwrap_or_default().to_owned(),
                    name: c["function"]["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: c["function"]["arguments"].as_str().unwrap_or_default().to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ChatResponse {
        content: msg["content"].as_str().unwrap_or_default().to_owned(),
        tool_calls,
        finish_reason: choice["finish_reason"].as_str().map(str::to_owned),
        usage: usage_of(&v["usage"]),
        target: String::new(),
        model: v["model"].as_str().unwrap_or(model).to_owned(),
        attempts: 0,
        request_id: None,
    })
}

fn usage_of(u: &Value) -> TokenUsage {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let prompt = n(&u["prompt_tokens"]);
    let cache_read = n(&u["prompt_tokens_details"]["cached_tokens"]);
    TokenUsage {
        input: prompt.saturating_sub(cache_read),
        output: n(&u["completion_tokens"]),
        cache_read,
        cache_write: n(&u["cache_creation_input_tokens"]),
    }
}

/// Reads an SSE stream, handing each piece to `sink` as it arrives.
fn read_stream(
    resp: reqwest::blocking::Response,
    model: &str,
    sink: &mut (dyn FnMut(&StreamDelta) + '_),
) -> Result<ChatResponse, AttemptError> {
    let mut reader = BufReader::new(resp);
    let mut content = String::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut finish: Option<String> = None;
    let mut usage = TokenUsage::default();
    let mut answered_model = model.to_owned();
    let mut delivered = 0usize;
    let mut done = false;
    let mut line = Vec::new();
    // Everything received so far (text, tool-call names and arguments), within MAX_ANSWER_BYTES.
    let mut received = 0usize;
    let broke = |delivered: usize, m: String| AttemptError {
        status: Some(200),
        message: m,
        delivered,
        over: None,
    };
    let over = |delivered: usize, what: &'static str, limit: usize| AttemptError {
        status: Some(200),
        message: format!("{what} exceeds {limit} bytes"),
        delivered,
        over: Some((what, limit)),
    };
    let answer_limit = usize::try_from(MAX_ANSWER_BYTES).unwrap_or(usize::MAX);
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_SSE_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| broke(delivered, format!("reading the stream: {e}")))?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_SSE_LINE_BYTES {
            return Err(broke(delivered, "an SSE line is too long".into()));
        }
        let text = String::from_utf8_lossy(&line);
        let Some(data) = text.trim_end().strip_prefix("data:") else { continue };
        let data = data.trim();
        if data == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| broke(delivered, format!("malformed stream chunk: {e}")))?;
        if let Some(m) = chunk["model"].as_str() {
            m.clone_into(&mut answered_model);
        }
        if chunk["usage"].is_object() {
            usage = usage_of(&chunk["usage"]);
        }
        let Some(choice) = chunk["choices"].get(0) else { continue };
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = Some(f.to_owned());
        }
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            received = received.saturating_add(t.len());
            if received > answer_limit {
                return Err(over(delivered, "the answer", answer_limit));
            }
            content.push_str(t);
            delivered += t.chars().count();
            sink(&StreamDelta::Text(t.to_owned()));
        }
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = c["index"].as_u64().and_then(|i| usize::try_from(i).ok()).unwrap_or(0);
            if index >= MAX_TOOLS {
                return Err(broke(delivered, "a tool call index is out of range".into()));
            }
            while calls.len() <= index {
                calls.push(ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
            }
            let id = c["id"].as_str().map(str::to_owned);
            let name = c["function"]["name"].as_str().map(str::to_owned);
            let arguments = c["function"]["arguments"].as_str().unwrap_or_default().to_owned();
            let call = &mut calls[index];
            // Checked before anything of this fragment is kept or handed on.
            let name_len = name.as_ref().map_or(0, String::len);
            if call.name.len() + name_len > MAX_TOOL_CALL_NAME_BYTES {
                return Err(over(delivered, "a tool call's name", MAX_TOOL_CALL_NAME_BYTES));
            }
            if call.arguments.len() + arguments.len() > MAX_TOOL_CALL_ARGUMENTS_BYTES {
                return Err(over(
                    delivered,
                    "a tool call's arguments",
                    MAX_TOOL_CALL_ARGUMENTS_BYTES,
                ));
            }
            received = received.saturating_add(name_len + arguments.len());
            if received > answer_limit {
                return Err(over(delivered, "the answer", answer_limit));
            }
            if let Some(i) = &id {
                call.id.clone_from(i);
            }
            if let Some(nm) = &name {
                call.name.push_str(nm);
            }
            call.arguments.push_str(&arguments);
            delivered += 1;
            sink(&StreamDelta::ToolCall { index, id, name, arguments });
        }
    }
    if !done && finish.is_none() {
        return Err(broke(delivered, "the stream ended before it finished".into()));
    }
    Ok(ChatResponse {
        content,
        tool_calls: calls,
        finish_reason: finish,
        usage,
        target: String::new(),
        model: answered_model,
        attempts: 0,
        request_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, ToolCall};

    #[test]
    fn the_conversation_goes_out_in_the_openai_wire_form() {
        let mut call = Message::text("assistant", "");
        call.content = None;
        call.tool_calls =
            vec![ToolCall { id: "c1".into(), name: "mail.search".into(), arguments: "{}".into() }];
        let mut empty = Message::text("assistant", "");
        empty.content = None;
        let mut result = Message::text("tool", "ok");
        result.tool_call_id = Some("c1".into());
        let wire = wire_messages(&[Message::text("user", "hi"), call, result, empty]);
        assert_eq!(
            wire,
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "mail.search", "arguments": "{}"}}]},
                {"role": "tool", "content": "ok", "tool_call_id": "c1"},
                // Neither text nor calls: an empty text, never a bare role.
                {"role": "assistant", "content": ""},
            ])
        );
    }
}
