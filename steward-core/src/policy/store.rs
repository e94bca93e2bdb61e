//! The person's policy, versioned in `steward.db`: every change appends a row holding the
//! whole policy after it, who made it and (for an agent's proposal) the approval that allowed
//! it. Changes are optimistic: a change based on a stale version is refused.

use std::path::Path;

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Policy, PolicyChange, PolicyError};
use crate::{
    Limits,
    store::{Database, StoreError},
};

/// Most versions one history page returns.
/// Fixed (not a setting).
pub const MAX_POLICY_HISTORY: usize = 100;

/// One stored version of the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PolicyVersion {
    /// 0 for the built-in default, then 1, 2, …
    pub version: u64,
    /// The policy.
    pub policy: Policy,
    /// The change that made it (absent for version 0).
    pub change: Option<PolicyChange>,
    /// The person who made it.
    pub changed_by: Option<String>,
    /// The approval that authorized it, when an agent proposed it.
    pub approval_id: Option<i64>,
    /// Unix seconds (0 for version 0).
    pub at: i64,
}

/// The policy store of one home.
#[derive(Debug)]
pub struct PolicyStore {
    db: Database,
}

fn parse_row(
    version: i64,
    policy: &str,
    change: &str,
    changed_by: String,
    approval_id: Option<i64>,
    at: i64,
) -> Result<PolicyVersion, PolicyError> {
    let version = u64::try_from(version).unwrap_or(0);
    let corrupt = |e: serde_json::Error| PolicyError::Corrupt { version, reason: e.to_string() };
    Ok(PolicyVersion {
        version,
        policy: serde_json::from_str(policy).map_err(corrupt)?,
        change: Some(serde_json::from_str(change).map_err(corrupt)?),
        changed_by: Some(changed_by),
        approval_id,
        at,
    })
}

type Row = (i64, String, String, String, Option<i64>, i64);

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
}

impl PolicyStore {
    /// Opens (creating and migrating) `<home>/steward.db`.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, PolicyError> {
        Ok(Self { db: crate::approval::open_steward_db(home, limits)? })
    }

    /// The version in force.
    pub fn current(&self) -> Result<PolicyVersion, PolicyError> {
        let row = self.db.read(|c| {
            c.prepare_cached(
                "SELECT version, policy, change, changed_by, approval_id, at
                 FROM policy_versions ORDER BY version DESC LIMIT 1",
            )
            .and_then(|mut s| s.query_row([], read_row).optional())
            .map_err(|e| StoreError::query("policy current", e))
        })?;
        match row {
            Some((v, p, c, by, a, at)) => parse_row(v, &p, &c, by, a, at),
            None => Ok(PolicyVersion {
                version: 0,
                policy: Policy::default(),
                change: None,
                changed_by: None,
                approval_id: None,
                at: 0,
            }),
        }
    }

    /// The number of the version in force (cheap: one indexed lookup).
    pub fn version(&self) -> Result<u64, PolicyError> {
        let v: i64 = self.db.read(|c| {
            c.prepare_cached("SELECT coalesce(max(version), 0) FROM policy_versions")
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .map_err(|e| StoreError::query("policy version", e))
        })?;
        Ok(u64::try_from(v).unwrap_or(0))
    }

    /// Versions newest first (at most [`MAX_POLICY_HISTORY`]).
    pub fn history(&self, limit: usize) -> Result<Vec<PolicyVersion>, PolicyError> {
        let limit = i64::try_from(limit.clamp(1, MAX_POLICY_HISTORY)).unwrap_or(1);
        let rows = self.db.read(|c| {
            c.prepare_cached(
                "SELECT version, policy, change, changed_by, approval_id, at
                 FROM policy_versions ORDER BY version DESC LIMIT ?1",
            )
            .and_then(|mut s| s.query_map([limit], read_row)?.collect::<Result<Vec<_>, _>>())
            .map_err(|e| StoreError::query("policy history", e))
        })?;
        rows.into_iter().map(|(v, p, c, by, a, at)| parse_row(v, &p, &c, by, a, at)).collect()
    }

    /// Up to `limit` (at most [`MAX_POLICY_HISTORY`]) versions before version `before`, newest
    /// first: a page of what preceded the version a caller read.
    pub fn history_before(
        &self,
        before: u64,
        limit: usize,
    ) -> Result<Vec<PolicyVersion>, PolicyError> {
        let limit = i64::try_from(limit.clamp(1, MAX_POLICY_HISTORY)).unwrap_or(1);
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let rows = self.db.read(|c| {
            c.prepare_cached(
                "SELECT version, policy, change, changed_by, approval_id, at
                 FROM policy_versions WHERE version < ?1 ORDER BY version DESC LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map([before, limit], read_row)?.collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| StoreError::query("policy history", e))
        })?;
        rows.into_iter().map(|(v, p, c, by, a, at)| parse_row(v, &p, &c, by, a, at)).collect()
    }

    /// Applies `change` on top of the version in force and stores the result as the next
    /// version. `expected` (when given) must be the version in force. Callers check authority
    /// first: [`crate::Steward::set_policy`] needs a person, an agent's proposal an approval.
    pub(crate) fn apply(
        &self,
        change: &PolicyChange,
        changed_by: &str,
        approval_id: Option<i64>,
        expected: Option<u64>,
        now: i64,
    ) -> Result<PolicyVersion, PolicyError> {
        self.db.write(|tx| {
            let row = tx
                .query_row(
                    "SELECT version, policy, change, changed_by, approval_id, at
                     FROM policy_versions ORDER BY version DESC LIMIT 1",
                    [],
                    read_row,
                )
                .optional()
                .map_err(|e| StoreError::query("policy current", e))?;
            let (version, mut policy) = match row {
                Some((v, p, c, by, a, at)) => {
                    let cur = parse_row(v, &p, &c, by, a, at)?;
                    (cur.version, cur.policy)
                }
                None => (0, Policy::default()),
            };
            if let Some(id) = approval_id {
                let used: bool = tx
                    .query_row(
                        "SELECT EXISTS (SELECT 1 FROM policy_versions WHERE approval_id = ?1)",
                        [id],
                        |r| r.get(0),
                    )
                    .map_err(|e| StoreError::query("policy approval used", e))?;
                if used {
                    return Err(PolicyError::AlreadyApplied(id));
                }
            }
            if let Some(expected) = expected.filter(|e| *e != version) {
                return Err(PolicyError::VersionConflict { expected, actual: version });
            }
            policy.apply(change)?;
            let next = version + 1;
            tx.execute(
                "INSERT INTO policy_versions (version, policy, change, changed_by, approval_id, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    i64::try_from(next).unwrap_or(i64::MAX),
                    to_json(&policy),
                    to_json(change),
                    changed_by,
                    approval_id,
                    now
                ],
            )
            .map_err(|e| StoreError::query("policy insert", e))?;
            Ok(PolicyVersion {
                version: next,
                policy,
                change: Some(change.clone()),
                changed_by: Some(changed_by.to_owned()),
                approval_id,
                at: now,
            })
        })
    }
}

/// Serializes a stored shape (maps with string keys and plain enums: cannot fail).
fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
