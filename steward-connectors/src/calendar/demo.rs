//! The demo's calendars and address book, in Italian and English, for the demo mailbox's
//! person (Giulia Bianchi) and her correspondents: two vdir calendars (work and personal) with
//! a weekly meeting in Rome that runs across every DST change, one of its occurrences moved and
//! one cancelled, an invitation she declined, all-day and transparent events; an address book
//! of two books that share a person (merged by address) and two people called Anna.
//!
//! Dates are relative to `now` (the Monday of its week in Rome), so the agenda of "this week"
//! always has something in it.

use std::path::Path;

use chrono::{Datelike as _, Duration, NaiveDate, TimeZone as _};

/// What the demo wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoPim {
    /// Calendar items (files).
    pub calendar_items: usize,
    /// Cards.
    pub cards: usize,
}

fn ics(body: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Steward//demo//EN\r\n{}END:VCALENDAR\r\n",
        body.replace('\n', "\r\n")
    )
}

fn stamp(d: NaiveDate) -> String {
    d.format("%Y%m%d").to_string()
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::write(path, text)
}

/// Writes the demo calendars under `calendars` and the demo address book under `contacts`
/// (both vdir roots), dated around `now` (Unix seconds).
pub fn write_demo_pim(calendars: &Path, contacts: &Path, now: i64) -> std::io::Result<DemoPim> {
    let rome = chrono_tz::Europe::Rome;
    let today = rome
        .timestamp_opt(now, 0)
        .single()
        .map_or_else(|| chrono::Utc::now().with_timezone(&rome).date_naive(), |t| t.date_naive());
    let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
    let d = |days: i64| stamp(monday + Duration::days(days));
    let work = calendars.join("lavoro");
    let personal = calendars.join("personale");
    write(&work.join("displayname"), "Lavoro / Work")?;
    write(&work.join("color"), "#1e88e5")?;
    write(&personal.join("displayname"), "Personale")?;
    write(&personal.join("color"), "#43a047")?;
    let me = "giulia.bianchi@example.it";
    let items: Vec<(std::path::PathBuf, String)> = vec![
        (
            work.join("riunione-settimanale.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:weekly-team@demo.steward\nDTSTART;TZID=Europe/Rome:{start}T093000\n\
                 DURATION:PT45M\nRRULE:FREQ=WEEKLY;BYDAY=MO\nEXDATE;TZID=Europe/Rome:{ex}T093000\n\
                 SUMMARY:Riunione settimanale / Weekly team meeting\nLOCATION:Sala Verdi\n\
                 ORGANIZER;CN=Marco Rossi:mailto:marco.rossi@studio-rossi.it\n\
                 ATTENDEE;CN=Giulia Bianchi;PARTSTAT=ACCEPTED:mailto:{me}\nEND:VEVENT\n\
                 BEGIN:VEVENT\nUID:weekly-team@demo.steward\nRECURRENCE-ID;TZID=Europe/Rome:{moved}T093000\n\
                 DTSTART;TZID=Europe/Rome:{to}T100000\nDURATION:PT45M\nSEQUENCE:1\n\
                 SUMMARY:Riunione settimanale (spostata al martedì / moved to Tuesday)\nLOCATION:Sala Verdi\n\
                 END:VEVENT\n",
                start = d(-56),
                ex = d(21),
                moved = d(7),
                to = d(8),
            )),
        ),
        (
            work.join("call-james.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:call-james@demo.steward\nDTSTART;TZID=Europe/Rome:{}T160000\n\
                 DTEND;TZID=Europe/Rome:{}T163000\nSUMMARY:Call with James Carter: Q3 plan\n\
                 DESCRIPTION:Review the Q3 budget and the Milan office move.\n\
                 ATTENDEE;CN=James Carter;PARTSTAT=ACCEPTED:mailto:james.carter@example.com\n\
                 ATTENDEE;CN=Giulia Bianchi;PARTSTAT=ACCEPTED:mailto:{me}\nEND:VEVENT\n",
                d(2),
                d(2)
            )),
        ),
        (
            work.join("webinar.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:vendor-webinar@demo.steward\nDTSTART;TZID=Europe/Rome:{}T140000\n\
                 DURATION:PT1H\nSUMMARY:Vendor webinar: cloud storage\n\
                 ORGANIZER:mailto:events@vendor.example.com\n\
                 ATTENDEE;CN=Giulia Bianchi;PARTSTAT=DECLINED:mailto:{me}\nEND:VEVENT\n",
                d(3)
            )),
        ),
        (
            work.join("commercialista.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:tax-advisor@demo.steward\nDTSTART;TZID=Europe/Rome:{}T110000\n\
                 DURATION:PT1H\nSUMMARY:Appuntamento dal commercialista (dichiarazione dei redditi)\n\
                 LOCATION:Studio Ferrari, Via Mazzini 4\n\
                 ATTENDEE;CN=Dott. Luca Ferrari:mailto:luca.ferrari@commercialista.it\nEND:VEVENT\n",
                d(9)
            )),
        ),
        (
            personal.join("dentista.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:dentist@demo.steward\nDTSTART;TZID=Europe/Rome:{}T150000\n\
                 DURATION:PT45M\nSUMMARY:Dentista / Dentist\nLOCATION:Studio dentistico, Via Roma 12\n\
                 END:VEVENT\n",
                d(3)
            )),
        ),
        (
            personal.join("condominio.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:condo-meeting@demo.steward\nDTSTART;TZID=Europe/Rome:{}T183000\n\
                 DURATION:PT2H\nSUMMARY:Assemblea di condominio\nLOCATION:Sala comune, Viale dei Tigli 8\n\
                 ORGANIZER;CN=Amministrazione Condominio:mailto:amministrazione@condominio-viale.it\n\
                 ATTENDEE;CN=Giulia Bianchi;PARTSTAT=NEEDS-ACTION:mailto:{me}\nEND:VEVENT\n",
                d(10)
            )),
        ),
        (
            personal.join("firenze.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:florence-trip@demo.steward\nDTSTART;VALUE=DATE:{}\n\
                 DTEND;VALUE=DATE:{}\nSUMMARY:Viaggio a Firenze / Trip to Florence\nEND:VEVENT\n",
                d(18),
                d(20)
            )),
        ),
        (
            personal.join("compleanno-elena.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:elena-birthday@demo.steward\nDTSTART;VALUE=DATE:{}\n\
                 RRULE:FREQ=YEARLY\nTRANSP:TRANSPARENT\nSUMMARY:Compleanno di Elena\nEND:VEVENT\n",
                d(4)
            )),
        ),
        (
            personal.join("yoga.ics"),
            ics(&format!(
                "BEGIN:VEVENT\nUID:yoga@demo.steward\nDTSTART;TZID=Europe/Rome:{}T190000\n\
                 DURATION:PT1H\nRRULE:FREQ=WEEKLY;BYDAY=TU,TH;UNTIL={}T235959Z\nSUMMARY:Yoga\n\
                 LOCATION:Palestra Aurora\nEND:VEVENT\n",
                d(-27),
                d(90)
            )),
        ),
    ];
    for (path, text) in &items {
        write(path, text)?;
    }
    let card = |uid: &str, body: &str| {
        format!(
            "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\n{}END:VCARD\r\n",
            body.replace('\n', "\r\n")
        )
    };
    let work_book = contacts.join("lavoro");
    let home_book = contacts.join("personale");
    write(&work_book.join("displayname"), "Lavoro")?;
    write(&home_book.join("displayname"), "Personale")?;
    let cards: Vec<(std::path::PathBuf, String)> = vec![
        (
            work_book.join("marco-rossi.vcf"),
            card(
                "marco-work",
                "FN:Marco Rossi\nN:Rossi;Marco;;;\nORG:Studio Rossi\nTITLE:Architetto\nEMAIL;TYPE=work:marco.rossi@studio-rossi.it\nTEL;TYPE=work:02 8765 4321\n",
            ),
        ),
        // The same Marco in the personal book: merged by address, both sources kept.
        (
            home_book.join("marco.vcf"),
            card(
                "marco-home",
                "FN:Marco Rossi\nNICKNAME:Marchino\nEMAIL:Marco.Rossi@studio-rossi.it\nTEL;TYPE=cell:347 123 4567\n",
            ),
        ),
        (
            work_book.join("luca-ferrari.vcf"),
            card(
                "luca",
                "FN:Dott. Luca Ferrari\nN:Ferrari;Luca;;Dott.;\nORG:Studio Ferrari\nTITLE:Commercialista\nEMAIL:luca.ferrari@commercialista.it\nTEL:06 1234 5678\n",
            ),
        ),
        (
            work_book.join("james-carter.vcf"),
            card(
                "james",
                "FN:James Carter\nORG:Carter & Co\nEMAIL:james.carter@example.com\nTEL:+44 20 7946 0958\n",
            ),
        ),
        (
            work_book.join("priya-shah.vcf"),
            card("priya", "FN:Priya Shah\nORG:Shah Consulting\nEMAIL:priya.shah@example.co.uk\n"),
        ),
        (
            work_book.join("paolo-esposito.vcf"),
            card(
                "paolo",
                "FN:Paolo Esposito\nORG:Esposito Architetti\nEMAIL:paolo@esposito-arch.it\n",
            ),
        ),
        (
            home_book.join("anna-mueller.vcf"),
            card("anna-m", "FN:Anna Müller\nNICKNAME:Anni\nEMAIL:anna.mueller@example.de\n"),
        ),
        (
            home_book.join("anna-ricci.vcf"),
            card(
                "anna-r",
                "FN:Anna Ricci\nORG:Scuola Manzoni\nTITLE:Maestra / Teacher\nEMAIL;TYPE=work,pref:anna.ricci@scuola-manzoni.example.it\nEMAIL;TYPE=home:anna.ricci@example.it\n",
            ),
        ),
        (
            home_book.join("elena-conti.vcf"),
            card(
                "elena",
                "FN:Elena Conti\nBDAY:1990-03-14\nEMAIL:elena.conti@example.org\nTEL;TYPE=cell:333 765 4321\n",
            ),
        ),
        (
            home_book.join("sofia-greco.vcf"),
            card(
                "sofia",
                "FN:Sofia Greco\nORG:Università\nEMAIL:sofia.greco@universita.example.it\n",
            ),
        ),
        (
            home_book.join("chiara-romano.vcf"),
            card("chiara", "FN:Chiara Romano\nEMAIL:chiara.romano@example.it\n"),
        ),
        (
            home_book.join("condominio.vcf"),
            card(
                "condo",
                "FN:Amministrazione Condominio\nORG:Condominio Viale dei Tigli\nEMAIL:amministrazione@condominio-viale.it\nTEL:06 555 0101\n",
            ),
        ),
    ];
    for (path, text) in &cards {
        write(path, text)?;
    }
    Ok(DemoPim { calendar_items: items.len(), cards: cards.len() })
}
