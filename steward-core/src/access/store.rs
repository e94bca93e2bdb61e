//! The durable side of network access (`steward.db`): idempotent responses, paired devices and
//! one-time pairing codes.

use std::path::Path;

use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::{AccessError, AccessToken};
use crate::{
    Limits,
    store::{Database, StoreError},
};

/// Longest `Idempotency-Key` accepted.
/// Fixed (not a setting).
pub const MAX_IDEMPOTENCY_KEY: usize = 200;
/// Largest response body remembered for a replay.
/// Fixed (not a setting).
pub const MAX_REMEMBERED_RESPONSE: usize = 256 * 1024;
/// How long a remembered response is kept, seconds.
/// Fixed (not a setting).
pub const IDEMPOTENCY_TTL_SECS: i64 = 24 * 3_600;
/// A request still without a response after this long stopped mid-way (a crash): its outcome
/// is unknown, and a retry with the key is refused rather than run again.
/// Fixed (not a setting).
pub const IN_FLIGHT_UNKNOWN_SECS: i64 = 300;
/// How long a pairing code is valid, seconds.
/// Fixed (not a setting).
pub const PAIRING_CODE_TTL_SECS: i64 = 600;
/// Characters of a pairing code (Crockford base32: 40 bits).
/// Fixed (not a setting).
pub const PAIRING_CODE_CHARS: usize = 8;
/// Live (unused, unexpired) pairing codes at once.
/// Fixed (not a setting).
pub const MAX_LIVE_PAIRING_CODES: i64 = 16;
/// Failed pairing attempts in [`PAIRING_CODE_TTL_SECS`] after which pairing is refused until
/// the window passes.
/// Fixed (not a setting).
pub const MAX_PAIRING_FAILURES: i64 = 10;
/// Most paired devices listed or kept.
/// Fixed (not a setting).
pub const MAX_DEVICES: i64 = 100;
/// Longest device name.
/// Fixed (not a setting).
pub const MAX_DEVICE_NAME: usize = 80;

/// What the first use of an idempotency key finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotentStart {
    /// New: run the request, then [`AccessStore::finish_idempotent`].
    Fresh,
    /// Answered before: send this again.
    Replay {
        /// The status.
        status: u16,
        /// The body.
        body: Vec<u8>,
    },
}

/// A paired device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Device {
    /// Its id.
    pub id: i64,
    /// The name given when pairing.
    pub name: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds (updated at most once a minute).
    pub last_used_at: Option<i64>,
    /// Unix seconds; a revoked device's token no longer works.
    pub revoked_at: Option<i64>,
}

/// A fresh pairing: the device and its token, shown once.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Pairing {
    /// The device.
    pub device: Device,
    /// Its bearer token; only its hash is stored.
    pub token: String,
}

/// A one-time pairing code.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PairingCode {
    /// The code, `XXXX-XXXX`.
    pub code: String,
    /// Unix seconds.
    pub expires_at: i64,
}

/// A stored request: its fingerprint, the response status and body (absent while in flight),
/// and when it was first seen.
type Remembered = (String, Option<u16>, Option<Vec<u8>>, i64);

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Normalizes a typed code: case-insensitive, dashes and spaces ignored, Crockford's
/// look-alikes (O→0, I/L→1) folded.
fn normalize_code(code: &str) -> String {
    code.chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| match c.to_ascii_uppercase() {
            'O' => '0',
            'I' | 'L' => '1',
            c => c,
        })
        .collect()
}

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> AccessError {
    move |e| AccessError::Store(StoreError::query(ctx, e))
}

/// Idempotent responses, devices and pairing codes of one home.
#[derive(Debug)]
pub struct AccessStore {
    db: Database,
}

impl AccessStore {
    /// Opens (creating) the tables in `<home>/steward.db`.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, AccessError> {
        Ok(Self { db: crate::approval::open_steward_db(home, limits)? })
    }

    /// The first step of a request sent with an `Idempotency-Key`: `request_sha256` covers
    /// everything that makes it this request (method, path, body). The same key with another
    /// request is `IDEMPOTENCY_KEY_REUSED`; a key whose first request has not answered yet is
    /// `IDEMPOTENCY_IN_FLIGHT` (or `IDEMPOTENCY_OUTCOME_UNKNOWN` once it is old enough to have
    /// been cut off by a crash).
    pub fn begin_idempotent(
        &self,
        principal: &str,
        key: &str,
        request_sha256: &str,
        now: i64,
    ) -> Result<IdempotentStart, AccessError> {
        if key.is_empty()
            || key.len() > MAX_IDEMPOTENCY_KEY
            || !key.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(AccessError::BadIdempotencyKey);
        }
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM idempotent_requests WHERE created_at < ?1",
                [now - IDEMPOTENCY_TTL_SECS],
            )
            .map_err(q("expire idempotent requests"))?;
            let row: Option<Remembered> = tx
                .query_row(
                    "SELECT request_sha256, status, body, created_at FROM idempotent_requests
                     WHERE principal = ?1 AND key = ?2",
                    params![principal, key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()
                .map_err(q("read idempotent request"))?;
            match row {
                None => {
                    tx.execute(
                        "INSERT INTO idempotent_requests (principal, key, request_sha256, created_at)
                         VALUES (?1, ?2, ?3, ?4)",
                        params![principal, key, request_sha256, now],
                    )
                    .map_err(q("record idempotent request"))?;
                    Ok(IdempotentStart::Fresh)
                }
                Some((hash, _, _, _)) if hash != request_sha256 => {
                    Err(AccessError::IdempotencyKeyReused)
                }
                Some((_, Some(status), body, _)) => {
                    Ok(IdempotentStart::Replay { status, body: body.unwrap_or_default() })
                }
                Some((_, None, _, at)) if now - at >= IN_FLIGHT_UNKNOWN_SECS => {
                    Err(AccessError::IdempotencyOutcomeUnknown)
                }
                Some(_) => Err(AccessError::IdempotencyInFlight),
            }
        })
    }

    /// Remembers the response to a [`IdempotentStart::Fresh`] request. A body larger than
    /// [`MAX_REMEMBERED_RESPONSE`] is not kept: a retry then gets
    /// `IDEMPOTENCY_OUTCOME_UNKNOWN` instead of a second effect.
    pub fn finish_idempotent(
        &self,
        principal: &str,
        key: &str,
        status: u16,
        body: &[u8],
    ) -> Result<(), AccessError> {
        if body.len() > MAX_REMEMBERED_RESPONSE {
            return Ok(());
        }
        self.db.write(|tx| {
            tx.execute(
                "UPDATE idempotent_requests SET status = ?3, body = ?4
                 WHERE principal = ?1 AND key = ?2 AND status IS NULL",
                params![principal, key, status, body],
            )
            .map_err(q("remember idempotent response"))?;
            Ok(())
        })
    }

    /// Forgets an in-flight request that failed before it could change anything (the
    /// transport's own refusals), so the key can be used again.
    pub fn forget_idempotent(&self, principal: &str, key: &str) -> Result<(), AccessError> {
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM idempotent_requests WHERE principal = ?1 AND key = ?2 AND status IS NULL",
                params![principal, key],
            )
            .map_err(q("forget idempotent request"))?;
            Ok(())
        })
    }

    /// A new one-time pairing code, valid [`PAIRING_CODE_TTL_SECS`].
    pub fn new_pairing_code(&self, now: i64) -> Result<PairingCode, AccessError> {
        let mut bytes = [0u8; PAIRING_CODE_CHARS];
        getrandom::fill(&mut bytes).map_err(|_| AccessError::NoEntropy)?;
        let raw: String = bytes.iter().map(|b| CROCKFORD[usize::from(b % 32)] as char).collect();
        let expires_at = now + PAIRING_CODE_TTL_SECS;
        self.db.write(|tx| {
            tx.execute("DELETE FROM pairing_codes WHERE expires_at <= ?1", [now])
                .map_err(q("expire pairing codes"))?;
            let live: i64 = tx
                .query_row("SELECT count(*) FROM pairing_codes WHERE used_at IS NULL", [], |r| {
                    r.get(0)
                })
                .map_err(q("count pairing codes"))?;
            if live >= MAX_LIVE_PAIRING_CODES {
                return Err(AccessError::TooManyPairingCodes);
            }
            tx.execute(
                "INSERT INTO pairing_codes (code_sha256, created_at, expires_at) VALUES (?1, ?2, ?3)",
                params![sha256_hex(raw.as_bytes()), now, expires_at],
            )
            .map_err(q("record pairing code"))?;
            Ok(())
        })?;
        let (a, b) = raw.split_at(PAIRING_CODE_CHARS / 2);
        Ok(PairingCode { code: format!("{a}-{b}"), expires_at })
    }

    /// Exchanges a pairing code for a device token, once. Wrong codes count toward
    /// [`MAX_PAIRING_FAILURES`]; past it every code is refused until the window passes.
    pub fn pair(&self, code: &str, name: &str, now: i64) -> Result<Pairing, AccessError> {
        let name = name.trim();
        if name.is_empty()
            || name.chars().count() > MAX_DEVICE_NAME
            || name.chars().any(char::is_control)
        {
            return Err(AccessError::BadDeviceName);
        }
        let hash = sha256_hex(normalize_code(code).as_bytes());
        let token = AccessToken::generate();
        let outcome = self.db.write(|tx| -> Result<Result<i64, AccessError>, AccessError> {
            let failures: i64 = tx
                .query_row(
                    "SELECT count(*) FROM pairing_failures WHERE at > ?1",
                    [now - PAIRING_CODE_TTL_SECS],
                    |r| r.get(0),
                )
                .map_err(q("count pairing failures"))?;
            if failures >= MAX_PAIRING_FAILURES {
                return Ok(Err(AccessError::PairingLocked));
            }
            let used = tx
                .execute(
                    "UPDATE pairing_codes SET used_at = ?2
                     WHERE code_sha256 = ?1 AND used_at IS NULL AND expires_at > ?2",
                    params![hash, now],
                )
                .map_err(q("use pairing code"))?;
            if used != 1 {
                tx.execute(
                    "DELETE FROM pairing_failures WHERE at <= ?1",
                    [now - PAIRING_CODE_TTL_SECS],
                )
                .map_err(q("expire pairing failures"))?;
                tx.execute("INSERT INTO pairing_failures (at) VALUES (?1)", [now])
                    .map_err(q("record pairing failure"))?;
                // Committed: a wrong code must count even though the call fails.
                return Ok(Err(AccessError::BadPairingCode));
            }
            let devices: i64 = tx
                .query_row("SELECT count(*) FROM devices WHERE revoked_at IS NULL", [], |r| {
                    r.get(0)
                })
                .map_err(q("count devices"))?;
            if devices >= MAX_DEVICES {
                return Ok(Err(AccessError::TooManyDevices));
            }
            tx.execute(
                "INSERT INTO devices (name, token_sha256, created_at) VALUES (?1, ?2, ?3)",
                params![name, sha256_hex(token.reveal().as_bytes()), now],
            )
            .map_err(q("record device"))?;
            Ok(Ok(tx.last_insert_rowid()))
        })?;
        let id = outcome?;
        Ok(Pairing { device: self.device(id)?, token: token.reveal().to_owned() })
    }

    fn device(&self, id: i64) -> Result<Device, AccessError> {
        self.db
            .read(|c| {
                c.query_row(
                    "SELECT id, name, created_at, last_used_at, revoked_at FROM devices WHERE id = ?1",
                    [id],
                    device,
                )
                .optional()
                .map_err(q("read device"))
            })?
            .ok_or(AccessError::DeviceNotFound(id))
    }

    /// Paired devices, newest first (revoked ones included, at most [`MAX_DEVICES`]).
    pub fn devices(&self) -> Result<Vec<Device>, AccessError> {
        self.db.read(|c| {
            c.prepare_cached(
                "SELECT id, name, created_at, last_used_at, revoked_at FROM devices
                 ORDER BY id DESC LIMIT ?1",
            )
            .and_then(|mut s| s.query_map([MAX_DEVICES], device)?.collect::<Result<Vec<_>, _>>())
            .map_err(q("list devices"))
        })
    }

    /// Revokes a device: its token stops working at once. Revoking twice is not an error.
    pub fn revoke(&self, id: i64, now: i64) -> Result<Device, AccessError> {
        let found = self.db.write(|tx| {
            tx.execute(
                "UPDATE devices SET revoked_at = coalesce(revoked_at, ?2) WHERE id = ?1",
                params![id, now],
            )
            .map_err(q("revoke device"))
        })?;
        if found == 0 {
            return Err(AccessError::DeviceNotFound(id));
        }
        self.device(id)
    }

    /// The live device a presented token belongs to (looked up by its SHA-256).
    pub fn device_for_token(&self, token: &str, now: i64) -> Result<Option<Device>, AccessError> {
        if token.len() > super::MAX_TOKEN_CHARS {
            return Ok(None);
        }
        let hash = sha256_hex(token.as_bytes());
        let found = self.db.read(|c| {
            c.prepare_cached(
                "SELECT id, name, created_at, last_used_at, revoked_at FROM devices
                 WHERE token_sha256 = ?1 AND revoked_at IS NULL",
            )
            .and_then(|mut s| s.query_row([&hash], device).optional())
            .map_err(q("find device"))
        })?;
        if let Some(d) = &found
            && d.last_used_at.is_none_or(|t| now - t >= 60)
        {
            self.db.write(|tx| {
                tx.execute("UPDATE devices SET last_used_at = ?2 WHERE id = ?1", params![d.id, now])
                    .map_err(q("touch device"))
            })?;
        }
        Ok(found)
    }
}

fn device(r: &rusqlite::Row<'_>) -> rusqlite::Result<Device> {
    Ok(Device {
        id: r.get(0)?,
        name: r.get(1)?,
        created_at: r.get(2)?,
        last_used_at: r.get(3)?,
        revoked_at: r.get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StewardError as _;

    fn store() -> (tempfile::TempDir, AccessStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = AccessStore::open(dir.path(), &Limits::default()).unwrap();
        (dir, s)
    }

    #[test]
    fn idempotency_replays_refuses_reuse_and_survives_reopen() {
        let (dir, s) = store();
        assert_eq!(s.begin_idempotent("ada", "k1", "h1", 100).unwrap(), IdempotentStart::Fresh);
        assert_eq!(
            s.begin_idempotent("ada", "k1", "h1", 101).unwrap_err().code(),
            "IDEMPOTENCY_IN_FLIGHT"
        );
        s.finish_idempotent("ada", "k1", 200, b"{\"ok\":1}").unwrap();
        drop(s);
        let s = AccessStore::open(dir.path(), &Limits::default()).unwrap();
        assert_eq!(
            s.begin_idempotent("ada", "k1", "h1", 102).unwrap(),
            IdempotentStart::Replay { status: 200, body: b"{\"ok\":1}".to_vec() }
        );
        assert_eq!(
            s.begin_idempotent("ada", "k1", "h2", 103).unwrap_err().code(),
            "IDEMPOTENCY_KEY_REUSED"
        );
        // Another principal's key is another key.
        assert_eq!(s.begin_idempotent("bob", "k1", "h2", 103).unwrap(), IdempotentStart::Fresh);
        // Cut off by a crash: unknown, never run again.
        assert_eq!(s.begin_idempotent("ada", "k2", "h", 1_000).unwrap(), IdempotentStart::Fresh);
        assert_eq!(
            s.begin_idempotent("ada", "k2", "h", 1_000 + IN_FLIGHT_UNKNOWN_SECS)
                .unwrap_err()
                .code(),
            "IDEMPOTENCY_OUTCOME_UNKNOWN"
        );
        // Forgotten: usable again. Expired: fresh.
        s.forget_idempotent("ada", "k2").unwrap();
        assert_eq!(s.begin_idempotent("ada", "k2", "h", 2_000).unwrap(), IdempotentStart::Fresh);
        assert_eq!(
            s.begin_idempotent("ada", "k1", "h9", 102 + IDEMPOTENCY_TTL_SECS + 1).unwrap(),
            IdempotentStart::Fresh
        );
        for bad in ["", "a b", &"k".repeat(201)] {
            assert_eq!(
                s.begin_idempotent("ada", bad, "h", 1).unwrap_err().code(),
                "IDEMPOTENCY_KEY_INVALID"
            );
        }
    }

    #[test]
    fn pairing_is_one_time_bounded_and_revocable() {
        let (_dir, s) = store();
        let code = s.new_pairing_code(1_000).unwrap();
        assert_eq!(code.code.len(), PAIRING_CODE_CHARS + 1);
        let p = s.pair(&code.code.to_lowercase(), "Ada's phone", 1_001).unwrap();
        assert_eq!(p.device.name, "Ada's phone");
        assert_eq!(s.device_for_token(&p.token, 1_002).unwrap().map(|d| d.id), Some(p.device.id));
        assert!(s.device_for_token("nope", 1_002).unwrap().is_none());
        // Once only.
        assert_eq!(s.pair(&code.code, "again", 1_003).unwrap_err().code(), "PAIRING_CODE_INVALID");
        // Expired.
        let old = s.new_pairing_code(2_000).unwrap();
        assert_eq!(
            s.pair(&old.code, "late", 2_000 + PAIRING_CODE_TTL_SECS).unwrap_err().code(),
            "PAIRING_CODE_INVALID"
        );
        // Revoked tokens stop working.
        let d = s.revoke(p.device.id, 3_000).unwrap();
        assert_eq!(d.revoked_at, Some(3_000));
        assert!(s.device_for_token(&p.token, 3_001).unwrap().is_none());
        assert_eq!(s.revoke(999, 3_000).unwrap_err().code(), "DEVICE_NOT_FOUND");
        assert_eq!(s.devices().unwrap().len(), 1);
        // Brute force: after the bound even the right code is refused.
        let good = s.new_pairing_code(4_000).unwrap();
        for i in 0..MAX_PAIRING_FAILURES {
            assert_eq!(
                s.pair("0000-0000", "x", 4_001 + i).unwrap_err().code(),
                "PAIRING_CODE_INVALID"
            );
        }
        assert_eq!(s.pair(&good.code, "x", 4_100).unwrap_err().code(), "PAIRING_LOCKED");
        assert_eq!(s.pair(&good.code, "", 4_100).unwrap_err().code(), "DEVICE_NAME_INVALID");
    }
}
