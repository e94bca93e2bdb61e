// A small OpenAI-compatible chat server around a real local model (SmolLM2-135M-Instruct, GGUF,
// run on the CPU by node-llama-cpp): POST /v1/chat/completions with or without `stream`
// (server-sent events), GET /v1/models, GET /health. For trying chat with no key
// (`scripts/local-model`) and for the end-to-end test of a whole turn with a real model.
//
// Tool calls. A 135M model cannot be trusted to choose the format, so the format is forced: when
// the request offers tools and no tool result has come back since the person's last message,
// the answer is generated under a JSON-schema grammar built from the offered tools (`tool_choice`
// "none" turns that off; `{"type":"function","function":{"name":…}}` narrows it to one tool), and
// returned as a `tool_calls` entry. After a tool result the model answers in free text. What the
// model writes inside the grammar is its own.
//
// Usage: node server.mjs --model PATH.gguf [--port 8089] [--host 127.0.0.1] [--threads 1]
//        [--context 4096] [--max-tokens 256]
// It prints `listening on http://HOST:PORT/v1` once the model is loaded.

import http from "node:http";
import { getLlama, LlamaChat } from "node-llama-cpp";

function option(name, fallback) {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const modelPath = option("model", process.env.STEWARD_LOCAL_MODEL);
if (!modelPath) {
    console.error("usage: node server.mjs --model PATH.gguf [--port 8089]");
    process.exit(2);
}
const host = option("host", "127.0.0.1");
const port = Number(option("port", "8089"));
// One thread: on a 2-core machine llama.cpp's default threading is ~300 times slower.
const threads = Number(option("threads", "1"));
const contextSize = Number(option("context", "4096"));
const maxTokensCap = Number(option("max-tokens", "256"));
// Request bodies larger than this are refused (413).
const MAX_BODY_BYTES = 4 * 1024 * 1024;
// Characters of one message kept (the tail is dropped): a 135M model with a 4k context.
const MAX_MESSAGE_CHARS = 6000;
const MODEL_NAME = "smollm2-135m-instruct";

const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize, threads });
const sequence = context.getSequence();
// One generation at a time (one sequence): requests wait their turn.
let queue = Promise.resolve();

function clip(text) {
    const t = typeof text === "string" ? text : JSON.stringify(text ?? "");
    return t.length > MAX_MESSAGE_CHARS ? `${t.slice(0, MAX_MESSAGE_CHARS)} …` : t;
}

/** OpenAI messages as node-llama-cpp chat history (tool traffic as plain text turns). */
function history(messages) {
    const items = [];
    for (const m of messages) {
        if (m.role === "system" || m.role === "developer") {
            items.push({ type: "system", text: clip(m.content) });
        } else if (m.role === "user") {
            items.push({ type: "user", text: clip(m.content) });
        } else if (m.role === "assistant") {
            const parts = [];
            if (m.content) parts.push(clip(m.content));
            for (const c of m.tool_calls ?? []) {
                parts.push(`Let me use ${c.function.name}.`);
            }
            items.push({ type: "model", response: [parts.join("\n")] });
        } else if (m.role === "tool") {
            items.push({ type: "user",
                text: `The tool returned:\n${clip(m.content)}\nNow answer my question in a sentence or two.` });
        }
    }
    items.push({ type: "model", response: [] });
    return items;
}

/** A schema the grammar can hold: the tool's required properties of simple types. */
function simpleArguments(parameters) {
    const props = parameters?.properties ?? {};
    const required = (parameters?.required ?? []).filter((k) => props[k]);
    const out = {};
    for (const k of required) {
        const t = Array.isArray(props[k].type) ? props[k].type.find((x) => x !== "null") : props[k].type;
        out[k] = { type: ["string", "integer", "number", "boolean"].includes(t) ? t : "string" };
    }
    return { type: "object", properties: out, required };
}

/** The tools to force a call of, or none. */
function forcedTools(body) {
    const tools = (body.tools ?? []).filter((t) => t.type === "function" && t.function?.name);
    if (tools.length === 0 || body.tool_choice === "none") return [];
    const messages = body.messages ?? [];
    let lastUser = -1;
    messages.forEach((m, i) => { if (m.role === "user") lastUser = i; });
    if (messages.slice(lastUser + 1).some((m) => m.role === "tool")) return [];
    const named = body.tool_choice?.function?.name;
    return named ? tools.filter((t) => t.function.name === named) : tools;
}

async function generate(body, onText) {
    const tools = forcedTools(body);
    const maxTokens = Math.min(Number(body.max_tokens ?? maxTokensCap), maxTokensCap);
    const chat = new LlamaChat({ contextSequence: sequence });
    const options = {
        maxTokens,
        temperature: Number(body.temperature ?? 0),
        // Greedy when the temperature is 0: the same request gives the same answer.
        seed: 1,
    };
    let grammar;
    if (tools.length > 0) {
        grammar = await llama.createGrammarForJsonSchema({
            oneOf: tools.map((t) => ({
                type: "object",
                properties: {
                    name: { const: t.function.name },
                    arguments: simpleArguments(t.function.parameters),
                },
                required: ["name", "arguments"],
            })),
        });
        options.grammar = grammar;
    } else {
        options.onTextChunk = onText;
    }
    const items = history(body.messages ?? []);
    if (tools.length > 0) {
        // The model sees what it may call (the grammar holds it to these names).
        const list = tools.map((t) => `- ${t.function.name}: ${t.function.description ?? ""}`).join("\n");
        items.unshift({ type: "system", text: `Answer with one tool call. Tools:\n${list}` });
    }
    const before = sequence.tokenMeter.getState();
    try {
        const res = await chat.generateResponse(items, options);
        const after = sequence.tokenMeter.getState();
        const usage = {
            prompt_tokens: after.usedInputTokens - before.usedInputTokens,
            completion_tokens: after.usedOutputTokens - before.usedOutputTokens,
        };
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
        if (grammar) {
            const call = grammar.parse(res.response);
            const id = `call_${Date.now().toString(36)}`;
            return {
                content: null,
                toolCalls: [{ id, type: "function",
                    function: { name: call.name, arguments: JSON.stringify(call.arguments) } }],
                finish: "tool_calls",
                usage,
            };
        }
        return { content: res.response, toolCalls: [], finish: res.metadata?.stopReason === "maxTokens" ? "length" : "stop", usage };
    } finally {
        chat.dispose({ disposeSequence: false });
        await sequence.clearHistory();
    }
}

function send(res, status, value) {
    const data = JSON.stringify(value);
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) });
    res.end(data);
}

function chunk(res, id, delta, finish, usage) {
    const c = { id, object: "chat.completion.chunk", model: MODEL_NAME,
        choices: delta ? [{ index: 0, delta, finish_reason: finish ?? null }] : [] };
    if (usage) c.usage = usage;
    res.write(`data: ${JSON.stringify(c)}\n\n`);
}

/** What OpenAI's API refuses in a conversation, as it words it; `null` when it is well formed. */
function malformed(messages) {
    if (!Array.isArray(messages) || messages.length === 0) return "messages is required";
    for (const [i, m] of messages.entries()) {
        if (!["system", "developer", "user", "assistant", "tool"].includes(m?.role)) {
            return `messages[${i}].role is invalid`;
        }
        for (const [j, c] of (m.tool_calls ?? []).entries()) {
            if (c?.type !== "function") return `Missing required parameter: 'messages[${i}].tool_calls[${j}].type'.`;
            if (typeof c.function?.name !== "string" || typeof c.function?.arguments !== "string") {
                return `Missing required parameter: 'messages[${i}].tool_calls[${j}].function'.`;
            }
        }
        if (m.role === "tool" && typeof m.tool_call_id !== "string") {
            return `Missing required parameter: 'messages[${i}].tool_call_id'.`;
        }
    }
    return null;
}

async function completions(req, res, body) {
    const id = `chatcmpl-${Date.now().toString(36)}`;
    const problem = malformed(body.messages);
    if (problem) {
        return send(res, 400, { error: { message: problem, type: "invalid_request_error" } });
    }
    if (body.stream) {
        res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "close" });
        chunk(res, id, { role: "assistant", content: "" });
        const out = await generate(body, (text) => chunk(res, id, { content: text }));
        if (out.toolCalls.length > 0) {
            chunk(res, id, { tool_calls: out.toolCalls.map((c, index) => ({ index, ...c })) });
        }
        chunk(res, id, {}, out.finish);
        if (body.stream_options?.include_usage) chunk(res, id, null, null, out.usage);
        res.write("data: [DONE]\n\n");
        return res.end();
    }
    const out = await generate(body, undefined);
    const message = { role: "assistant", content: out.content };
    if (out.toolCalls.length > 0) message.tool_calls = out.toolCalls;
    send(res, 200, { id, object: "chat.completion", created: Math.floor(Date.now() / 1000), model: MODEL_NAME,
        choices: [{ index: 0, message, finish_reason: out.finish }], usage: out.usage });
}

const server = http.createServer((req, res) => {
    if (req.method === "GET" && (req.url === "/health" || req.url === "/v1/health")) {
        return send(res, 200, { status: "ok", model: MODEL_NAME });
    }
    if (req.method === "GET" && req.url === "/v1/models") {
        return send(res, 200, { object: "list", data: [{ id: MODEL_NAME, object: "model", owned_by: "local" }] });
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        return send(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
    }
    let size = 0;
    const parts = [];
    req.on("data", (d) => {
        size += d.length;
        if (size > MAX_BODY_BYTES) {
            send(res, 413, { error: { message: "request too large" } });
            req.destroy();
        } else {
            parts.push(d);
        }
    });
    req.on("end", () => {
        if (size > MAX_BODY_BYTES) return;
        let body;
        try {
            body = JSON.parse(Buffer.concat(parts).toString("utf8"));
        } catch (e) {
            return send(res, 400, { error: { message: `bad JSON: ${e.message}`, type: "invalid_request_error" } });
        }
        queue = queue.then(() => completions(req, res, body)).catch((e) => {
            console.error(e);
            if (!res.headersSent) send(res, 500, { error: { message: String(e?.message ?? e) } });
            else res.end();
        });
    });
});

server.listen(port, host, () => {
    const a = server.address();
    console.log(`listening on http://${a.address}:${a.port}/v1`);
});
for (const sig of ["SIGINT", "SIGTERM"]) {
    process.on(sig, () => { server.close(); process.exit(0); });
}
