//! Pairing and paired devices. `POST /pair` is public (the code is the credential): it
//! exchanges a one-time code for a device token and sets it as an HttpOnly cookie for a
//! browser. Codes are made by `steward serve` / `steward demo` at start, or by an
//! authenticated `POST /pairing-codes`; devices are listed and revoked.

use axum::{
    Json,
    extract::State,
    http::{HeaderValue, Method, header},
    response::{Html, IntoResponse, Response},
    routing::{get, post},
};
use serde::Deserialize;
use steward_core::access::{Device, PAIRING_CODE_TTL_SECS, Pairing, PairingCode};

use super::{ApiError, ApiJson, ApiPath, AppState, Route, auth::DEVICE_COOKIE, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/pair",
            "A page that pairs this browser with the code in the link's #fragment",
            schema::<String>,
            get(page),
        )
        .html()
        .public(),
        Route::new(
            Method::POST,
            "/pair",
            "Exchange a one-time pairing code for a device token (also set as a cookie)",
            schema::<Pairing>,
            post(pair),
        )
        .body(schema::<PairInput>)
        .public(),
        Route::new(
            Method::POST,
            "/pairing-codes",
            "A new one-time pairing code (valid 10 minutes)",
            schema::<PairingCode>,
            post(new_code),
        ),
        Route::new(
            Method::GET,
            "/devices",
            "Paired devices, newest first",
            schema::<Vec<Device>>,
            get(list),
        ),
        Route::new(
            Method::POST,
            "/devices/{id}/revoke",
            "Revoke a device: its token stops working at once",
            schema::<Device>,
            post(revoke),
        ),
    ]
}

/// A pairing request.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PairInput {
    /// The one-time code, `XXXX-XXXX` (case and dashes do not matter).
    #[schemars(length(min = 1, max = 32))]
    code: String,
    /// A name for the device ("Ada's phone").
    #[schemars(length(min = 1, max = 80))]
    name: String,
}

async fn pair(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<PairInput>,
) -> Result<Response, ApiError> {
    let pairing = state.call(move |s| s.pair_device(&input.code, &input.name)).await?;
    // Over TLS the cookie is never sent in clear; on loopback HTTP it cannot be `Secure`.
    let secure = if state.served_over_tls() { "; Secure" } else { "" };
    let cookie = format!(
        "{DEVICE_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age=31536000{secure}",
        pairing.token
    );
    let mut res = Json(pairing).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

async fn new_code(State(state): State<AppState>) -> Result<Json<PairingCode>, ApiError> {
    state.call(move |s| s.new_pairing_code()).await.map(Json)
}

async fn list(State(state): State<AppState>) -> Result<Json<Vec<Device>>, ApiError> {
    state.call(|s| s.devices()).await.map(Json)
}

async fn revoke(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Device>, ApiError> {
    state.call(move |s| s.revoke_device(id)).await.map(Json)
}

/// The pairing page: reads the code from the fragment (which never reaches a server log),
/// posts it, and the response's cookie pairs the browser.
async fn page() -> Response {
    let html = PAGE.replace("{TTL}", &(PAIRING_CODE_TTL_SECS / 60).to_string());
    let mut res = Html(html).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Pair with Steward</title>
<style>body{font:16px system-ui;max-width:30em;margin:3em auto;padding:0 1em}input,button{font:inherit;padding:.4em}</style>
</head><body>
<h1>Pair this browser with Steward</h1>
<p>Codes are valid for {TTL} minutes and work once.</p>
<p><label>Code <input id="code" autocomplete="off"></label></p>
<p><label>Name <input id="name" value="browser"></label></p>
<p><button id="go">Pair</button></p>
<p id="out" role="status"></p>
<script>
const code = document.getElementById("code");
code.value = decodeURIComponent(location.hash.slice(1));
history.replaceState(null, "", location.pathname);
document.getElementById("go").onclick = async () => {
  const out = document.getElementById("out");
  const r = await fetch("/pair", {method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({code: code.value, name: document.getElementById("name").value})});
  const body = await r.json();
  if (r.ok) { out.textContent = "Paired. Opening Steward…"; location.replace("/"); }
  else out.textContent = body.message;
};
</script>
</body></html>
"#;
