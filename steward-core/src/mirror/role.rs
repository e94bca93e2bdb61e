//! Mailbox role classification from names, in English and Italian, including Gmail's `[Gmail]/…`
//! and Maildir++ dotted names.

use super::model::MailboxRole;

/// Classifies a mailbox by its name (the last path segment, then the whole path).
pub fn classify_mailbox(name: &str) -> MailboxRole {
    let norm = normalize(name);
    let last = norm.rsplit(['/', '.']).find(|s| !s.is_empty()).unwrap_or(norm.as_str());
    if let Some(role) = classify_segment(last).or_else(|| classify_segment(&norm)) {
        return role;
    }
    MailboxRole::Other
}

fn normalize(name: &str) -> String {
    let mut s = name.trim().trim_end_matches(".mbox").to_lowercase();
    // Gmail prefixes, in any locale Mail.app uses.
    for prefix in ["[gmail]/", "[google mail]/", "[gmail].", "[google mail]."] {
        if let Some(rest) = s.strip_prefix(prefix) {
            s = rest.to_owned();
        }
    }
    s.trim_start_matches('.').to_owned()
}

fn classify_segment(seg: &str) -> Option<MailboxRole> {
    use MailboxRole as R;
    let seg = seg.trim();
    let role = match seg {
        "inbox" | "posta in arrivo" | "in arrivo" => R::Inbox,
        "sent" | "sent mail" | "sent items" | "sent messages" | "posta inviata" | "inviati"
        | "inviata" | "elementi inviati" | "messaggi inviati" | "outbox sent" => R::Sent,
        "drafts" | "draft" | "bozze" | "bozza" => R::Drafts,
        "trash" | "deleted" | "deleted items" | "deleted messages" | "bin" | "cestino"
        | "posta eliminata" | "elementi eliminati" | "eliminati" => R::Trash,
        "junk" | "spam" | "junk e-mail" | "junk email" | "bulk mail" | "posta indesiderata"
        | "indesiderata" => R::Junk,
        "archive" | "archives" | "archived" | "archivio" | "archiviati" => R::Archive,
        "all mail" | "tutti i messaggi" | "tutta la posta" => R::AllMail,
        _ => return None,
    };
    Some(role)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, expect: MailboxRole) {
        assert_eq!(classify_mailbox(name), expect, "{name}");
    }

    #[test]
    fn classifies_english_italian_gmail_and_maildirpp() {
        use MailboxRole as R;
        check("INBOX", R::Inbox);
        check("Sent", R::Sent);
        check("Sent Items", R::Sent);
        check("Posta inviata", R::Sent);
        check("Inviati", R::Sent);
        check("[Gmail]/Sent Mail", R::Sent);
        check(".Sent", R::Sent);
        check("Bozze", R::Drafts);
        check("Cestino", R::Trash);
        check("[Gmail]/Trash", R::Trash);
        check("Posta indesiderata", R::Junk);
        check("Spam", R::Junk);
        check("[Gmail]/All Mail", R::AllMail);
        check("[Gmail].All Mail", R::AllMail);
        check("Archivio", R::Archive);
        check("Archive.mbox", R::Archive);
        check("Work/Clients", R::Other);
        check("Sentinel", R::Other);
        check("", R::Other);
    }
}
