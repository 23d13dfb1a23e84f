//! The progress engine: requests, matching, protocols and the wait policy.
