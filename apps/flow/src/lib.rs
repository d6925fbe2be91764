//! `flow`: incompressible flow through porous sphere beds.
#![warn(missing_docs)]

pub mod geometry;
pub mod solver;
