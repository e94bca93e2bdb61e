//! Contacts: vCard reading against Python vobject's on the corpora (differential, with an
//! allow-list of every disagreement and its reason), and address books (a vdir and a
//! many-card `.vcf`) merged and asked who is meant.

mod carddav;
mod sources;
mod vcf_differential;
