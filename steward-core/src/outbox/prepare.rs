//! Preparing a mail: checked headers and bodies, attachments resolved and digested, the
//! Message-ID and the outcome the journal expects.

use super::*;

/// Hashes the file at `path`, refusing more than [`MAX_ATTACHMENT_BYTES`].
pub(super) fn file_digest(path: &Path) -> std::io::Result<(u64, String)> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut r = f.take(MAX_ATTACHMENT_BYTES + 1);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        n += k as u64;
        h.update(&buf[..k]);
    }
    Ok((n, hex(&h.finalize())))
}

/// Reads an attachment's bytes and checks that they are the ones journaled.
pub fn read_attachment(a: &OutgoingAttachment) -> Result<Vec<u8>, SubmitError> {
    let build = |message: String| SubmitError { class: SubmitClass::Build, message };
    if a.size > MAX_ATTACHMENT_BYTES {
        return Err(build(format!("{} is larger than the limit", a.name)));
    }
    let bytes = std::fs::read(&a.path).map_err(|e| build(format!("{}: {e}", a.path.display())))?;
    if hex(&Sha256::digest(&bytes)) != a.sha256 {
        return Err(build(format!(
            "{} changed since the mail was approved; nothing was sent",
            a.path.display()
        )));
    }
    Ok(bytes)
}

pub(super) fn mime_type_of(path: &Path) -> &'static str {
    let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "pdf" => "application/pdf",
        "txt" | "md" => "text/plain",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ics" => "text/calendar",
        "zip" => "application/zip",
        "json" => "application/json",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        _ => "application/octet-stream",
    }
}

impl Steward {
    /// Validates a draft and fixes everything the send needs: our Message-ID, the reply's
    /// References (from the mirror when the answered message is there), and each attachment's
    /// bytes by hash (files pass the sensitive-path guard). Nothing is journaled yet.
    pub fn prepare_mail(&self, draft: &MailDraft, now: i64) -> Result<OutgoingMail, OutboxError> {
        if draft.account.trim().is_empty() {
            return Err(OutboxError::Invalid("an account is required".into()));
        }
        check_address("from", &draft.from)?;
        if draft.to.is_empty() && draft.cc.is_empty() && draft.bcc.is_empty() {
            return Err(OutboxError::Invalid("at least one recipient is required".into()));
        }
        for (field, list) in [("to", &draft.to), ("cc", &draft.cc), ("bcc", &draft.bcc)] {
            if list.len() > MAX_RECIPIENTS {
                return Err(OutboxError::Invalid(format!(
                    "{field} names {} recipients; the limit is {MAX_RECIPIENTS}",
                    list.len()
                )));
            }
            for a in list {
                check_address(field, a)?;
            }
        }
        check_line("subject", &draft.subject, MAX_SUBJECT_BYTES)?;
        if let Some(n) = &draft.from_name {
            check_line("from_name", n, MAX_SUBJECT_BYTES)?;
        }
        if draft.body.len() > MAX_BODY_BYTES
            || draft.calendar.as_ref().is_some_and(|c| c.len() > MAX_BODY_BYTES)
        {
            return Err(OutboxError::Invalid(format!(
                "the body (or its calendar part) is longer than {MAX_BODY_BYTES} bytes"
            )));
        }
        if draft.attachments.len() > MAX_ATTACHMENTS {
            return Err(OutboxError::Invalid(format!(
                "{} attachments; the limit is {MAX_ATTACHMENTS}",
                draft.attachments.len()
            )));
        }
        let in_reply_to = match &draft.in_reply_to {
            Some(id) => {
                let id = normalize_message_id(id);
                check_line("in_reply_to", &id, MAX_ADDRESS_BYTES * 4)?;
                if id.is_empty() || id.chars().any(char::is_whitespace) {
                    return Err(OutboxError::Invalid(format!(
                        "in_reply_to {id:?} is not a Message-ID"
                    )));
                }
                Some(id)
            }
            None => None,
        };
        let references = match &in_reply_to {
            Some(parent) => {
                let mut refs = self.mirror().references_of(&draft.account, parent)?;
                refs.retain(|r| r != parent);
                refs.push(parent.clone());
                let cut = refs.len().saturating_sub(MAX_REFERENCES);
                refs.drain(..cut);
                refs
            }
            None => Vec::new(),
        };
        let mut attachments = Vec::with_capacity(draft.attachments.len());
        for spec in &draft.attachments {
            attachments.push(self.resolve_attachment(spec)?);
        }
        Ok(OutgoingMail {
            account: draft.account.trim().to_owned(),
            from: draft.from.trim().to_owned(),
            from_name: draft.from_name.clone().filter(|n| !n.trim().is_empty()),
            to: draft.to.clone(),
            cc: draft.cc.clone(),
            bcc: draft.bcc.clone(),
            subject: draft.subject.clone(),
            body: draft.body.clone(),
            message_id: new_message_id(&draft.from)?,
            in_reply_to,
            references,
            attachments,
            calendar: draft.calendar.clone(),
            date: now,
        })
    }

    pub(super) fn resolve_attachment(&self, spec: &str) -> Result<OutgoingAttachment, OutboxError> {
        if let Some(rest) = spec.strip_prefix("attachment:") {
            let not_found = || OutboxError::AttachmentNotFound(spec.to_owned());
            let (msg, pos) = rest.split_once(':').ok_or_else(not_found)?;
            let (msg, pos) =
                (msg.parse().map_err(|_| not_found())?, pos.parse().map_err(|_| not_found())?);
            let (name, mime_type, size, sha) =
                self.mirror().attachment_blob(msg, pos)?.ok_or_else(not_found)?;
            let path = self.mirror().blob_path(&sha).ok_or_else(not_found)?;
            return Ok(OutgoingAttachment {
                path,
                name: name.unwrap_or_else(|| format!("attachment-{pos}")),
                mime_type,
                size,
                sha256: sha,
            });
        }
        let path = crate::paths::guard_file(Path::new(spec), self.home())?;
        let (size, sha256) = file_digest(&path)
            .map_err(|e| PathError::NotAFile { path: path.clone(), why: e.to_string() })?;
        if size > MAX_ATTACHMENT_BYTES {
            return Err(PathError::TooLarge { path, bytes: size }.into());
        }
        Ok(OutgoingAttachment {
            name: path
                .file_name()
                .map_or_else(|| "attachment".to_owned(), |n| n.to_string_lossy().into_owned()),
            mime_type: mime_type_of(&path).to_owned(),
            path,
            size,
            sha256,
        })
    }
}
