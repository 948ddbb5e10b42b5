//! The hierarchical Markov model of a storage workload (seed 000, section III; design.md
//! "The model"): tree geometry, mergeable sufficient statistics, finalisation into a model
//! document, and the sampler that regenerates requests from it.

pub mod count;
pub mod data;
pub mod dist;
pub mod finalize;
pub mod hist;
pub mod history;
pub mod lastseen;
pub mod nodemap;
pub mod opmix;
pub mod partition;
pub mod pipeline;
pub mod sample;
pub mod segment;
pub mod stats;
pub mod ties;
pub mod tree;
