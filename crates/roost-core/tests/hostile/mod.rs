//! Helpers of `hostile_props.rs`: the generated steps and the world they are applied to.

pub mod checks;
pub mod governance;
pub mod ops;
pub mod rows;
pub mod strategies;
pub mod tenant;
pub mod world;
