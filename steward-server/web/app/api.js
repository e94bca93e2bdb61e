// The documented HTTP API, nothing else. A paired browser is authenticated by its HttpOnly
// cookie (the token is never readable here); every call is same-origin.

/** An error answer: the server's typed `code` and `message`. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code);
    this.status = status;
    this.code = code;
  }
}

/** Calls the API: `api("/search", {query: {text: "x"}})`, `api("/x", {method: "POST", body})`. */
export async function api(path, {method = "GET", body, query, signal, once = false} = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== "") q.append(k, String(v));
    }
    const s = q.toString();
    if (s) url += (url.includes("?") ? "&" : "?") + s;
  }
  const headers = {accept: "application/json"};
  if (body !== undefined) headers["content-type"] = "application/json";
  // A decision sent twice (a double click, a retry after a dropped answer) has one effect.
  if (once) headers["idempotency-key"] = crypto.randomUUID();
  let res;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
      signal,
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "OFFLINE", "the server cannot be reached");
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!res.ok) {
    const code = (data && data.code) || `HTTP_${res.status}`;
    const message = (data && data.message) || res.statusText;
    const err = new ApiError(res.status, code, message);
    if (res.status === 401) window.dispatchEvent(new CustomEvent("steward:unpaired"));
    throw err;
  }
  return data;
}
