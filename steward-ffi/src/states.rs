//! The core's states as UniFFI enums (Swift `enum`s, Python enum members) instead of strings:
//! each mirrors one core enum variant for variant, converted both ways, so a new core state
//! fails to compile here rather than reaching the launcher as an unknown string.

/// Mirrors a core enum: `mirror! { /// doc  Name from core::Path { /// doc  Variant, … } }`.
macro_rules! mirror {
    (
        $(#[$meta:meta])*
        $name:ident from $core:path {
            $( $(#[$vmeta:meta])* $variant:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl From<$core> for $name {
            fn from(c: $core) -> Self {
                use $core as Core;
                match c { $(Core::$variant => Self::$variant),+ }
            }
        }

        impl From<$name> for $core {
            fn from(c: $name) -> Self {
                use $core as Core;
                match c { $($name::$variant => Core::$variant),+ }
            }
        }
    };
}

mirror! {
    /// A watch's state.
    WatchStatus from steward_core::watch::WatchStatus {
        /// Polled; its events are queued.
        Active,
        /// A person stopped it.
        Stopped,
        /// Its time ran out.
        Expired,
        /// Its resource reached an end.
        Completed,
    }
}

mirror! {
    /// A queued watch event's state.
    WatchEventStatus from steward_core::watch::EventStatus {
        /// Waiting for delivery.
        Pending,
        /// The person was told.
        Delivered,
        /// Given up after its attempts ran out.
        Failed,
    }
}

mirror! {
    /// What came of delivering a watch event.
    DeliveryResult from steward_core::watch::DeliveryResult {
        /// The person was told.
        Delivered,
        /// Given up.
        Failed,
    }
}

mirror! {
    /// How much a person must do before a tool runs.
    ApprovalLevel from steward_core::policy::Level {
        /// Runs without a trace beyond the tool's own.
        Auto,
        /// Runs, audited.
        Logged,
        /// A person confirms first.
        Confirm,
        /// A person confirms with their PIN.
        Secure,
    }
}

mirror! {
    /// An approval request's state.
    ApprovalState from steward_core::approval::ApprovalStatus {
        /// Waiting for a person.
        Requested,
        /// Approved as proposed.
        Approved,
        /// Approved with the person's replacement input.
        Edited,
        /// Denied.
        Denied,
        /// Sent back with the person's feedback.
        RevisionRequested,
        /// Nobody answered in time: a denial.
        Expired,
        /// Withdrawn before anyone answered.
        Cancelled,
    }
}

mirror! {
    /// Where a journaled operation is.
    OperationState from steward_core::journal::OpState {
        /// Waiting for its time.
        Scheduled,
        /// Claimed; the backend is (about to be) called.
        Started,
        /// The backend returned; not yet observed.
        BackendReturned,
        /// Unknown: only evidence can tell.
        Unknown,
        /// Refused before anything could have happened.
        Failed,
        /// Observed in the mirror.
        Confirmed,
        /// Not confirmed in time: a person looks.
        NeedsReview,
        /// Not confirmed in time (calendar).
        RetryExhausted,
    }
}
