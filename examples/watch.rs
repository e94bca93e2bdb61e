//! A durable watch: "remind me at 18:00" as a `time` watch, polled across a (simulated) clock,
//! its event queued exactly once and delivered through the host's `Delivery`, then the same
//! poll again queuing nothing.
//!
//! ```sh
//! cargo run --example watch                 # a scratch home
//! cargo run --example watch -- ~/steward    # an existing home (the watch is left completed)
//! ```

use std::cell::RefCell;

use steward_core::{
    Steward,
    time::{CivilTime, now_secs},
    watch::{Delivery, DeliveryError, QueuedEvent, WatchDefinition},
};

/// The host's channel: here, standard output.
struct Printer {
    sent: RefCell<Vec<String>>,
}

impl Delivery for Printer {
    fn compose(&self, event: &QueuedEvent) -> Result<String, String> {
        // A model could phrase it; the deterministic text is always there as the fallback.
        Ok(format!("Reminder: {}", event.event.fallback_text))
    }

    fn send(&self, _event: &QueuedEvent, text: &str) -> Result<(), DeliveryError> {
        println!("  -> {text}");
        self.sent.borrow_mut().push(text.to_owned());
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = std::env::args_os().nth(1).map_or_else(
        || std::env::temp_dir().join(format!("steward-watch-{}", std::process::id())),
        Into::into,
    );
    let steward = steward_connectors::watches::register(Steward::builder()).home(&home).open()?;

    let now = now_secs();
    let at = CivilTime::from_unix(now + 3_600).rfc3339();
    let definition = WatchDefinition::from_json(
        &serde_json::json!({
            "source": "time",
            "resource_ref": at,
            "instruction": "remind me to call Ada",
            "rules": [{"id": "ring", "event": "time.reached", "once": true}],
        })
        .to_string(),
    )?;
    let watch = steward.create_watch(&definition)?;
    println!("watch #{} on {} ({}), expires {}", watch.id, watch.source, at, watch.expires_at);

    // Before the instant: nothing. After it: one event, queued once however often we poll.
    for (label, clock) in [("now", now), ("+1 h", now + 3_601), ("+1 h again", now + 3_602)] {
        let report = steward.poll_watches(Some(clock))?;
        println!("poll at {label}: checked {}, queued {}", report.checked, report.queued);
    }
    let printer = Printer { sent: RefCell::new(Vec::new()) };
    let delivered = steward.deliver_watch_events(&printer, 20, Some(now + 3_602))?;
    println!(
        "delivered {}, pending {}",
        delivered.delivered,
        steward.watch_health()?.pending_events
    );
    assert_eq!(printer.sent.borrow().len(), 1, "exactly one reminder");
    println!("watch is now {}", steward.watch(watch.id)?.status);
    Ok(())
}
