//! Calendars: recurrence expansion against libical's own cases (differential, with an
//! allow-list of every disagreement and its reason), and the sources (vdir, .ics) read into an
//! agenda.

mod caldav;
mod ics_differential;
mod interop;
mod recur;
mod sources;
mod store;
mod vectors;
mod write;
