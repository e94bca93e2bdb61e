//! The facade's devices and idempotent requests: what the server calls instead of the access
//! store.

use super::Steward;
use crate::{
    access::{AccessError, Device, IdempotentStart, Pairing, PairingCode},
    time::now_secs,
};

/// The HTTP status of a request that could not run (a store or source unavailable): its key
/// is forgotten so a retry runs it, instead of replaying the failure.
/// Fixed (not a setting).
const NOT_RUN_STATUS: u16 = 503;

impl Steward {
    /// The paired device a bearer token belongs to (`None`: no live device has it).
    pub fn device_for_token(&self, token: &str) -> Result<Option<Device>, AccessError> {
        self.access()?.device_for_token(token, now_secs())
    }

    /// Pairs a device with a one-use code; the pairing carries its token once.
    pub fn pair_device(&self, code: &str, name: &str) -> Result<Pairing, AccessError> {
        self.access()?.pair(code, name, now_secs())
    }

    /// A new one-use pairing code.
    pub fn new_pairing_code(&self) -> Result<PairingCode, AccessError> {
        self.access()?.new_pairing_code(now_secs())
    }

    /// The paired devices.
    pub fn devices(&self) -> Result<Vec<Device>, AccessError> {
        self.access()?.devices()
    }

    /// Revokes a device (idempotent).
    pub fn revoke_device(&self, id: i64) -> Result<Device, AccessError> {
        self.access()?.revoke(id, now_secs())
    }

    /// Starts an idempotent request of `principal` under `key`: run it, replay the response
    /// remembered for it, or refuse a key reused for a different request.
    pub fn begin_idempotent(
        &self,
        principal: &str,
        key: &str,
        fingerprint: &str,
    ) -> Result<IdempotentStart, AccessError> {
        self.access()?.begin_idempotent(principal, key, fingerprint, now_secs())
    }

    /// Settles an idempotent request with its response: remembered for replay, unless it could
    /// not run at all (503), when the key is forgotten so that a retry runs it.
    pub fn settle_idempotent(
        &self,
        principal: &str,
        key: &str,
        status: u16,
        body: &[u8],
    ) -> Result<(), AccessError> {
        let access = self.access()?;
        if status == NOT_RUN_STATUS {
            access.forget_idempotent(principal, key)
        } else {
            access.finish_idempotent(principal, key, status, body)
        }
    }
}
