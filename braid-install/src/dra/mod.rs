//! braid as a DRA driver (`--dra`).
pub mod plan;
